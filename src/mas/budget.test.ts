/**
 * The default token budget (budget.ts): upstream's infer_max_new_tokens for every benchmark and style, one
 * question by its task, and the embedded tiny systems' 64 whatever is asked.
 */
import { describe, expect, it } from 'vitest';
import { defaultMaxNewTokens, TINY_MAX_NEW_TOKENS } from './budget';
import { ALL_STYLE_NAMES, getStyle, STYLE_NAMES } from './styles';

const of = (style: string, what: Parameters<typeof defaultMaxNewTokens>[1]) => defaultMaxNewTokens(getStyle(style), what);

describe('defaultMaxNewTokens', () => {
  it('benchmarks as upstream run.py: math500 and a file of no benchmark 1000 light / 2000, AIME 8192 / 16000, others 4000', () => {
    const table = (style: string) =>
      [null, 'math500', 'aime25', 'aime26', 'gpqa', 'medqa', 'mbppplus', 'livecodebench', 'bamboogle'].map((dataset) =>
        of(style, { dataset }),
      );
    expect(table('sequential_light')).toEqual([1000, 1000, 8192, 8192, 4000, 4000, 4000, 4000, 4000]);
    for (const style of STYLE_NAMES.filter((s) => s !== 'sequential_light'))
      expect(table(style), style).toEqual([2000, 2000, 16000, 16000, 4000, 4000, 4000, 4000, 4000]);
  });

  it("one question as its task's benchmark: math as math500, choice and code 4000", () => {
    expect((['math', 'choice', 'code'] as const).map((task) => of('sequential_light', { task }))).toEqual([1000, 4000, 4000]);
    expect((['math', 'choice', 'code'] as const).map((task) => of('mixture', { task }))).toEqual([2000, 4000, 4000]);
  });

  it('the embedded tiny systems: 64 for every task and benchmark', () => {
    for (const style of ALL_STYLE_NAMES.filter((s) => getStyle(s).embedded)) {
      expect([of(style, { task: 'math' }), of(style, { task: 'code' }), of(style, { dataset: 'aime25' })]).toEqual([64, 64, 64]);
    }
    expect(TINY_MAX_NEW_TOKENS).toBe(64);
  });
});
