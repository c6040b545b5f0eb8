/**
 * What loading a system will cost before anything is fetched: bytes to download (less what the cache
 * holds), an estimate of GPU memory, and whether this adapter can hold it at all. Pure, no I/O (but planGgufModel).
 *
 * GPU memory per model (bytes):
 *   weights     = Σ byteSize(dtype(t), shape(t)) over weightSpecs(config), where a 2-D projection takes the
 *                 chosen dtype (q4_0 / q8_0 / f16), the embedding table and norms keep the saved dtype
 *                 (f16 when 'f16' is chosen), biases are f32. With quantize null the checkpoint is
 *                 uploaded as stored, so weights = weightsBytes (the safetensors payload).
 *   kvCache     = 2 (k, v) · layers · context · kvHeads · headDim · 2 (f16, the default where the adapter has
 *                 shader-f16) or 4 (f32, elsewhere); PlanOptions.kvDtype overrides it
 *   activations = 4 · T · (6·hidden + 3·intermediate + (heads + 2·kvHeads)·headDim)   per-token rows of one layer
 *               + 4 · heads · T · context                                           attention scores
 *               + 4 · vocab · logitRows                                             logits
 *                 with T = prefill tokens (min(context, 512) unless given) and logitRows = 1
 *   links       = 4 (f32) · (inner ln_res_adapter(hidden) + outer ln_res_adapter(hidden → next model's
 *                 hidden)), times 4 when training (parameters, gradients, AdamW m and v)
 * The system total is the sum over models (the models stay resident together).
 *
 * A GGUF backbone (planGgufModel, the one function here that reads: the file's header by HTTP Range) lists its
 * tensors as stored: each counts at the dtype it is uploaded in (q8_0/q4_0/f16/bf16/f32 as stored, Q4_K/Q6_K
 * as the f32 they are dequantized to, biases and quantized norms as f32, float projections at `quantize`
 * when one is chosen), and its one file's size is what is fetched.
 */
import { MissingCheckpoint } from '../errors';
import { type DType, byteSize, isQuant, rowBytes } from '../formats/dtype';
import { readGgufHeader } from '../formats/gguf';
import { isNotFound, urlSource } from '../formats/sources';
import { innerLinkParamCount, outerLinkParamCount } from '../mas/links';
import type { KvDType } from '../model/cache';
import type { DecoderConfig } from '../model/config';
import { ggufTensorName } from '../model/gguf';
import { decoderConfigFromGguf } from '../model/gguf-config';
import { fileUrl, modelFetch } from '../model/url';
import { weightSpecs } from '../model/weights';

export type PlanQuantize = 'q4_0' | 'q8_0' | 'f16' | null;

export interface PlanLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  features: readonly string[];
}

export interface PlanOptions {
  /** URLs already complete in the cache (not fetched again). */
  cached?: Iterable<string>;
  /** Positions the KV cache holds (default 4096). */
  context?: number;
  /** Tokens of one prefill forward (default min(context, 512)). */
  prefillTokens?: number;
  /** Count gradients and AdamW state of the links too (default false). */
  training?: boolean;
  /** The KV cache's dtype (default: f16 when the limits list shader-f16, as the decoder's default, else f32). */
  kvDtype?: KvDType;
}

export interface ModelPlan {
  weights: number;
  kvCache: number;
  activations: number;
  links: number;
  total: number;
}

export interface DownloadPlan {
  /** Bytes still to download. */
  fetchBytes: number;
  /** Bytes served from the cache. */
  cachedBytes: number;
  /** All bytes of the listed files. */
  totalBytes: number;
  models: ModelPlan[];
  /** Estimated GPU memory of the whole system. */
  gpuBytes: number;
  /** Why this adapter cannot run it, or null when it can. */
  refusal: string | null;
  /** The error the engine would stop with, named as the runner names it (BindingLimitExceeded, …), or null. */
  refusalName: 'BindingLimitExceeded' | 'UnsupportedFeature' | 'InvalidArgument' | null;
}

