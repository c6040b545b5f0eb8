/**
 * Gemma 3's ids path (token ids → hidden states and logits) against torch float64: the two random models of
 * test/golden/gemma3-ids.json (scripts/golden/gemma3_ids.py: text-only at hidden 48, image-text under
 * model.language_model.* at hidden 40) and models/tiny/gemma3-tiny (image-text under language_model.model.*,
 * hidden 56, golden tiny-gemma3-tiny.json). None of these hidden sizes has a bf16 square root, so the goldens see
 * whether embed's √hidden stays f32 (transformers loaded in float32) or is rounded to the checkpoint's bf16.
 * Shared by test/gemma3-golden.test.ts (CPU) and test/gemma3-golden.gpu.test.ts (WebGPU).
 */
import { readFileSync } from 'node:fs';
import { openCheckpoint } from '../../src/formats/safetensors-sharded';
import { SafetensorsFile, type StTensor, writeSafetensors } from '../../src/formats/safetensors';
import { Decoder, loadDecoderWeights, parseDecoderConfig } from '../../src/model';
import { scaledError } from '../../src/testing/model';
import type { Backend } from '../../src/tensor/backend';
import type { Tensor } from '../../src/tensor/tensor';
import golden from './gemma3-ids.json';

export const GEMMA3_IDS_CASES = ['text', 'image-text', 'tiny'] as const;
export type Gemma3IdsCase = (typeof GEMMA3_IDS_CASES)[number];

/** max |got − want| / max |want|: the whole sequence in one forward, then the same ids one token at a time through
 * a KV cache (the fused one-token path on WebGPU). `embeds` is null where the golden holds none (tiny). */
export interface Gemma3IdsErrors {
  embeds: number | null;
  hidden: number;
  logits: number;
  stepHidden: number;
  stepLogits: number;
}

/** The hidden size of each case (for the test's guard that √hidden is not a bf16 value). */
export function gemma3IdsHidden(name: Gemma3IdsCase): number {
  return name === 'tiny' ? tinyGolden().dims.hidden : golden.cases[name].dims.hidden;
}

/** How far the old rule (√hidden and the scaled rows rounded to bf16) lands from the golden, as the script measured. */
export const gemma3Bf16Rule = (name: Exclude<Gemma3IdsCase, 'tiny'>) => golden.cases[name].bf16_rule;

function f64(b64: string): Float64Array {
  const buf = Buffer.from(b64, 'base64');
  return new Float64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
}

function tinyGolden(): { ids: number[]; dims: { T: number; hidden: number; vocab: number }; hidden: string; logits: string } {
  return JSON.parse(readFileSync('test/golden/tiny-gemma3-tiny.json', 'utf8'));
}

/** The case's model on `b` and its golden arrays. */
async function load(b: Backend, name: Gemma3IdsCase) {
  if (name === 'tiny') {
    const dir = 'models/tiny/gemma3-tiny';
    const g = tinyGolden();
    const config = parseDecoderConfig(readFileSync(`${dir}/config.json`, 'utf8'), `${dir}/config.json`);
    const store = await openCheckpoint(dir);
    const weights = await loadDecoderWeights(config, store, b);
    await store.close();
    return { model: new Decoder(config, weights), ids: g.ids, embeds: null, hidden: f64(g.hidden), logits: f64(g.logits) };
  }
  const g = golden.cases[name];
  const tensors = Object.entries(g.tensors).map(([n, t]): [string, StTensor] =>
    [n, { dtype: 'BF16', shape: t.shape, bytes: new Uint8Array(Buffer.from(t.bf16, 'base64')) }]);
  const store = await SafetensorsFile.fromBytes(writeSafetensors(tensors), `gemma3-ids ${name}`);
  const config = parseDecoderConfig(g.config as Record<string, unknown>, `gemma3-ids.json ${name}`);
  const weights = await loadDecoderWeights(config, store, b);
  return { model: new Decoder(config, weights), ids: g.ids, embeds: f64(g.embeds), hidden: f64(g.hidden), logits: f64(g.logits) };
}

/**
 * Runs case `name` on `b`. `read` reads a tensor's values (default Tensor.read, f32; the f64 CPU backend passes its
 * own to keep f64).
 */
export async function gemma3IdsErrors(
  b: Backend,
  name: Gemma3IdsCase,
  read: (t: Tensor) => Promise<ArrayLike<number>> = (t) => t.read(),
): Promise<Gemma3IdsErrors> {
  const { model, ids, embeds, hidden, logits } = await load(b, name);
  const T = ids.length;
  // f32 k and v: an f16 cache (WebGPU's default with shader-f16) rounds them, 4-8e-5 of the peak here, bounded on its
  // own by src/model/kv-f16.gpu.test.ts; this checks the arithmetic
  model.kvDtype = 'f32';
  try {
    const idsT = b.fromValues(ids, [T], 'i32');
    const e = model.embed(idsT);
    const whole = model.forward({ inputIds: idsT, logits: 'all' });
    const errors = {
      embeds: embeds && scaledError(await read(e), embeds),
      hidden: scaledError(await read(whole.hidden), hidden),
      logits: scaledError(await read(whole.logits!), logits),
    };
    [idsT, e, whole.hidden, whole.logits!].forEach((t) => t.dispose());
    const cache = model.newCache(T);
    const stepHidden: number[] = [];
    const stepLogits: number[] = [];
    for (const id of ids) {
      const one = b.fromValues([id], [1], 'i32');
      const out = model.forward({ inputIds: one, cache, logits: 'all' });
      stepHidden.push(...Array.from(await read(out.hidden)));
      stepLogits.push(...Array.from(await read(out.logits!)));
      [one, out.hidden, out.logits!].forEach((t) => t.dispose());
    }
    cache.dispose();
    return { ...errors, stepHidden: scaledError(stepHidden, hidden), stepLogits: scaledError(stepLogits, logits) };
  } finally {
    model.dispose();
  }
}

/** "embeds 0.00e+0, hidden 2.1e-7, …" */
export const formatIdsErrors = (err: Gemma3IdsErrors): string =>
  Object.entries(err).filter(([, v]) => v !== null).map(([k, v]) => `${k} ${(v as number).toExponential(2)}`).join(', ');
