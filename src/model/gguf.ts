/**
 * Decoders from a llama.cpp GGUF file: the DecoderConfig from its metadata and a WeightSource that serves
 * the Hugging Face tensor names loadDecoderWeights asks for from llama.cpp's names, in our storage dtypes.
 * Quantized tensors (q8_0/q4_0) pass through as stored, so the model runs on exactly the values ggml would.
 *
 * Two conversions in convert_hf_to_gguf.py are undone here:
 * - `LlamaModel.permute` reorders the rows of q/k (architecture `llama` only; Qwen2/Qwen3 are written as
 *   is) from Hugging Face's half-split rotary layout to GPT-J's interleaved one. It moves whole rows, so
 *   undoing it works on quantized rows byte for byte.
 * - Llama 3 rope scaling becomes a `rope_freqs.weight` tensor of per-frequency divisors; we recover the
 *   `rope_scaling` parameters that produce exactly those divisors, and refuse the file if none do.
 */
import { CorruptCheckpoint, UnknownModelType, UnsupportedFeature } from '../errors';
import { rowBytes } from '../formats/dtype';
import { decode } from '../formats/encode';
import { type GgufFile, readGgufHeader, readGgufTensor } from '../formats/gguf';
import type { StTensor, StorageTensor } from '../formats/safetensors';
import type { ByteSource } from '../formats/sources';
import type { RopeScaling } from '../kernels/rope';
import type { Backend } from '../tensor/backend';
import type { DecoderConfig, Family } from './config';

/** The general.architecture values read: llama.cpp's names, which are these families' own. */
const GGUF_ARCHES: readonly Family[] = ['llama', 'qwen2', 'qwen3'];
import { type DecoderWeights, type LoadOptions, type WeightSource, loadDecoderWeights } from './weights';

/** The llama.cpp tensor name for a Hugging Face decoder tensor name, or null for names it has no place for. */
export function ggufTensorName(hf: string): string | null {
  const fixed: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight',
    'model.norm.weight': 'output_norm.weight',
    'lm_head.weight': 'output.weight',
  };
  if (fixed[hf]) return fixed[hf];
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(hf);
  if (!m) return null;
  const part: Record<string, string> = {
    input_layernorm: 'attn_norm', post_attention_layernorm: 'ffn_norm',
    'self_attn.q_proj': 'attn_q', 'self_attn.k_proj': 'attn_k', 'self_attn.v_proj': 'attn_v', 'self_attn.o_proj': 'attn_output',
    'self_attn.q_norm': 'attn_q_norm', 'self_attn.k_norm': 'attn_k_norm',
    'mlp.gate_proj': 'ffn_gate', 'mlp.up_proj': 'ffn_up', 'mlp.down_proj': 'ffn_down',
  };
  const p = part[m[2]];
  return p ? `blk.${m[1]}.${p}.${m[3]}` : null;
}

/**
 * Undoes convert_hf_to_gguf.py's `permute(w, n_head)` =
 * `w.reshape(n_head, 2, rows // n_head // 2, ...).swapaxes(1, 2).reshape(w.shape)` on the rows of
 * `bytes` (`rows` rows of `rowStride` bytes each, any dtype): GGUF row h·D + 2i + s holds HF row h·D + s·D/2 + i.
 */
export function unpermuteRows(bytes: Uint8Array, rows: number, rowStride: number, nHead: number): Uint8Array {
  const D = rows / nHead;
  if (!Number.isInteger(D) || D % 2) throw new CorruptCheckpoint(`cannot undo the q/k permutation: ${rows} rows do not split into ${nHead} heads of even size`);
  const out = new Uint8Array(bytes.length);
  const half = D / 2;
  for (let h = 0; h < nHead; h++) {
    for (let i = 0; i < half; i++) {
      for (let s = 0; s < 2; s++) {
        const from = h * D + 2 * i + s;
        const to = h * D + s * half + i;
        out.set(bytes.subarray(from * rowStride, (from + 1) * rowStride), to * rowStride);
      }
    }
  }
  return out;
}

const meta = (f: GgufFile, key: string) => f.metadata[key];

/**
 * GGUF stores eps and rope base as f32 (1e-5 becomes 9.99999974e-6); configs mean the decimal. Returns the
 * shortest decimal that rounds to the same f32, so a GGUF model computes what its config.json one does.
 */
export function f32Decimal(v: number): number {
  for (let p = 1; p <= 9; p++) {
    const d = Number(v.toPrecision(p));
    if (Math.fround(d) === Math.fround(v)) return d;
  }
  return v;
}

