// The tiny system's task family (src/eval/tiny-task.ts): determinism, arithmetic, split disjointness,
// length bounds, scoring, role columns and token counts under the tiny tokenizer.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { generateTask, MAX_VALUE, scoreAnswer, TASK_SPLITS, taskSplit, toJsonl, type TaskRow } from '../src/eval/tiny-task.ts';
import { taskTokenizer } from '../scripts/tiny-system/train-agents.ts';
import { loadTokenizer } from '../src/tokenizer/tokenizer.ts';
import { roleExample, rowTask } from '../src/train/data/index.ts';

const ROOT = resolve(import.meta.dirname, '..');
const test = taskSplit('test');
const validation = taskSplit('validation');
const train = taskSplit('train');
const splits = { train, validation, test };

/** Recomputes a row from its refined plan: every equation true, chained, and the last result = answer_value. */
function checkArithmetic(row: TaskRow): void {
  const lines = row.refined_plan.split('\n');
  let prev: number | undefined;
  lines.forEach((line, i) => {
    const m = line.match(/^Step (\d+): (\d+) ([-+*]) (\d+) = (\d+)\.$/);
    expect(m, line).not.toBeNull();
    const [, step, a, op, b, c] = m!;
    expect(Number(step)).toBe(i + 1);
    const x = Number(a), y = Number(b), z = Number(c);
    expect(op === '+' ? x + y : op === '-' ? x - y : x * y, line).toBe(z);
    if (prev !== undefined) expect(x, line).toBe(prev);
    for (const v of [x, y, z]) expect(v >= 1 && v <= MAX_VALUE, line).toBe(true);
    prev = z;
  });
  expect(prev).toBe(row.answer_value);
  // The question's start amount opens the chain, and the answer repeats the equations.
  const start = lines[0]!.split(' ')[2];
  expect(row.question).toMatch(new RegExp(`^[A-Z][a-z]+ has ${start} [a-z]+\\.`));
  const eqs = lines.map((l) => l.replace(/^Step \d+: /, '').replace(/\.$/, ''));
  expect(row.answer).toBe(`${eqs.join(', ')}. The answer is \\boxed{${row.answer_value}}.`);
  // The plan has the same number of steps and names each operation, operands in equation order, no result.
  const plan = row.plan.split('\n');
  expect(plan).toHaveLength(lines.length);
  plan.forEach((p, i) => {
    const [, , op, n] = lines[i]!.match(/^Step \d+: (\d+) ([-+*]) (\d+)/)!;
    const verb = { '+': `add ${n}`, '-': `subtract ${n}`, '*': `multiply by ${n}` }[op!]!;
    expect(p).toBe(`Step ${i + 1}: ${i === 0 ? `from ${start}, ` : ''}${verb}.`);
  });
}

