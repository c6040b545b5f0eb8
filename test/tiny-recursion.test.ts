/**
 * The committed tiny recursion system (models/tiny/recursion, style tiny_recursion; its build in scripts/tiny-recursion),
 * on the multi-hop task (src/eval/tiny-hops.ts), where a question of h hops needs (h + 1) / 2 rounds:
 *   - its recorded table (eval.json, the whole test split) meets issue 40's accuracy targets: each round adds at
 *     least 20 points, each round count reaches 90% of its ceiling and text-MAS's accuracy within 3 points, answers
 *     only the questions its rounds can reach, and generates at most half text-MAS's tokens; shuffled or zeroed
 *     messages fall near the learner alone, the feedback zeroed below the whole system;
 *   - a fixed sample of the test split, re-run on the CPU, greedy, gives the recorded answers in every configuration.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hopCeiling, hopSplit } from '../src/eval/tiny-hops';
import { CpuBackend } from '../src/tensor/cpu';
import { useBuildKernels } from '../scripts/tiny-system/cli';
import { RECURSION_KERNELS, RECURSION_LATENT_STEPS, RECURSION_TARGET, TINY_RECURSION_DIR } from '../scripts/tiny-recursion/eval';
import { evalTiny, type ConfigResult, type EvalConfig } from '../scripts/tiny-system/eval';

useBuildKernels(RECURSION_KERNELS);
const record = JSON.parse(readFileSync(join(TINY_RECURSION_DIR, 'eval.json'), 'utf8')) as {
  split: string;
  latentSteps: number;
  rows: number;
  results: ConfigResult[];
};
const SAMPLE = 24;
const result = (config: EvalConfig) => {
  const r = record.results.find((x) => x.config === config);
  if (!r) throw new Error(`eval.json has no ${config}; rerun scripts/tiny-recursion/build.ts eval --json ${TINY_RECURSION_DIR}/eval.json`);
  return r;
};
const acc = (c: EvalConfig) => result(c).accuracy;

describe('the committed tiny recursion system', () => {
  it('its recorded table (the whole test split) rises with rounds, below each ceiling, at half the tokens', () => {
    const rows = hopSplit('test');
    expect(record.split).toBe('test');
    expect(record.rows).toBe(rows.length);
    expect(record.latentSteps).toBe(RECURSION_LATENT_STEPS);
    for (const r of record.results) expect(r.correct, r.config).toBe(r.ok.filter(Boolean).length);
    // issue 40's targets: each round adds at least 20 points, each round count reaches 90% of its ceiling and
    // text-MAS's accuracy within 3 points, on at most half its tokens
    expect(acc('latent2') - acc('latent1')).toBeGreaterThanOrEqual(0.2);
    expect(acc('latent3') - acc('latent2')).toBeGreaterThanOrEqual(0.2);
    for (const r of [1, 2, 3]) {
      const latent = result(`latent${r}` as EvalConfig);
      const text = result(`text${r}` as EvalConfig);
      // a round count answers only what its rounds reach: no right answer on a question of more hops
      const beyond = rows.flatMap((row, i) => (row.hops > 2 * r - 1 ? [i] : []));
      expect(beyond.filter((i) => latent.ok[i]).length, `latent${r}`).toBeLessThanOrEqual(beyond.length / 8);
      expect(latent.accuracy, `latent${r}`).toBeLessThanOrEqual(hopCeiling(rows, r) + 0.02);
      expect(latent.accuracy, `latent${r}`).toBeGreaterThanOrEqual(0.9 * hopCeiling(rows, r));
      expect(text.accuracy, `text${r}`).toBeCloseTo(hopCeiling(rows, r), 1);
      expect(Math.abs(latent.accuracy - text.accuracy), `latent${r} against text${r}`).toBeLessThanOrEqual(0.03);
      expect(latent.tokens).toBeLessThanOrEqual(text.tokens / 2);
    }
    // the ablations: shuffled or zeroed messages near the learner alone; the feedback removed (every hand-off a first
    // one) near one round, right on the questions one round reaches; zeros in its slot throw the expert off (README)
    const alone = acc('alone');
    expect(Math.abs(acc('shuffled3') - alone)).toBeLessThanOrEqual(0.1);
    expect(Math.abs(acc('zeroed3') - alone)).toBeLessThanOrEqual(0.1);
    expect(Math.abs(acc('fbremoved3') - acc('latent1'))).toBeLessThanOrEqual(0.03);
    const oneHop = rows.flatMap((row, i) => (row.hops === 1 ? [i] : []));
    expect(oneHop.filter((i) => result('fbremoved3').ok[i]).length).toBeGreaterThanOrEqual(0.9 * oneHop.length);
    expect(acc('fbzeroed3')).toBeLessThan(acc('latent3') - 0.2);
  });

  it('answers a fixed sample of the test split as recorded, in every configuration (CPU, greedy)', async () => {
    const rows = hopSplit('test').slice(0, SAMPLE);
    const configs = record.results.map((r) => r.config);
    const results = await evalTiny({
      target: RECURSION_TARGET,
      backend: new CpuBackend('f32'),
      rows,
      configs,
      latentSteps: record.latentSteps,
    });
    for (const r of results) {
      // the shuffled donors of a sample wrap at its end, not at the split's: that row may differ
      const n = r.config.startsWith('shuffled') ? SAMPLE - 1 : SAMPLE;
      expect(r.answers.slice(0, n), r.config).toEqual(result(r.config).answers.slice(0, n));
    }
  }, 240_000);
});
