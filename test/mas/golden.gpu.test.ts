/**
 * Links and latent rollout vs PyTorch float64 on WebGPU (Dawn in Node; see ./golden.ts). With f32 KV caches: the same
 * bound as the CPU f32 run, 1e-5 of each array's peak (GPU reductions sum in another order). With f16 caches (the
 * default on this adapter, which has shader-f16): every k and v is rounded to f16 (2^-11 relative) as it is written,
 * which moves the attention outputs by about that much; measured ≤ 3.1e-4 of peak, bound 2e-3.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { gpuBackend } from '../util/gpu';
import { GoldenSystem, golden } from './golden';

describe.each([['f32', 1e-5], ['f16', 2e-3]] as const)('tiny MAS rollout vs PyTorch, WebGPU, %s KV cache', (kv, TOL) => {
  let sys: GoldenSystem;
  beforeAll(async () => {
    const gpu = await gpuBackend();
    expect(gpu.ctx.hasFeature('shader-f16')).toBe(true);
    sys = await GoldenSystem.load(gpu, kv === 'f32' ? 'f32' : undefined);
    expect([...sys.models.values()].every((m) => m.kvDtype === kv)).toBe(true);
  });
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
