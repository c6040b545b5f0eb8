/**
 * The committed tiny models (models/tiny) against PyTorch: scripts/golden/tiny_models.py is an independent
 * float64 torch forward written from Hugging Face's modeling code, reading the same folders. Hidden states,
 * logits and the gradient with respect to inputs_embeds of
 *   L = sum(hidden * R) + sum(logits[:, :16] * R2),  R[i] = sin(0.37 i + 0.1), R2[i] = cos(0.23 i)
 * are compared on CpuBackend('f64'), CpuBackend('f32') and WebGPU (Dawn in Node).
 *
 * Error measure: scaledError = max |got − want| / max |want| per array.
 * - f64: bf16 weights and embeddings are exact on both sides and both round the angle pos·inv_freq to f32
 *   the HF way; what differs is inv_freq itself: torch computes it with f32 ops (f32 pow, f32 llama3
 *   blend), ours in f64 rounded once to f32. They differ by one f32 ulp in 2 of 8 frequencies for qwen3-tiny
 *   and 3 of 8 for llama-tiny (relative ±6e-8..1.2e-7), none for qwen2-tiny. Measured: qwen2 ≤ 1e-15
 *   (summation order only), qwen3 ≤ 6.6e-9, llama ≤ 1.1e-8 (hidden, logits, gradient). The bound 1e-6
 *   leaves room for that ulp noise and still catches convention slips (test/golden/check.ts measured
 *   the smallest, an unblended llama3 medium band, at 3e-3).
 * - f32: f32 rounding through two layers forward and back. Measured ≤ 2.1e-7 (CPU) and ≤ 5.2e-7
 *   (Dawn/lavapipe) for hidden, logits and gradient; ≤ 8.3e-7 for L itself. The bound 1e-4.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend } from '../src/tensor/cpu';
import type { Tensor } from '../src/tensor/tensor';
import { TINY_GOLDEN_MODELS, formatGoldenErrors, tinyGoldenErrors } from '../src/testing/tiny-golden';
import { gpuBackend } from './util/gpu';

const TOL = { f64: 1e-6, f32: 1e-4 } as const;

/** Values at the backend's own precision (f64 on CpuBackend('f64'), where read() would round to f32). */
async function values(t: Tensor): Promise<ArrayLike<number>> {
  return t.backend instanceof CpuBackend ? t.backend.data(t) as Float32Array | Float64Array : t.read();
}

const measured: string[] = [];
afterAll(() => console.log(`tiny golden, max|Δ|/max|want|:\n${measured.join('\n')}`));

const BACKENDS: { label: string; tol: number; make: () => Promise<Backend> }[] = [
  { label: 'cpu-f64', tol: TOL.f64, make: async () => new CpuBackend('f64') },
  { label: 'cpu-f32', tol: TOL.f32, make: async () => new CpuBackend('f32') },
  { label: 'webgpu', tol: TOL.f32, make: gpuBackend },
];

for (const name of TINY_GOLDEN_MODELS) {
  describe(`models/tiny/${name} against torch`, () => {
    it.each(BACKENDS)('$label: hidden, logits and d L / d inputsEmbeds', async ({ label, tol, make }) => {
      const err = await tinyGoldenErrors(await make(), name, values);
      measured.push(`${name} ${label}: ${formatGoldenErrors(err)}`);
      expect(err.hidden).toBeLessThan(tol);
      expect(err.logits).toBeLessThan(tol);
      expect(err.grad).toBeLessThan(tol);
      expect(err.loss).toBeLessThan(tol);
    });
  });
}
