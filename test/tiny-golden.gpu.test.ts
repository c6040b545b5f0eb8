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
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { F, Tape } from '../src/autograd';
import { openCheckpoint } from '../src/formats/safetensors-sharded';
import { Decoder, loadDecoderWeights, parseDecoderConfig } from '../src/model';
import { scaledError } from '../src/model/testing';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend } from '../src/tensor/cpu';
import type { Tensor } from '../src/tensor/tensor';
import { gpuBackend } from './util/gpu';

const TOL = { f64: 1e-6, f32: 1e-4 } as const;

interface Golden {
  ids: number[];
  dims: { T: number; hidden: number; vocab: number; logit_cols: number };
  hidden: string;
  logits: string;
  loss: number;
  grad: string;
}

function f64(b64: string): Float64Array {
  const buf = Buffer.from(b64, 'base64');
  return new Float64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
}

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

for (const name of ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny']) {
  describe(`models/tiny/${name} against torch`, () => {
    const dir = `models/tiny/${name}`;
    const golden = JSON.parse(readFileSync(`test/golden/tiny-${name}.json`, 'utf8')) as Golden;
    const { T, hidden: d, vocab: V, logit_cols: C } = golden.dims;
    const want = { hidden: f64(golden.hidden), logits: f64(golden.logits), grad: f64(golden.grad) };
    const R = Float64Array.from({ length: T * d }, (_, i) => Math.sin(0.37 * i + 0.1));
    // logits[:, :C] * R2 as a product with the whole [T, V] logits: zero outside the first C columns
    const R2 = new Float64Array(T * V);
    for (let t = 0; t < T; t++) for (let j = 0; j < C; j++) R2[t * V + j] = Math.cos(0.23 * (t * C + j));

    it.each(BACKENDS)('$label: hidden, logits and d L / d inputsEmbeds', async ({ label, tol, make }) => {
      const b = await make();
      const config = parseDecoderConfig(readFileSync(`${dir}/config.json`, 'utf8'), `${dir}/config.json`);
      expect([config.hidden, config.vocabSize]).toEqual([d, V]);
      const store = await openCheckpoint(dir);
      const weights = await loadDecoderWeights(config, store, b);
      await store.close();
      const model = new Decoder(config, weights);
      const ids = b.fromValues(golden.ids, [T], 'i32');
      const e = model.embed(ids);
      e.requiresGrad = true;
      const [r, r2] = [b.fromValues(R, [T, d]), b.fromValues(R2, [T, V])];
      const tape = new Tape();
      const { hidden, logits, loss } = tape.run(() => {
        const out = model.forward({ inputsEmbeds: e, logits: 'all' });
        const s1 = F.sumRows(F.reshape(F.mul(out.hidden, r), [T * d]), []);
        const s2 = F.sumRows(F.reshape(F.mul(out.logits!, r2), [T * V]), []);
        return { ...out, loss: F.add(s1, s2) };
      });
      const got = { hidden: await values(hidden), logits: await values(logits!) };
      await tape.backward(loss);
      const grad = await values(e.grad!);
      const err = {
        hidden: scaledError(got.hidden, want.hidden),
        logits: scaledError(got.logits, want.logits),
        grad: scaledError(grad, want.grad),
        loss: Math.abs((await values(loss))[0] - golden.loss) / Math.abs(golden.loss),
      };
      measured.push(`${name} ${label}: ` + Object.entries(err).map(([k, v]) => `${k} ${v.toExponential(2)}`).join(', '));
      expect(err.hidden).toBeLessThan(tol);
      expect(err.logits).toBeLessThan(tol);
      expect(err.grad).toBeLessThan(tol);
      expect(err.loss).toBeLessThan(tol);
      tape.dispose();
      [ids, e, r, r2].forEach((t) => t.dispose());
      weights.dispose();
    });
  });
}