/** A weight as a GGUF stores it: `dtype` is what the reader turns it into (null: a type the engine cannot read). */
export interface PlanTensor {
  /** The Hugging Face name (model.layers.0.self_attn.q_proj.weight). */
  name: string;
  kind: 'proj' | 'norm' | 'bias' | 'embed';
  shape: number[];
  dtype: DType | null;
  /** The ggml type name, for messages (Q8_0, Q5_K, …). */
  typeName: string;
}

/** A model the planner sizes: its config and safetensors payload bytes, or (a GGUF) its stored tensors. */
export interface PlanModel {
  config: DecoderConfig;
  weightsBytes: number;
  /** GGUF: the tensors as stored; weights are counted from them instead of from the config. */
  tensors?: readonly PlanTensor[];
}

/**
 * Config, stored tensors and file size of the GGUF at `url`, from its header read by HTTP Range through
 * `fetcher` (never the weights; a llama3 rope_freqs vector of head_dim/2 floats at most).
 */
export async function planGgufModel(url: string, fetcher: typeof fetch): Promise<{ url: string; bytes: number; model: PlanModel }> {
  const abs = fileUrl(url);
  const src = urlSource(abs, { fetch: modelFetch(fetcher) });
  let file: Awaited<ReturnType<typeof readGgufHeader>>;
  try {
    file = await readGgufHeader(src, abs);
  } catch (e) {
    if (!isNotFound(e)) throw e;
    throw new MissingCheckpoint(`${(e as Error).message}; give the URL of a .gguf file (…/resolve/main/<name>.gguf on the hub)`);
  }
  const config = await decoderConfigFromGguf(file);
  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  const tensors: PlanTensor[] = [];
  let weightsBytes = 0;
  for (const s of weightSpecs(config)) {
    const t = byName.get(ggufTensorName(s.name, config.family) ?? '');
    // a tensor the file lacks fails the load with its name; the plan counts it at f32
    tensors.push({ name: s.name, kind: s.kind, shape: s.shape, dtype: t ? t.dtype : 'f32', typeName: t?.typeName ?? 'missing' });
    weightsBytes += t?.byteLength ?? 0;
  }
  return { url: abs, bytes: await src.size(), model: { config, weightsBytes, tensors } };
}

/** The download URL of `file` in a Hugging Face hub repository at `revision`. */
export function hfFileUrl(repo: string, file: string, revision = 'main'): string {
  return `https://huggingface.co/${repo}/resolve/${revision}/${file}`;
}

/** The dtype a checkpoint's `torch_dtype` names (bf16 when unknown: what Hugging Face repos ship). */
export function savedDType(c: DecoderConfig): DType {
  switch (c.savedDtype) {
    case 'float32':
      return 'f32';
    case 'float16':
      return 'f16';
    default:
      return 'bf16';
  }
}

const mib = (n: number) => `${(n / 2 ** 20).toFixed(n < 2 ** 20 ? 3 : 1)} MiB`;