/** A DecoderConfig from GGUF metadata (see the module comment for what is recovered and how). */
export async function decoderConfigFromGguf(file: GgufFile): Promise<DecoderConfig> {
  const arch = meta(file, 'general.architecture');
  if (typeof arch !== 'string' || !(GGUF_ARCHES as readonly string[]).includes(arch)) {
    throw new UnknownModelType(`${file.name}: general.architecture ${JSON.stringify(arch)} is not supported; this engine reads ` +
      `${GGUF_ARCHES.join(', ')} GGUF files (llama.cpp writes Mistral 7B as llama)`);
  }
  const family = arch as Family;
  const num = (key: string, fallback?: number): number => {
    const v = meta(file, `${arch}.${key}`) ?? fallback;
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isFinite(n)) {
      throw new CorruptCheckpoint(`${file.name}: metadata "${arch}.${key}" is missing or not a number (got ${String(v)}); convert the model again with llama.cpp's convert_hf_to_gguf.py`);
    }
    return n;
  };
  const tensor = (n: string) => file.tensors.find((t) => t.name === n);
  const hidden = num('embedding_length');
  const heads = num('attention.head_count');
  const kvHeads = num('attention.head_count_kv', heads);
  const headDim = num('attention.key_length', hidden / heads);
  const rotary = num('rope.dimension_count', headDim);
  if (rotary !== headDim) {
    throw new UnsupportedFeature(`${file.name}: partial rotary embeddings (rope.dimension_count ${rotary} of head_dim ${headDim}) are not supported`);
  }
  const embd = tensor('token_embd.weight');
  if (!embd) throw new CorruptCheckpoint(`${file.name} has no tensor "token_embd.weight" (model.embed_tokens.weight); the file is incomplete or not a decoder`);
  const tokens = meta(file, 'tokenizer.ggml.tokens');
  const vocabSize = embd.shape[0] ?? (Array.isArray(tokens) ? tokens.length : 0);
  const has = (n: string) => !!tensor(n);
  const theta = f32Decimal(num('rope.freq_base', 10000));
  const id = (k: string) => {
    const v = meta(file, `tokenizer.ggml.${k}`);
    return typeof v === 'number' || typeof v === 'bigint' ? Number(v) : null;
  };
  const eos = id('eos_token_id');
  const layers = num('block_count');
  return {
    family,
    vocabSize,
    hidden,
    layers,
    heads,
    kvHeads,
    headDim,
    intermediate: num('feed_forward_length'),
    rmsEps: f32Decimal(num('attention.layer_norm_rms_epsilon', 1e-6)),
    tieEmbeddings: !has('output.weight'),
    qkvBias: family === 'qwen2' || has('blk.0.attn_q.bias'),
    oBias: has('blk.0.attn_output.bias'),
    mlpBias: has('blk.0.ffn_gate.bias'),
    qkNorm: family === 'qwen3',
    normOffset: 0,
    sandwichNorms: false,
    mlpAct: 'silu',
    embedScale: null,
    attnScale: null,
    finalSoftcap: null,
    rope: { theta, headDim, scaling: await ropeScaling(file, arch, theta, headDim, num('context_length', 0)) },
    ropeLocal: null,
    maxPositions: num('context_length', 32768),
    // GGUF keeps no sliding-window setting for qwen2 (llama.cpp runs it with full attention too)
    slidingWindow: null,
    windowLayers: Array.from({ length: layers }, () => false),
    linearLayers: Array.from({ length: layers }, () => false),
    deltaNet: null,
    attnOutputGate: false,
    bosTokenId: id('bos_token_id'),
    eosTokenIds: eos === null ? [] : [eos],
    savedDtype: null,
  };
}

