/**
 * The fused inference path (model/fused.ts) against the differentiable path, on every family and weight dtype, on
 * Node WebGPU (Dawn on lavapipe) and on the CPU backend: after the same prefill, one-token steps with fusedSteps on and
 * off give the same hidden states and logits within 1e-5 of their peak, and on WebGPU a step takes at most 8 dispatches
 * per layer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DType, f32ToF16Bits } from '../formats/dtype';
import { SafetensorsFile, writeSafetensors } from '../formats/safetensors';
import { CpuBackend } from '../tensor/cpu';
import type { Backend } from '../tensor/backend';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { FAMILIES, type Family } from './config';
import { Decoder } from './decoder';
import { scaledError, tinyCheckpoint, tinyConfig, tinyTensors } from './testing';
import { loadDecoderWeights } from './weights';

const PROMPT = [3, 17, 0, 41, 8];
const STEPS = [29, 5, 11];
const DTYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as const;
/** Measured ≤ 4e-7 of peak on lavapipe and the CPU (f32 rounding in another order); the bound is 1e-5. */
const TOL = 1e-5;

let gpu: WebGpuBackend;
const cpu = new CpuBackend('f32');
beforeAll(async () => {
  gpu = await freshGpuBackend();
});
afterAll(() => gpu?.ctx.device.destroy());

/** The tiny model with its weights stored in `dtype` (f32/f16 files, the bf16 file, or bf16 quantized on load). */
async function model(family: Family, dtype: (typeof DTYPES)[number], backend: Backend, over?: Record<string, unknown>) {
  const config = tinyConfig(family, over);
  const tensors = tinyTensors(config, 5);
  let file;
  if (dtype === 'f32' || dtype === 'f16') {
    file = SafetensorsFile.fromBytes(writeSafetensors([...tensors].map(([n, t]) => {
      const bytes = dtype === 'f32' ? new Uint8Array(Float32Array.from(t.values).buffer) : new Uint8Array(Uint16Array.from(t.values, f32ToF16Bits).buffer);
      return [n, { dtype: dtype === 'f32' ? 'F32' : 'F16', shape: t.shape, bytes }] as const;
    })), 'tiny.safetensors');
  } else file = await tinyCheckpoint(tensors);
  const quantize = dtype === 'q8_0' || dtype === 'q4_0' ? dtype : undefined;
  return new Decoder(config, await loadDecoderWeights(config, await file, backend, { quantize }));
}

/** Hidden states and logits of each step after the prompt, with the fused path on or off. */
async function steps(m: Decoder, fused: boolean) {
  m.fusedSteps = false;
  const cache = m.newCache(16);
  m.forward({ inputIds: m.backend.fromValues(PROMPT, [PROMPT.length], 'i32'), cache }).hidden.dispose();
  m.fusedSteps = fused;
  const out: number[] = [];
  const dispatches: number[] = [];
  for (const id of STEPS) {
    const x = m.embed(m.backend.fromValues([id], [1], 'i32'));
    const before = m.backend.counters?.().dispatches ?? 0;
    const { hidden, logits } = m.forward({ inputsEmbeds: x, cache, logits: 'last' });
    dispatches.push((m.backend.counters?.().dispatches ?? 0) - before);
    out.push(...(await hidden.read()), ...(await logits!.read()));
    [x, hidden, logits!].forEach((t) => t.dispose());
  }
  cache.dispose();
  return { out, dispatches };
}

const VARIANTS: [string, Family, Record<string, unknown>?][] = [
  ...FAMILIES.map((f): [string, Family] => [f, f]),
  ['qwen3_5 tied, layer_types', 'qwen3_5', { tie_word_embeddings: true, layer_types: ['linear_attention', 'full_attention'] }],
];

describe.each(VARIANTS)('fused steps %s', (_name, family, over) => {
  it.each(DTYPES)('%s weights: equal to the plain path on WebGPU and the CPU; ≤ 8 dispatches per layer', async (dtype: DType) => {
    for (const b of [gpu, cpu] as Backend[]) {
      const m = await model(family, dtype as (typeof DTYPES)[number], b, over);
      expect(m.fused.fusedLayers).toBe(m.config.layers);
      const plain = await steps(m, false);
      const fused = await steps(m, true);
      const err = scaledError(fused.out, plain.out);
      expect(err, `${b.kind}`).toBeLessThan(TOL);
      if (b.kind === 'webgpu') {
        // a step: the layers, the final norm and the logits (a GEMV; Gemma also soft-caps: 3 more)
        const perLayer = (Math.max(...fused.dispatches) - 2 - (m.config.finalSoftcap !== null ? 3 : 0)) / m.config.layers;
        console.log(`${_name} ${dtype}: fused vs plain ${err.toExponential(2)} of peak; dispatches per step ${fused.dispatches[0]} (plain ${plain.dispatches[0]}), ${perLayer} per layer`);
        expect(perLayer).toBeLessThanOrEqual(8);
        expect(fused.dispatches[0]).toBeLessThan(plain.dispatches[0]);
      }
      m.dispose();
    }
  });
});