/** Bytes, GPU memory and feasibility of loading `models` (whose files are `files`) at `quantize`. */
export function planSystemDownload(
  files: readonly { url: string; bytes: number }[],
  models: readonly PlanModel[],
  limits: PlanLimits,
  quantize: PlanQuantize,
  opts: PlanOptions = {},
): DownloadPlan {
  const cached = new Set(opts.cached ?? []);
  let fetchBytes = 0;
  let cachedBytes = 0;
  for (const f of files) {
    if (cached.has(f.url)) cachedBytes += f.bytes;
    else fetchBytes += f.bytes;
  }
  const context = opts.context ?? 4096;
  const T = opts.prefillTokens ?? Math.min(context, 512);
  const binding = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const kvBytes = (opts.kvDtype ?? (limits.features.includes('shader-f16') ? 'f16' : 'f32')) === 'f16' ? 2 : 4;
  let refusal: string | null = null;
  let refusalName: DownloadPlan['refusalName'] = null;
  const refuse = (name: NonNullable<DownloadPlan['refusalName']>, why: string) => {
    if (refusal !== null) return;
    refusal = why;
    refusalName = name;
  };

  // f16 weights need no 'shader-f16': the kernels read f16/bf16 as packed u32 pairs (src/kernels/wgsl.ts)
  // and use the feature only as a faster path where it exists

  const plans = models.map(({ config: c, weightsBytes, tensors }, i): ModelPlan => {
    const saved = savedDType(c);
    let weights = 0;
    for (const s of tensors ?? weightSpecs(c)) {
      const stored = 'dtype' in s ? s.dtype : undefined;
      if (stored === null) {
        refuse(
          'UnsupportedFeature',
          `model ${i + 1}: "${s.name}" is stored as ${(s as PlanTensor).typeName}, which this engine does not read; use a GGUF converted to f16, q8_0 or q4_0`,
        );
        continue;
      }
      let dt: DType =
        s.kind === 'bias'
          ? 'f32'
          : stored !== undefined
            ? s.kind === 'norm' && isQuant(stored)
              ? 'f32'
              : stored
            : quantize === 'f16'
              ? 'f16'
              : saved;
      // a GGUF's quantized weights are uploaded as stored; only its float projections take `quantize`
      if (s.kind === 'proj' && (quantize === 'q4_0' || quantize === 'q8_0') && !(stored && isQuant(stored))) {
        if (s.shape[1] % 32) {
          refuse(
            'InvalidArgument',
            `model ${i + 1}: "${s.name}" has ${s.shape[1]} columns, not a multiple of 32, so it cannot be ${quantize}; choose f16 or no quantization`,
          );
        } else dt = quantize;
      }
      weights += byteSize(dt, s.shape);
      // The backend splits a tensor over bindings at dim-0 boundaries: one row must fit a binding.
      const row = s.shape.length > 1 ? rowBytes(dt, s.shape[s.shape.length - 1]) : byteSize(dt, s.shape);
      if (row > binding) {
        refuse('BindingLimitExceeded', `model ${i + 1}: one row of "${s.name}" (${dt}, ${row} bytes) is larger than this adapter's ` +
          `${binding}-byte storage-binding limit, so it cannot be split to fit; use a device with larger limits or a smaller model`);
      }
    }
    if (quantize === null && !tensors) weights = weightsBytes;
    const kvCache = 2 * c.layers * context * c.kvHeads * c.headDim * kvBytes;
    const kvRow = c.kvHeads * c.headDim * kvBytes;
    if (kvRow > binding)
      refuse('BindingLimitExceeded', `model ${i + 1}: one KV-cache row (${kvRow} bytes) exceeds the ${binding}-byte binding limit`);
    const activations = 4 * T * (6 * c.hidden + 3 * c.intermediate + (c.heads + 2 * c.kvHeads) * c.headDim)
      + 4 * c.heads * T * context + 4 * c.vocabSize;
    const next = models[(i + 1) % models.length].config.hidden;
    const linkParams = innerLinkParamCount(c.hidden) + (models.length > 1 ? outerLinkParamCount(c.hidden, next) : 0);
    const links = 4 * linkParams * (opts.training ? 4 : 1);
    return { weights, kvCache, activations, links, total: weights + kvCache + activations + links };
  });
  const gpuBytes = plans.reduce((a, p) => a + p.total, 0);
  return { fetchBytes, cachedBytes, totalBytes: fetchBytes + cachedBytes, models: plans, gpuBytes, refusal, refusalName };
}

/** "fetch 1.2 GiB (0.3 GiB cached), GPU ≈ 2.1 GiB" for the page before a download starts. */
export function describePlan(p: DownloadPlan): string {
  const s = `fetch ${mib(p.fetchBytes)}${p.cachedBytes ? ` (${mib(p.cachedBytes)} cached)` : ''}, GPU memory ≈ ${mib(p.gpuBytes)}`;
  return p.refusal ? `${s}; cannot run here: ${p.refusal}` : s;
}
