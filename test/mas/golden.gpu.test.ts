/**
 * Links and latent rollout vs PyTorch float64 on WebGPU (Dawn in Node; see ./golden.ts). f32 kernels:
 * the same bound as the CPU f32 run, 1e-5 of each array's peak (GPU reductions sum in another order).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuBackend } from '../util/gpu';
import { GoldenSystem, golden } from './golden';

const TOL = 1e-5;

describe('tiny MAS rollout vs PyTorch, WebGPU', () => {
  let sys: GoldenSystem;
  beforeAll(async () => { sys = await GoldenSystem.load(await gpuBackend()); });
  afterAll(() => sys?.dispose());

  it('each link alone', async () => {
    for (const [name, e] of Object.entries(await sys.linkErrors())) expect(e, name).toBeLessThan(TOL);
  });

  for (const name of ['planner', 'critic', 'solver_feedback', 'planner_round2']) {
    it(`stage ${name}`, async () => {
      const e = await sys.stageErrors(name);
      expect(e.hidden).toBeLessThan(TOL);
      expect(Object.keys(e.latentsOut).length).toBe(1);
      for (const [k, v] of Object.entries(e.latentsOut)) expect(v, k).toBeLessThan(TOL);
    });
  }

  it('solver decode', async () => {
    const e = await sys.stageErrors('solver_decode');
    expect(e.generatedIds).toEqual(golden.stages.solver_decode.generated_ids);
    expect(e.logits0).toBeLessThan(TOL);
  });
});