async function ropeScaling(file: GgufFile, arch: string, theta: number, headDim: number, ctx: number): Promise<RopeScaling | null> {
  const type = meta(file, `${arch}.rope.scaling.type`);
  const factor = meta(file, `${arch}.rope.scaling.factor`);
  if (type === 'linear' && typeof factor === 'number') return { rope_type: 'linear', factor };
  if (type !== undefined && type !== 'none' && type !== 'linear') {
    throw new UnsupportedFeature(`${file.name}: rope scaling type ${JSON.stringify(type)} is not supported (default, linear and llama3 are)`);
  }
  const info = file.tensors.find((t) => t.name === 'rope_freqs.weight');
  if (!info) return null;
  const t = await readGgufTensor(file, info);
  const ff = decode(t.dtype, t.bytes, t.shape);
  const inv = Array.from({ length: headDim / 2 }, (_, i) => 1 / theta ** ((2 * i) / headDim));
  if (ff.length !== inv.length) throw new CorruptCheckpoint(`${file.name}: rope_freqs.weight has ${ff.length} factors, head_dim ${headDim} needs ${inv.length}`);
  const scale = Math.max(...ff);
  // convert_hf_to_gguf.py writes llama3 divisors from (factor, low, high, original context); Llama 3.x uses
  // low 1, high 4. The original context is not stored: try the stated one, then every power of two.
  const tries = [meta(file, `${arch}.rope.scaling.original_context_length`), ctx, ...Array.from({ length: 20 }, (_, k) => 2 ** (k + 4))];
  for (const old of tries) {
    if (typeof old !== 'number' || !(old > 0)) continue;
    const s: RopeScaling = { rope_type: 'llama3', factor: Math.round(scale * 1e4) / 1e4, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: old };
    if (inv.every((f, i) => Math.abs(llama3Divisor(f, s) - ff[i]) <= 1e-5 * ff[i])) return s;
  }
  throw new UnsupportedFeature(`${file.name}: rope_freqs.weight holds frequency factors that no Llama 3 rope_scaling (low 1, high 4) ` +
    'reproduces; this engine cannot apply arbitrary per-frequency factors');
}

/** The divisor convert_hf_to_gguf.py writes for one frequency under llama3 scaling. */
function llama3Divisor(freq: number, s: RopeScaling): number {
  const { factor = 1, low_freq_factor: low = 1, high_freq_factor: high = 4, original_max_position_embeddings: old = 8192 } = s;
  const wavelen = (2 * Math.PI) / freq;
  if (wavelen < old / high) return 1;
  if (wavelen > old / low) return factor;
  const smooth = (old / wavelen - low) / (high - low);
  return 1 / ((1 - smooth) / factor + smooth);
}

/** Serves Hugging Face tensor names from a GGUF file, in storage dtypes, with llama's q/k rows restored. */
export function ggufWeightSource(file: GgufFile, config: DecoderConfig): WeightSource {
  const names = new Set(file.tensors.map((t) => t.name));
  const map = (n: string) => ggufTensorName(n);
  const readStorage = async (name: string): Promise<StorageTensor> => {
    const g = map(name);
    if (!g || !names.has(g)) throw new CorruptCheckpoint(`${file.name} has no tensor "${g ?? name}" (${name}); the file is incomplete or belongs to another model`);
    const t = await readGgufTensor(file, g);
    const m = /\.(attn_q|attn_k)\.(weight|bias)$/.exec(g);
    if (config.family !== 'llama' || !m) return t;
    const nHead = m[1] === 'attn_q' ? config.heads : config.kvHeads;
    const rows = t.shape[0];
    const stride = t.shape.length === 1 ? rowBytes(t.dtype, 1) : rowBytes(t.dtype, t.shape[1]);
    return { ...t, bytes: unpermuteRows(t.bytes, rows, stride, nHead) };
  };
  return {
    name: file.name,
    has: (n) => { const g = map(n); return !!g && names.has(g); },
    readStorage,
    async read(name): Promise<StTensor> {
      const t = await readStorage(name);
      const dt = ({ f32: 'F32', f16: 'F16', bf16: 'BF16', i32: 'I32' } as const)[t.dtype as 'f32'];
      if (!dt) throw new UnsupportedFeature(`${file.name}: tensor "${name}" is ${t.dtype}; read it with readStorage`);
      return { dtype: dt, shape: t.shape, bytes: t.bytes };
    },
  };
}

export interface GgufDecoder {
  config: DecoderConfig;
  weights: DecoderWeights;
  /** The parsed file: its metadata holds the tokenizer (tokenizer.ggml.*) and chat template for later use. */
  file: GgufFile;
}

/** Reads a GGUF decoder: config from metadata, weights through loadDecoderWeights (opts.quantize applies to float projections only). */
export async function loadDecoderFromGguf(source: ByteSource | GgufFile, backend: Backend, opts: LoadOptions = {}): Promise<GgufDecoder> {
  const file = 'tensors' in source ? source : await readGgufHeader(source);
  const config = await decoderConfigFromGguf(file);
  const weights = await loadDecoderWeights(config, ggufWeightSource(file, config), backend, opts);
  return { config, weights, file };
}
