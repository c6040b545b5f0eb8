/**
 * Training steps vs PyTorch float64 on WebGPU (Dawn in Node; see ./golden.ts): the same bounds as the CPU
 * f32 run, 1e-5 (inner) and 1e-4 (outer) relative to each tensor's peak.
 */
import { describe, expect, it } from 'vitest';
import { gpuBackend } from '../util/gpu';
import { TRAIN_GOLDEN as G, runInnerGolden, runOuterGolden } from './golden';

describe('training vs PyTorch, WebGPU', () => {
  it('inner loop: 3 steps', async () => {
    const steps = await runInnerGolden(await gpuBackend());
    for (const [k, s] of steps.entries()) {
      expect(Math.abs(s.loss - G.inner.steps[k].loss) / G.inner.steps[k].loss).toBeLessThan(1e-5);
      expect(Math.abs(s.gradNorm - G.inner.steps[k].grad_norm) / G.inner.steps[k].grad_norm).toBeLessThan(1e-5);
      expect(s.stateErr, `weights after step ${k}`).toBeLessThan(1e-5);
    }
    expect(steps[0].gradErr).toBeLessThan(1e-5);
  });

  it('outer loop: 2 steps and the non-last weighting', async () => {
    const steps = await runOuterGolden(await gpuBackend(), true, 2);
    for (const [k, s] of steps.entries()) {
      const g = G.outer.config1.steps[k];
      expect(Math.abs(s.loss - g.loss) / g.loss).toBeLessThan(1e-4);
      expect(Math.abs(s.gradNorm - g.grad_norm) / g.grad_norm).toBeLessThan(1e-4);
      expect(s.stateErr, `weights after step ${k}`).toBeLessThan(1e-4);
    }
    expect(steps[0].gradErr).toBeLessThan(1e-4);
    const [c] = await runOuterGolden(await gpuBackend(), false, 1);
    expect(Math.abs(c.loss - G.outer.config2.loss) / G.outer.config2.loss).toBeLessThan(1e-4);
    expect(c.gradErr).toBeLessThan(1e-4);
  });
});
