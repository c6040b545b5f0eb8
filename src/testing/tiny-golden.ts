/**
 * The committed tiny models (models/tiny) against their PyTorch golden files (test/golden/tiny-<name>.json, from
 * scripts/golden/tiny_models.py): hidden states, logits, and the gradient with respect to inputs_embeds of
 *   L = sum(hidden * R) + sum(logits[:, :C] * R2),  R[i] = sin(0.37 i + 0.1), R2[i] = cos(0.23 i)
 * on any backend. Used by test/tiny-golden.gpu.test.ts (CPU f64/f32, Dawn), and by the GPU checks
 * bench/cuda.ts and bench/webgpu.ts. Node only (reads the files from the working directory).
 */
import { readFileSync } from 'node:fs';
import { F, Tape } from '../autograd';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { Decoder, loadDecoderWeights, parseDecoderConfig } from '../model';
import { scaledError } from './model';
import type { Backend } from '../tensor/backend';
import type { Tensor } from '../tensor/tensor';

export const TINY_GOLDEN_MODELS = [
  'qwen3-tiny',
  'llama-tiny',
  'qwen2-tiny',
  'mistral-tiny',
  'gemma3-tiny',
  'qwen3_5-tiny',
  'qwen3_5-tied-tiny',
] as const;

interface Golden {
  ids: number[];
  dims: { T: number; hidden: number; vocab: number; logit_cols: number };
  hidden: string;
  logits: string;
  loss: number;
  grad: string;
}

/**
 * The bound on each golden error when every product's f32 operand is rounded to bf16 (cuda's HalfGemm 'round'):
 * 2e-2, and 0.15 for the Qwen3.5 models, whose Gated DeltaNets normalise q, k and each head's output on its own, so
 * that the rounding turns the direction of a near-cancelling random head (measured on the CUDA emulator:
 * qwen3_5-tiny's input gradient 1.6e-2, qwen3_5-tied-tiny's loss 7.6e-2). Unrounded, every model keeps 1e-4.
 */
export const roundGoldenBound = (name: string): number => (name.startsWith('qwen3_5') ? 0.15 : 2e-2);

/** max |got − want| / max |want| of each output. */
export interface TinyGoldenErrors {
  hidden: number;
  logits: number;
  grad: number;
  loss: number;
}

function f64(b64: string): Float64Array {
  const buf = Buffer.from(b64, 'base64');
  return new Float64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
}

/**
 * Runs models/tiny/<name> forward and backward on `b` and measures it against the golden file. `read` reads a
 * tensor's values (default Tensor.read, f32; the f64 CPU backend passes its own to keep f64).
 */
export async function tinyGoldenErrors(
  b: Backend,
  name: string,
  read: (t: Tensor) => Promise<ArrayLike<number>> = (t) => t.read(),
): Promise<TinyGoldenErrors> {
  const dir = `models/tiny/${name}`;
  const golden = JSON.parse(readFileSync(`test/golden/tiny-${name}.json`, 'utf8')) as Golden;
  const { T, hidden: d, vocab: V, logit_cols: C } = golden.dims;
  const R = Float64Array.from({ length: T * d }, (_, i) => Math.sin(0.37 * i + 0.1));
  // logits[:, :C] * R2 as a product with the whole [T, V] logits: zero outside the first C columns
  const R2 = new Float64Array(T * V);
  for (let t = 0; t < T; t++) for (let j = 0; j < C; j++) R2[t * V + j] = Math.cos(0.23 * (t * C + j));
  const config = parseDecoderConfig(readFileSync(`${dir}/config.json`, 'utf8'), `${dir}/config.json`);
  if (config.hidden !== d || config.vocabSize !== V)
    throw new Error(`${dir}: hidden ${config.hidden}, vocab ${config.vocabSize}; the golden file has ${d}, ${V}`);
  const store = await openCheckpoint(dir);
  const weights = await loadDecoderWeights(config, store, b);
  await store.close();
  const tape = new Tape();
  const model = new Decoder(config, weights);
  const ids = b.fromValues(golden.ids, [T], 'i32');
  const e = model.embed(ids);
  e.requiresGrad = true;
  const [r, r2] = [b.fromValues(R, [T, d]), b.fromValues(R2, [T, V])];
  try {
    const { hidden, logits, loss } = tape.run(() => {
      const out = model.forward({ inputsEmbeds: e, logits: 'all' });
      const s1 = F.sumRows(F.reshape(F.mul(out.hidden, r), [T * d]), []);
      const s2 = F.sumRows(F.reshape(F.mul(out.logits!, r2), [T * V]), []);
      return { ...out, loss: F.add(s1, s2) };
    });
    const got = { hidden: await read(hidden), logits: await read(logits!), loss: (await read(loss))[0] };
    await tape.backward(loss);
    return {
      hidden: scaledError(got.hidden, f64(golden.hidden)),
      logits: scaledError(got.logits, f64(golden.logits)),
      grad: scaledError(await read(e.grad!), f64(golden.grad)),
      loss: Math.abs(got.loss - golden.loss) / Math.abs(golden.loss),
    };
  } finally {
    tape.dispose();
    [ids, e, r, r2].forEach((t) => t.dispose());
    weights.dispose();
  }
}

/** "hidden 2.1e-7, logits …" */
export const formatGoldenErrors = (err: TinyGoldenErrors): string =>
  Object.entries(err).map(([k, v]) => `${k} ${(v as number).toExponential(2)}`).join(', ');
