/** Answer-retry helpers on hand-written outputs: boxed extraction, final-answer detection, suffixes. */
import { describe, expect, it } from 'vitest';
import { hasFinalAnswer, lastBoxed, retryMaxTokens, retrySuffix, stripThink } from './answer';

describe('lastBoxed', () => {
  it.each([
    ['The answer is \\boxed{42}.', '42'],
    ['\\boxed{1} then \\boxed{2}', '2'],
    ['\\boxed{\\frac{14}{3}}', '\\frac{14}{3}'],
    ['x = \\boxed{\\sqrt{\\frac{a}{b^{2}}}} done', '\\sqrt{\\frac{a}{b^{2}}}'],
    ['set \\boxed{\\{1, 2\\}}', '\\{1, 2\\}'],
    ['spaced \\boxed {7}', '7'],
    ['empty \\boxed{}', ''],
    ['\\boxed{5} and a cut-off \\boxed{\\frac{1}{', '5'],
    ['no box here', null],
    ['\\boxed{unclosed', null],
    ['\\boxed', null],
  ])('%j → %j', (text, want) => {
    expect(lastBoxed(text)).toBe(want);
  });
});

describe('stripThink', () => {
  it.each([
    ['<think>maybe \\boxed{1}</think>So \\boxed{2}', 'So \\boxed{2}'],
    ['a<think>x</think>b<think>y</think>c', 'abc'],
    ['reasoning \\boxed{3}</think>\nAnswer', '\nAnswer'],
    ['Answer first <think>still thinking \\boxed{9}', 'Answer first '],
    ['plain', 'plain'],
  ])('%j → %j', (text, want) => {
    expect(stripThink(text)).toBe(want);
  });
});

describe('hasFinalAnswer', () => {
  it.each([
    ['So the result is \\boxed{12}.', true],
    ['\\boxed{\\frac{1}{2}}', true],
    ['Final Answer: 12', false],
    ['\\boxed{}', false],
    ['\\boxed{  }', false],
    ['<think>it is \\boxed{3}</think> I am not sure.', false],
    ['<think>hmm</think> therefore \\boxed{3}', true],
    ['cut off \\boxed{3', false],
  ])('math %j → %s', (text, want) => {
    expect(hasFinalAnswer(text, 'math')).toBe(want);
  });

  it.each([
    ['\\boxed{C}', true],
    ['\\boxed{(B)}', true],
    ['\\boxed{D. 42}', true],
    ['\\boxed{\\text{A}}', true],
    ['\\boxed{42}', false],
    ['\\boxed{Apple}', false],
    ['Final Choice: B', true],
    ['final answer: (d)', false],
    ['Final Answer: **C**', true],
    ['So the answer is A.', true],
    ['The answer is: (C)', true],
    ['the answer is Alice', false],
    ['I think option B looks best', false],
    ['<think>answer is A</think> unsure', false],
    ['', false],
  ])('choice %j → %s', (text, want) => {
    expect(hasFinalAnswer(text, 'choice')).toBe(want);
  });

  it.each([
    ['```python\nprint(1)\n```', true],
    ['Here:\n```Python\ndef f(): pass', true],
    ['```\nprint(1)\n```', false],
    ['def f(): return 1', false],
    ['<think>```python\nx=1\n```</think>Done.', false],
  ])('code %j → %s', (text, want) => {
    expect(hasFinalAnswer(text, 'code')).toBe(want);
  });
});

describe('retry suffix and budget', () => {
  it('suffixes', () => {
    expect(retrySuffix('math')).toBe('\nFinal Answer: \\boxed{');
    expect(retrySuffix('choice')).toBe('\nFinal Choice: \\boxed{');
    expect(retrySuffix('code')).toBe(
      '\n\nNow give the whole solution again as one runnable Python program, with no explanation.\nFinal Code:\n```python\n',
    );
    expect(retrySuffix('code').endsWith('Final Code:\n```python\n')).toBe(true);
  });

  it('a retry continuation completes the answer', () => {
    const out = 'I computed it as twelve' + retrySuffix('math') + '12}';
    expect(lastBoxed(out)).toBe('12');
    expect(hasFinalAnswer(out, 'math')).toBe(true);
    expect(hasFinalAnswer('hmm' + retrySuffix('choice') + 'B}', 'choice')).toBe(true);
    expect(hasFinalAnswer('plan' + retrySuffix('code') + 'print(2)\n```', 'code')).toBe(true);
  });

  it('token budgets', () => {
    expect(retryMaxTokens('math')).toBe(16);
    expect(retryMaxTokens('choice')).toBe(16);
    expect(retryMaxTokens('code')).toBe(256);
  });
});
