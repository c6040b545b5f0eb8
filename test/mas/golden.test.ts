/**
 * Links and latent rollout vs PyTorch float64 (see ./golden.ts). Error measure: scaledError =
 * max |got − want| / max |want| per array.
 * - CpuBackend('f64'): link weights are bf16 on both sides, so each link alone agrees to f64 rounding
 *   (measured ≤ 5e-16) and so do the qwen2 stages (≤ 8e-16); qwen3 and llama stages carry RoPE's inv_freq
 *   ulp noise (torch computes it with f32 ops, see test/tiny-golden.gpu.test.ts) through 4 fed-back steps:
 *   ≤ 2.1e-8. Bounds 1e-12 (links) and 1e-7 (stages).
 * - CpuBackend('f32'): f32 rounding through two layers, the links and 4 fed-back steps, measured ≤ 2e-7;
 *   bound 1e-5.
 * Greedy decoding must give the golden ids (its smallest top-1/top-2 logit gap is 3.4, far above f32 noise).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { GoldenSystem, golden } from './golden';

export const MAS_TOL = { f64: { link: 1e-12, stage: 1e-7 }, f32: { link: 1e-5, stage: 1e-5 } } as const;

for (const precision of ['f64', 'f32'] as const) {
  const tol = MAS_TOL[precision];
  describe(`tiny MAS rollout vs PyTorch, CpuBackend(${precision})`, () => {
    let sys: GoldenSystem;
    beforeAll(async () => { sys = await GoldenSystem.load(new CpuBackend(precision)); });
    afterAll(() => sys?.dispose());

    it('each link alone (bf16 .pt written by torch.save)', async () => {
      const errs = await sys.linkErrors();
      expect(Object.keys(errs).sort()).toEqual(['critic-inner', 'outer_12', 'outer_23', 'outer_31', 'planner-inner', 'solver-inner']);
      for (const [name, e] of Object.entries(errs)) expect(e, name).toBeLessThan(tol.link);
    });

    for (const name of ['planner', 'critic', 'solver_feedback', 'planner_round2']) {
      it(`stage ${name}: hidden states and Outer(Inner(H))`, async () => {
        const e = await sys.stageErrors(name);
        expect(e.hidden).toBeLessThan(tol.stage);
        expect(Object.keys(e.latentsOut)).toEqual(Object.keys(golden.stages[name].latents_out!));
        for (const [k, v] of Object.entries(e.latentsOut)) expect(v, k).toBeLessThan(tol.stage);
      });
    }

    it('solver decode: greedy ids and first logits', async () => {
      const e = await sys.stageErrors('solver_decode');
      expect(e.generatedIds).toEqual(golden.stages.solver_decode.generated_ids);
      expect(e.logits0).toBeLessThan(tol.stage);
    });
  });
}
