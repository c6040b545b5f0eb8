import { describe, expect, it } from 'vitest';
import type { EvalItem } from './datasets';
import { scoreOutput, summarize, type SampleRecord } from './evaluate';

const sample = (correct: boolean[], tokens: number, seconds: number): SampleRecord => ({
  type: 'sample', sample_idx: 0, question: 'q', task: 'math', gold: '1', pred_answer_parsed: '1', pred_code_parsed: null, raw_output: '',
  correct: correct[0]!, solved: correct.some(Boolean), tokens, latent_steps: 0, seconds, seed: null,
  rollouts: correct.map((c) => ({ raw_output: '', pred: '1', correct: c, tokens, retried: false })),
});

describe('summarize', () => {
  it('gives per-rollout accuracy, their mean and pass@k', () => {
    // rollout 0: 2/4 right, rollout 1: 1/4, rollout 2: 0/4; questions with any right rollout: 2 of 4
    const s = summarize([sample([true, false, false], 10, 1), sample([true, true, false], 20, 2), sample([false, false, false], 30, 3),
      sample([false, false, false], 40, 4)], 3);
    expect(s.per_rollout_accuracy).toEqual([0.5, 0.25, 0]);
    expect(s.accuracy).toBeCloseTo(0.25, 15);
    expect(s.pass_at_k).toBe(0.5);
    expect(s.tokens_mean).toBe(25);
    expect(s.seconds_mean).toBe(2.5);
    expect(summarize([], 1)).toMatchObject({ samples: 0, accuracy: 0, pass_at_k: 0 });
    expect(s.by_group).toBeUndefined();
  });

  it('gives the first rollout\'s accuracy per group, groups in natural order', () => {
    const g = (correct: boolean, level: string, subject: string) => ({ ...sample([correct], 1, 1), groups: { level, subject } });
    const s = summarize([g(true, '10', 'Algebra'), g(false, '2', 'Algebra'), g(true, '2', 'Geometry'), g(true, '2', 'Algebra')], 1);
    expect(s.by_group).toEqual({
      'level=2': { samples: 3, accuracy: 2 / 3 }, 'level=10': { samples: 1, accuracy: 1 },
      'subject=Algebra': { samples: 3, accuracy: 2 / 3 }, 'subject=Geometry': { samples: 1, accuracy: 1 },
    });
    expect(Object.keys(s.by_group!)).toEqual(['level=2', 'level=10', 'subject=Algebra', 'subject=Geometry']);
  });
});

describe('scoreOutput', () => {
  const math: EvalItem = { index: 0, question: 'q', task: 'math', check: { kind: 'math', gold: '\\frac{1}{2}' } };
  const choice: EvalItem = { index: 0, question: 'q', task: 'choice', check: { kind: 'choice', gold: 'B' } };
  const mbpp: EvalItem = {
    index: 0,
    question: 'q',
    task: 'code',
    fnName: 'add',
    check: {
      kind: 'mbppplus',
      test: 'inputs = [[1, 2], [3, 4]]\nresults = [3, 7]\nfor i, r in zip(inputs, results):\n    assert add(*i) == r\n',
    },
  };
  const lcb: EvalItem = {
    index: 0,
    question: 'q',
    task: 'code',
    check: {
      kind: 'lcb',
      tests: [
        { input: '2 3\n', output: '5\n', testtype: 'stdin' },
        { input: '10 -4\n', output: '6', testtype: 'stdin' },
      ],
    },
  };

  it('scores math and choice outputs by their parsed answers', async () => {
    // 1/2 -> "0" first
    expect(await scoreOutput(math, 'so \\boxed{\\frac{1}{2}}')).toEqual({ pred: '\\frac{1}{2}', correct: true, detail: 'intpart' });
    expect(await scoreOutput(math, 'so \\boxed{0.5}')).toEqual({ pred: '0.5', correct: true, detail: 'intpart' }); // upstream's leniency
    expect(await scoreOutput(math, 'so \\boxed{2}')).toEqual({ pred: '2', correct: false });
    expect(await scoreOutput(choice, 'Final Choice: B')).toEqual({ pred: 'B', correct: true });
    expect(await scoreOutput(choice, 'no idea')).toEqual({ pred: 'A', correct: false });
    const qa: EvalItem = { index: 0, question: 'q', task: 'math', check: { kind: 'freeform', gold: ['NYC', 'New York City'] } };
    expect(await scoreOutput(qa, 'Searching...\nFinal Answer: new york city.')).toEqual({ pred: 'new york city.', correct: true });
    expect(await scoreOutput(qa, 'It is \\boxed{Boston}')).toEqual({ pred: 'Boston', correct: false });
  });

  it('runs code against its tests', async () => {
    expect(await scoreOutput(mbpp, '```python\ndef add(a, b):\n    return a + b\n```')).toEqual({
      pred: 'def add(a, b):\n    return a + b\n',
      correct: true,
    });
    const wrong = await scoreOutput(mbpp, '```python\ndef add(a, b):\n    return a - b\n```');
    expect(wrong.correct).toBe(false);
    expect(wrong.detail).toMatch(/AssertionError/);
    expect(await scoreOutput(mbpp, 'I cannot write code')).toEqual({ pred: null, correct: false, detail: 'no code' });
    const prog = '```python\na, b = map(int, input().split())\nprint(a + b)\n```';
    expect((await scoreOutput(lcb, prog)).correct).toBe(true);
    const off = await scoreOutput(lcb, '```python\na, b = map(int, input().split())\nprint(a * b)\n```');
    expect(off).toMatchObject({ correct: false, detail: 'test 1/2: wrong answer' });
  }, 30_000);
});