describe('tiny task generator', () => {
  it('is deterministic in the seed and pinned to reference rows', () => {
    expect(generateTask(7, 50)).toEqual(generateTask(7, 50));
    const a = generateTask(7, 50).map((r) => r.question);
    const b = generateTask(8, 50).map((r) => r.question);
    expect(a.filter((q) => b.includes(q)).length).toBeLessThan(3);
    expect(generateTask(7, 10)).toEqual(generateTask(7, 50).slice(0, 10));
    expect(generateTask(1, 1)[0]).toEqual({
      question: 'Ann has 7 apples. She doubles them. She loses 7. She doubles them. How many apples does Ann have now?',
      plan: 'Step 1: from 7, multiply by 2.\nStep 2: subtract 7.\nStep 3: multiply by 2.',
      refined_plan: 'Step 1: 7 * 2 = 14.\nStep 2: 14 - 7 = 7.\nStep 3: 7 * 2 = 14.',
      answer: '7 * 2 = 14, 14 - 7 = 7, 7 * 2 = 14. The answer is \\boxed{14}.',
      answer_value: 14,
      task_family: 'math',
    });
    expect(test[0]!.question).toBe('Tom has 8 apples. He finds 8 more. He gives away 6. How many apples does Tom have now?');
    expect(validation[0]!.question).toBe('Tom has 6 pens. He gives away 3. He gets 1 more. How many pens does Tom have now?');
    expect(train[0]!.question).toBe('Sam has 2 cards. He gets 4 more. He sells 2. He gives away 2. How many cards does Sam have now?');
    expect(() => generateTask(1, -1)).toThrow(RangeError);
  });

  it('has the fixed split sizes, distinct questions within and across splits', () => {
    expect(TASK_SPLITS).toEqual({
      train: { seed: 20_251_001, n: 2000 },
      validation: { seed: 20_251_002, n: 200 },
      test: { seed: 20_251_003, n: 200 },
    });
    for (const [name, rows] of Object.entries(splits)) {
      expect(rows, name).toHaveLength(TASK_SPLITS[name as keyof typeof splits].n);
      expect(new Set(rows.map((r) => r.question)).size, name).toBe(rows.length);
    }
    const held = new Set([...test, ...validation].map((r) => r.question));
    expect(held.size).toBe(400);
    expect(train.filter((r) => held.has(r.question))).toEqual([]);
    const testQ = new Set(test.map((r) => r.question));
    expect(validation.filter((r) => testQ.has(r.question))).toEqual([]);
    // The test split is generateTask of its seed as it is; taskSplit is repeatable.
    expect(test).toEqual(generateTask(TASK_SPLITS.test.seed, TASK_SPLITS.test.n));
    expect(taskSplit('validation')).toEqual(validation);
  });

  it('computes every row of the test and validation splits correctly', () => {
    for (const row of [...test, ...validation]) checkArithmetic(row);
    // Some of every kind: 2- and 3-step problems, each operation.
    const plans = test.map((r) => r.plan);
    expect(plans.filter((p) => p.includes('Step 3')).length).toBe(100);
    for (const word of ['add', 'subtract', 'multiply']) expect(plans.some((p) => p.includes(word)), word).toBe(true);
  });

  it('keeps the text ASCII and short, and answers within 1..MAX_VALUE', () => {
    for (const rows of Object.values(splits)) {
      for (const r of rows) {
        for (const f of ['question', 'plan', 'refined_plan', 'answer'] as const) expect(/^[\x20-\x7e\n]*$/.test(r[f]), r[f]).toBe(true);
        expect(r.question.length).toBeLessThanOrEqual(120);
        expect(r.answer.length).toBeLessThanOrEqual(80);
        expect(r.plan.length).toBeLessThanOrEqual(80);
        expect(r.refined_plan.length).toBeLessThanOrEqual(80);
        expect(Number.isInteger(r.answer_value) && r.answer_value >= 1 && r.answer_value <= MAX_VALUE).toBe(true);
      }
    }
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    expect(MAX_VALUE).toBe(30);
    expect(mean(test.map((r) => r.question.length))).toBeCloseTo(89.405, 3);
    expect(mean(test.map((r) => r.answer.length))).toBeCloseTo(54.14, 3);
  });

  it('scores the last box as an integer against answer_value', () => {
    const row = { answer_value: 14 };
    expect(scoreAnswer('12 * 2 = 24. The answer is \\boxed{14}.', row)).toBe(true);
    expect(scoreAnswer('\\boxed{3} then \\boxed{ 14 }', row)).toBe(true);
    expect(scoreAnswer('\\boxed{14} then \\boxed{3}', row)).toBe(false);
    expect(scoreAnswer('The answer is \\boxed{15}.', row)).toBe(false);
    expect(scoreAnswer('The answer is 14.', row)).toBe(false);
    expect(scoreAnswer('The answer is \\boxed{14', row)).toBe(false);
    expect(scoreAnswer('\\boxed{14.5}', row)).toBe(false);
    expect(scoreAnswer('\\boxed{}', row)).toBe(false);
    for (const r of test) expect(scoreAnswer(r.answer, r)).toBe(true);
  });

  it('feeds every chain role without skips, as a math task', () => {
    for (const r of test) {
      expect(rowTask(r as unknown as Record<string, unknown>, 'code').task).toBe('math');
      const row = r as unknown as Record<string, unknown>;
      expect(roleExample('chain', 'planner', row)).toEqual({ target: r.plan, slotTexts: [], question: r.question });
      expect(roleExample('chain', 'critic', row)).toEqual({ target: r.refined_plan, slotTexts: [r.plan], question: r.question });
      expect(roleExample('chain', 'refiner', row)).toEqual({ target: r.refined_plan, slotTexts: [r.plan], question: r.question });
      expect(roleExample('chain', 'solver', row)).toEqual({ target: r.answer, slotTexts: [r.refined_plan], question: r.question });
    }
  });

  it('encodes to a modest number of task-tokenizer tokens per field, every number one token', () => {
    const t = taskTokenizer();
    const tok = loadTokenizer({ tokenizerJson: t.tokenizerJson, tokenizerConfig: t.tokenizerConfig });
    for (let v = 0; v <= MAX_VALUE; v++) expect(tok.encode(String(v), { addSpecialTokens: false }), String(v)).toHaveLength(1);
    const stats: Record<string, { mean: number; max: number }> = {};
    for (const f of ['question', 'plan', 'refined_plan', 'answer'] as const) {
      const counts = test.map((r) => tok.encode(r[f], { addSpecialTokens: false }).length);
      stats[f] = { mean: Math.round((counts.reduce((a, b) => a + b, 0) / counts.length) * 1000) / 1000, max: Math.max(...counts) };
      // Round trip: the byte-level BPE reproduces the text.
      expect(tok.decode(tok.encode(test[0]![f], { addSpecialTokens: false }))).toBe(test[0]![f]);
    }
    expect(stats).toEqual({
      question: { mean: 27.52, max: 32 },
      plan: { mean: 24.375, max: 31 },
      refined_plan: { mean: 32.5, max: 39 },
      answer: { mean: 30.5, max: 35 },
    });
  });

  it('writes the three splits as JSONL from the CLI', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tiny-task-'));
    try {
      execFileSync(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/tiny-system/build.ts'), 'task', '--out', dir], {
        cwd: ROOT,
        stdio: 'pipe',
      });
      for (const [name, rows] of Object.entries(splits)) {
        const text = readFileSync(join(dir, `${name}.jsonl`), 'utf8');
        expect(text).toBe(toJsonl(rows));
        expect(Object.keys(JSON.parse(text.split('\n')[0]!) as object)).toEqual([
          'question',
          'plan',
          'refined_plan',
          'answer',
          'answer_value',
          'task_family',
        ]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
