/**
 * Decoder on Node WebGPU (Dawn; lavapipe here) against the same model on the CPU backend (f32): hidden
 * states, logits, KV-cached vs whole-sequence runs, quantized weights and the gradient to inputsEmbeds.
 * Error measure: max |gpu − cpu| / max |cpu| per array (scaledError), so entries near 0 are judged
 * against the array's scale.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Tape } from '../autograd';
import { CpuBackend } from '../tensor/cpu';
import type { Backend } from '../tensor/backend';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { FAMILIES, type Family } from './config';
import { Decoder } from './decoder';
import { scaledError, tinyCheckpoint, tinyConfig, tinyTensors } from '../testing/model';
import { loadDecoderWeights } from './weights';

const IDS = [3, 17, 0, 41, 8, 29, 5];
let gpu: WebGpuBackend;
const cpu = CpuBackend.reference();

beforeAll(async () => {
  gpu = await freshGpuBackend();
});
afterAll(() => gpu?.ctx.device.destroy());

async function model(family: Family, backend: Backend, quantize?: 'q8_0' | 'q4_0', over?: Record<string, unknown>) {
  const config = tinyConfig(family, over);
  const weights = await loadDecoderWeights(config, await tinyCheckpoint(tinyTensors(config, 11)), backend, { quantize });
  return new Decoder(config, weights);
}

/** Tolerance for f32 GPU vs f32 CPU through two layers: both round in f32 with different summation orders
 * (measured ≤ 2.6e-7 of peak, gradients ≤ 4.6e-7); 1e-4 is the bound, > 100x margin. */
const TOL = 1e-4;

describe.each(FAMILIES)('decoder %s: WebGPU vs CPU', (family) => {
  it('hidden and logits; cached step-by-step equals the whole sequence', async () => {
    const g = await model(family, gpu);
    const c = await model(family, cpu);
    const run = (m: Decoder) => m.forward({ inputIds: m.backend.fromValues(IDS, [IDS.length], 'i32'), logits: 'all' });
    const gw = run(g);
    const cw = run(c);
    const [gh, gl, ch, cl] = await Promise.all([gw.hidden.read(), gw.logits!.read(), cw.hidden.read(), cw.logits!.read()]);
    const [eh, el] = [scaledError(gh, ch), scaledError(gl, cl)];
    console.log(`${family}: GPU vs CPU hidden ${eh.toExponential(2)}, logits ${el.toExponential(2)} of peak`);
    expect(eh).toBeLessThan(TOL);
    expect(el).toBeLessThan(TOL);

    // f32 k and v: the cache's arithmetic against the whole sequence (the f16 cache, the default on shader-f16
    // devices such as this one, rounds them: src/model/kv-f16.gpu.test.ts)
    g.kvDtype = 'f32';
    const cache = g.newCache(12);
    const parts: number[] = [];
    for (const [s, e] of [[0, 4], [4, 5], [5, 6], [6, 7]]) {
      const out = g.forward({ inputIds: gpu.fromValues(IDS.slice(s, e), [e - s], 'i32'), cache });
      parts.push(...(await out.hidden.read()));
      out.hidden.dispose();
    }
    // same kernels, other split of the softmax over chunks: f32 rounding only (measured 0 at this size)
    const ec = scaledError(parts, gh);
    console.log(`${family}: GPU cached vs whole ${ec.toExponential(2)}`);
    expect(ec).toBeLessThan(1e-5);
    cache.dispose();
    [gw.hidden, gw.logits!].forEach((t) => t.dispose());
    g.dispose();
    c.dispose();
  });

  it('q4_0 weights: GPU logits equal CPU logits with the same quantized weights', async () => {
    const g = await model(family, gpu, 'q4_0');
    const c = await model(family, cpu, 'q4_0');
    const run = (m: Decoder) => m.forward({ inputIds: m.backend.fromValues(IDS, [IDS.length], 'i32'), logits: 'last' }).logits!.read();
    expect(scaledError(await run(g), await run(c))).toBeLessThan(TOL);
    g.dispose();
    c.dispose();
  });

  it('the gradient to inputsEmbeds matches the CPU backend', async () => {
    const grads: Float32Array[] = [];
    for (const b of [gpu, cpu] as Backend[]) {
      const m = await model(family, b);
      const e = m.embed(b.fromValues([5, 1, 30, 7], [4], 'i32'));
      e.requiresGrad = true;
      const seed = b.fromValues(Float32Array.from({ length: 4 * 32 }, (_, i) => Math.sin(i)), [4, 32]);
      const tape = new Tape();
      const { hidden } = tape.run(() => m.forward({ inputsEmbeds: e }));
      await tape.backward(hidden, seed);
      grads.push(await e.grad!.read());
      tape.dispose();
      [e, seed].forEach((t) => t.dispose());
      m.dispose();
    }
    const eg = scaledError(grads[0], grads[1]);
    console.log(`${family}: GPU vs CPU d hidden / d inputsEmbeds ${eg.toExponential(2)}`);
    expect(eg).toBeLessThan(TOL);
  });
});
