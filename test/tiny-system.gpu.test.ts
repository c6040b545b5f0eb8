/**
 * The committed tiny system on WebGPU (Node: Dawn on lavapipe): the fixed test subset, greedy, answers
 * as the CPU-recorded eval (models/tiny/system/eval.json) says, within a small margin for the f32
 * summation order of the GPU kernels. The CPU twin and the rebuild checks are in test/tiny-system.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { evalTiny, type EvalConfig } from '../scripts/tiny-system/eval';
import { TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths';
import { taskSplit } from '../src/eval/tiny-task';
import { gpuBackend } from './util/gpu';

const SUBSET = 12;
const record = JSON.parse(readFileSync(join(TINY_SYSTEM_DIR, 'eval.json'), 'utf8')) as {
  latentSteps: number;
  results: { config: EvalConfig; ok: boolean[] }[];
};

describe('the committed tiny system on WebGPU', () => {
  it('answers the fixed test subset as the eval script recorded', async () => {
    const configs: EvalConfig[] = ['text1', 'latent3'];
    const rows = taskSplit('test').slice(0, SUBSET);
    const results = await evalTiny({ backend: await gpuBackend(), rows, configs, latentSteps: record.latentSteps });
    for (const r of results) {
      const want = record.results.find((x) => x.config === r.config)!.ok.slice(0, SUBSET).filter(Boolean).length;
      expect(Math.abs(r.correct - want), `${r.config}: ${r.correct} vs recorded ${want}`).toBeLessThanOrEqual(1);
    }
  }, 300_000);
});
