/**
 * A decoder whose every weight is trainable: the tensors of weightSpecs(config) are views of one f32
 * FlatParams (one buffer, one AdamW pass), wrapped as DecoderWeights so the unchanged Decoder runs them.
 * Initialisation follows Hugging Face's `_init_weights` for these families: normal(0, initializer_range)
 * for linear and embedding weights, ones for RMSNorm weights, zeros for biases. With tied embeddings
 * there is no lm_head parameter: the output projection is the embedding view itself, so both uses
 * accumulate into one gradient.
 *
 * decoderStateDict / saveDecoderCheckpoint write the parameters back under the standard key names as a
 * Hugging Face `model.safetensors` (f32 or bf16), which loadDecoderWeights reads.
 */
import { FlatParams, type ParamSpec } from '../autograd/params';
import { InvalidArgument } from '../errors';
import { type DType, byteSize } from '../formats/dtype';
import { encode } from '../formats/encode';
import { type StTensor, writeSafetensors } from '../formats/safetensors';
import { SINGLE_FILE } from '../formats/safetensors-sharded';
import type { Backend } from '../tensor/backend';
import { Rng } from '../util/rng';
import type { DecoderConfig } from './config';
import { Decoder } from './decoder';
import { type DecoderWeights, layerWeights, weightSpecs } from './weights';
import { nodeImport } from '../util/node-import';

export interface TrainableOptions {
  /** Seed of the initialisation (mulberry32 + Box-Muller); the same seed gives the same weights. */
  seed?: number;
  /** Standard deviation of linear and embedding weights (config.json's initializer_range; HF default 0.02). */
  initializerRange?: number;
}

export interface TrainableDecoder {
  decoder: Decoder;
  /** Owns the weights: dispose it (decoder.dispose() frees only the decoder's own RoPE table). */
  params: FlatParams;
}

/** Parameter specs with HF-style initial values, in weightSpecs order (no lm_head when tied). */
export function decoderParamSpecs(config: DecoderConfig, opts: TrainableOptions = {}): ParamSpec[] {
  const std = opts.initializerRange ?? 0.02;
  if (!(std >= 0) || !Number.isFinite(std)) throw new InvalidArgument(`initializerRange must be a finite number ≥ 0, got ${std}`);
  const rng = new Rng(opts.seed ?? 0);
  return weightSpecs(config).map((s) => {
    const n = s.shape.reduce((a, b) => a * b, 1);
    const init = s.kind === 'norm' ? new Float32Array(n).fill(1) : s.kind === 'bias' ? new Float32Array(n) : rng.normals(n, std);
    return { name: s.name, shape: s.shape, init };
  });
}

/** DecoderWeights whose tensors are the views of `params` (named as weightSpecs names them). */
export function weightsFromParams(config: DecoderConfig, params: FlatParams): DecoderWeights {
  const w = (n: string) => params.get(n);
  const has = new Set(params.entries.map((e) => e.name));
  const opt = (n: string) => (has.has(n) ? params.get(n) : null);
  const layers = layerWeights(config, w, opt);
  const embed = w('model.embed_tokens.weight');
  const totalBytes = params.entries.reduce((s, e) => s + byteSize('f32', e.shape), 0);
  return {
    backend: params.backend,
    embed,
    layers,
    norm: w('model.norm.weight'),
    lmHead: config.tieEmbeddings ? embed : w('lm_head.weight'),
    bytes: { f32: totalBytes },
    totalBytes,
    // the views belong to the FlatParams, which the caller disposes
    dispose: () => {},
  };
}

/** A freshly initialised decoder with all weights trainable (views of one f32 FlatParams). */
export function createTrainableDecoder(config: DecoderConfig, backend: Backend, opts: TrainableOptions = {}): TrainableDecoder {
  const params = new FlatParams(backend, decoderParamSpecs(config, opts));
  return { decoder: new Decoder(config, weightsFromParams(config, params)), params };
}

export type CheckpointDType = 'f32' | 'bf16';

/** The parameters as safetensors tensors under their Hugging Face names (one readback). */
export async function decoderStateDict(params: FlatParams, dtype: CheckpointDType = 'f32'): Promise<Map<string, StTensor>> {
  if (dtype !== 'f32' && dtype !== 'bf16')
    throw new InvalidArgument(`decoderStateDict: dtype must be 'f32' or 'bf16', got ${JSON.stringify(dtype)}`);
  const values = await params.export('data');
  const st: StTensor['dtype'] = dtype === 'f32' ? 'F32' : 'BF16';
  return new Map(
    params.entries.map((e) => [e.name, { dtype: st, shape: [...e.shape], bytes: encode(dtype as DType, values.get(e.name)!, e.shape) }]),
  );
}

/** `model.safetensors` bytes of the parameters; `metadata` defaults to {format: 'pt'} as transformers writes. */
export async function decoderSafetensors(
  params: FlatParams,
  dtype: CheckpointDType = 'f32',
  metadata: Record<string, string> = { format: 'pt' },
) {
  return writeSafetensors(await decoderStateDict(params, dtype), metadata);
}

/**
 * Writes `dir/model.safetensors` (and `dir/config.json` when `configJson` is given, verbatim) from Node.
 * The weights go to a temporary name first and are renamed into place, so a failed write leaves an
 * existing checkpoint intact.
 */
export async function saveDecoderCheckpoint(
  dir: string, params: FlatParams, opts: { dtype?: CheckpointDType; configJson?: Record<string, unknown> } = {},
): Promise<string> {
  const fs = await nodeImport('node:fs/promises');
  const base = dir.replace(/\/+$/, '');
  await fs.mkdir(base, { recursive: true });
  const bytes = await decoderSafetensors(params, opts.dtype ?? 'f32');
  const file = `${base}/${SINGLE_FILE}`;
  await fs.writeFile(`${file}.tmp`, bytes);
  await fs.rename(`${file}.tmp`, file);
  if (opts.configJson) await fs.writeFile(`${base}/config.json`, `${JSON.stringify(opts.configJson, null, 2)}\n`);
  return file;
}
