/**
 * The fused inference path against the plain one, for the Node (lavapipe) and browser (SwiftShader) tests: a tiny
 * model with its weights in a given dtype, and the hidden states, logits and dispatch counts of one-token steps after
 * the same prefill, with Decoder.fusedSteps on or off.
 */
import { type Family, Decoder } from '../../src/model';
import { f32ToF16Bits } from '../../src/formats/dtype';
import { SafetensorsFile, writeSafetensors } from '../../src/formats/safetensors';
import { tinyCheckpoint, tinyConfig, tinyTensors } from '../../src/testing/model';
import { loadDecoderWeights } from '../../src/model/weights';
import type { Backend } from '../../src/tensor/backend';

export const STEP_DTYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as const;
export type StepDType = (typeof STEP_DTYPES)[number];

const PROMPT = [3, 17, 0, 41, 8];
const STEPS = [29, 5, 11];

/** The tiny model with its weights stored in `dtype` (f32/f16 files, the bf16 file, or bf16 quantized on load). */
export async function tinyModelIn(family: Family, dtype: StepDType, backend: Backend, over?: Record<string, unknown>): Promise<Decoder> {
  const config = tinyConfig(family, over);
  const tensors = tinyTensors(config, 5);
  const file = dtype === 'f32' || dtype === 'f16'
    ? SafetensorsFile.fromBytes(writeSafetensors([...tensors].map(([n, t]) => {
      const bytes =
        dtype === 'f32'
          ? new Uint8Array(Float32Array.from(t.values).buffer)
          : new Uint8Array(Uint16Array.from(t.values, f32ToF16Bits).buffer);
      return [n, { dtype: dtype === 'f32' ? 'F32' : 'F16', shape: t.shape, bytes }] as const;
    })), 'tiny.safetensors')
    : tinyCheckpoint(tensors);
  const quantize = dtype === 'q8_0' || dtype === 'q4_0' ? dtype : undefined;
  return new Decoder(config, await loadDecoderWeights(config, await file, backend, { quantize }));
}

/** Hidden states and logits of each step after the prompt (concatenated), and the dispatches of each step. */
export async function stepOutputs(m: Decoder, fused: boolean) {
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
