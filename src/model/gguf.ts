/**
 * Decoders from a llama.cpp GGUF file: the DecoderConfig from its metadata and a WeightSource that serves
 * the Hugging Face tensor names loadDecoderWeights asks for from llama.cpp's names, in our storage dtypes.
 * Quantized tensors (q8_0/q4_0) pass through as stored, so the model runs on exactly the values ggml would.
 * Architectures: llama (also Mistral), qwen2, qwen3, gemma3 and qwen35 (Qwen3.5's text model).
 *
 * What convert_hf_to_gguf.py changes, and what is done about it here (docs/backbones/gguf.md has the sources):
 * - `LlamaModel.permute` reorders the rows of q/k (architecture `llama` only) from Hugging Face's half-split
 *   rotary layout to GPT-J's interleaved one. It moves whole rows, so undoing it works on quantized rows byte for byte.
 * - Llama 3 rope scaling becomes a `rope_freqs.weight` tensor of per-frequency divisors; we recover the
 *   `rope_scaling` parameters that produce exactly those divisors, and refuse the file if none do.
 * - Gemma 3 and Qwen3.5 compute their RMSNorms with (1 + w); the converter stores 1 + w in f32 and llama.cpp
 *   multiplies by it. The config takes normOffset 0 and the stored values, so the engine multiplies by exactly
 *   the numbers ggml does (subtracting 1 again would round for weights far from 1). The DeltaNet's gated norm is plain w.
 * - Qwen3.5's Gated DeltaNet: A_log is stored as ssm_a = −exp(A_log) (read back as log(−ssm_a), one f32 rounding),
 *   conv1d [C, 1, K] squeezed to [C, K], dt_bias renamed ssm_dt.bias; with more value heads than key heads the
 *   value heads are reordered from grouped by key head to tiled (see `vHeadAt`), which we move back.
 */
import { CorruptCheckpoint, UnknownModelType, UnsupportedFeature } from '../errors';
import { QK, isQuant, quantBytesPerRow, rowBytes } from '../formats/dtype';
import { decode } from '../formats/encode';
import { type GgufFile, readGgufHeader, readGgufTensor } from '../formats/gguf';
import type { StTensor, StorageTensor } from '../formats/safetensors';
import type { ByteSource } from '../formats/sources';
import type { RopeConfig, RopeScaling } from '../kernels/rope';
import type { Backend } from '../tensor/backend';
import { type DecoderConfig, type DeltaNetConfig, type Family, sizeOverLimit } from './config';
import { type DecoderWeights, type LoadOptions, type WeightSource, loadDecoderWeights } from './weights';

/** general.architecture → the family read: llama.cpp's names (Qwen3.5's text model is `qwen35`). */
const GGUF_ARCHES: Readonly<Record<string, Family>> = {
  llama: 'llama',
  qwen2: 'qwen2',
  qwen3: 'qwen3',
  gemma3: 'gemma3',
  qwen35: 'qwen3_5',
};

/** GGUF metadata keys (after `{arch}.`) that size the model → the config.json field whose limit (CONFIG_LIMITS) bounds them. */
const GGUF_SIZES: Readonly<Record<string, string>> = {
  block_count: 'num_hidden_layers', embedding_length: 'hidden_size', feed_forward_length: 'intermediate_size',
  'attention.head_count': 'num_attention_heads', 'attention.head_count_kv': 'num_key_value_heads', 'attention.key_length': 'head_dim',
  context_length: 'max_position_embeddings',
};

/** The llama.cpp tensor name for a Hugging Face decoder tensor name of `family`, or null for names it has no place for. */
export function ggufTensorName(hf: string, family: Family): string | null {
  const fixed: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight',
    'model.norm.weight': 'output_norm.weight',
    'lm_head.weight': 'output.weight',
  };
  if (fixed[hf]) return fixed[hf];
  const p = /^model\.layers\.(\d+)\.linear_attn\.(A_log|dt_bias)$/.exec(hf);
  if (p) return `blk.${p[1]}.${p[2] === 'A_log' ? 'ssm_a' : 'ssm_dt.bias'}`;
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(hf);
  if (!m) return null;
  const part: Record<string, string> = {
    input_layernorm: 'attn_norm',
    // gemma3 and qwen35 list it as the attention's post norm (in Qwen3.5 it is still the MLP's input norm)
    post_attention_layernorm: family === 'gemma3' || family === 'qwen3_5' ? 'post_attention_norm' : 'ffn_norm',
    pre_feedforward_layernorm: 'ffn_norm',
    post_feedforward_layernorm: 'post_ffw_norm',
    'self_attn.q_proj': 'attn_q',
    'self_attn.k_proj': 'attn_k',
    'self_attn.v_proj': 'attn_v',
    'self_attn.o_proj': 'attn_output',
    'self_attn.q_norm': 'attn_q_norm',
    'self_attn.k_norm': 'attn_k_norm',
    'mlp.gate_proj': 'ffn_gate',
    'mlp.up_proj': 'ffn_up',
    'mlp.down_proj': 'ffn_down',
    'linear_attn.in_proj_qkv': 'attn_qkv',
    'linear_attn.in_proj_z': 'attn_gate',
    'linear_attn.in_proj_b': 'ssm_beta',
    'linear_attn.in_proj_a': 'ssm_alpha',
    'linear_attn.conv1d': 'ssm_conv1d',
    'linear_attn.norm': 'ssm_norm',
    'linear_attn.out_proj': 'ssm_out',
  };
  const g = part[m[2]];
  return g ? `blk.${m[1]}.${g}.${m[3]}` : null;
}

/**
 * Undoes convert_hf_to_gguf.py's `permute(w, n_head)` =
 * `w.reshape(n_head, 2, rows // n_head // 2, ...).swapaxes(1, 2).reshape(w.shape)` on the rows of
 * `bytes` (`rows` rows of `rowStride` bytes each, any dtype): GGUF row h·D + 2i + s holds HF row h·D + s·D/2 + i.
 */
export function unpermuteRows(bytes: Uint8Array, rows: number, rowStride: number, nHead: number): Uint8Array {
  const D = rows / nHead;
  if (!Number.isInteger(D) || D % 2)
    throw new CorruptCheckpoint(`cannot undo the q/k permutation: ${rows} rows do not split into ${nHead} heads of even size`);
  const half = D / 2;
  return moveRowBytes(bytes, rows, rowStride, (to) => {
    const h = Math.floor(to / D), s = Math.floor((to % D) / half), i = to % half;
    return h * D + 2 * i + s;
  });
}

/** Rows of `rowStride` bytes rearranged: output row r is input row `from(r)`. */
function moveRowBytes(bytes: Uint8Array, rows: number, rowStride: number, from: (row: number) => number): Uint8Array {
  const out = new Uint8Array(bytes.length);
  for (let r = 0; r < rows; r++) {
    const f = from(r);
    out.set(bytes.subarray(f * rowStride, (f + 1) * rowStride), r * rowStride);
  }
  return out;
}

/**
 * Where Hugging Face value head `h` sits in a qwen35 GGUF. The converter's `_LinearAttentionVReorderBase` turns
 * the grouped order (value head h reads key head ⌊h / R⌋, R = valueHeads / keyHeads) into the tiled one
 * (position j reads key head j mod keyHeads, what ggml_repeat gives): head k·R + r goes to r·keyHeads + k.
 */
export const vHeadAt = (h: number, keyHeads: number, valueHeads: number): number => {
  const R = valueHeads / keyHeads;
  return (h % R) * keyHeads + Math.floor(h / R);
};

/** `t` with output row r taken from row `from(r)` (any dtype; a 1-D quantized tensor is decoded first). */
export function moveRows(t: StorageTensor, from: (row: number) => number): StorageTensor {
  if (t.shape.length === 1 && isQuant(t.dtype))
    t = { dtype: 'f32', shape: t.shape, bytes: new Uint8Array(decode(t.dtype, t.bytes, t.shape).buffer) };
  const rows = t.shape[0];
  return { ...t, bytes: moveRowBytes(t.bytes, rows, t.bytes.length / rows, from) };
}

/**
 * `t` [rows, cols] with output column c taken from column `from(c)`. Quantized rows stay quantized when every
 * output block draws from a single input block (its scale moves with it); otherwise the values are decoded to f32,
 * which holds them exactly (a q8_0/q4_0 value is a small integer times an f16 scale).
 */
export function moveCols(t: StorageTensor, from: (col: number) => number): StorageTensor {
  const [rows, cols] = t.shape;
  const src = Array.from({ length: cols }, (_, c) => from(c));
  if (isQuant(t.dtype)) {
    const blockOf = (b: number) => Math.floor(src[b * QK] / QK);
    const whole = src.every((s, c) => Math.floor(s / QK) === blockOf(Math.floor(c / QK)));
    if (!whole) return moveCols({ dtype: 'f32', shape: t.shape, bytes: new Uint8Array(decode(t.dtype, t.bytes, t.shape).buffer) }, from);
    const stride = rowBytes(t.dtype, cols);
    const qBytes = quantBytesPerRow(t.dtype, cols);
    const out = new Uint8Array(t.bytes.length);
    for (let r = 0; r < rows; r++) {
      const base = r * stride;
      for (let b = 0; b < cols / QK; b++) {
        const sb = blockOf(b);
        out.set(t.bytes.subarray(base + qBytes + 2 * sb, base + qBytes + 2 * sb + 2), base + qBytes + 2 * b);
      }
      for (let c = 0; c < cols; c++) {
        if (t.dtype === 'q8_0') {
          out[base + c] = t.bytes[base + src[c]];
        } else {
          // q4_0: element j of a block is the low nibble of byte j (j < 16) or the high nibble of byte j − 16
          const s = src[c], sj = s % QK, cj = c % QK;
          const nib = (t.bytes[base + (s - sj) / 2 + (sj % 16)] >> (sj < 16 ? 0 : 4)) & 15;
          out[base + (c - cj) / 2 + (cj % 16)] |= nib << (cj < 16 ? 0 : 4);
        }
      }
    }
    return { ...t, bytes: out };
  }
  const e = rowBytes(t.dtype, 1);
  const out = new Uint8Array(t.bytes.length);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out.set(t.bytes.subarray((r * cols + src[c]) * e, (r * cols + src[c] + 1) * e), (r * cols + c) * e);
  }
  return { ...t, bytes: out };
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

type Num = (key: string, fallback?: number) => number;

/** A DecoderConfig from GGUF metadata (see the module comment for what is recovered and how). */
export async function decoderConfigFromGguf(file: GgufFile): Promise<DecoderConfig> {
  const arch = meta(file, 'general.architecture');
  const family = typeof arch === 'string' && Object.hasOwn(GGUF_ARCHES, arch) ? GGUF_ARCHES[arch] : undefined;
  if (typeof arch !== 'string' || !family) {
    const moe = arch === 'qwen35moe' || arch === 'qwen3next' ? ' (mixture-of-experts models are not)' : '';
    throw new UnknownModelType(`${file.name}: general.architecture ${JSON.stringify(arch)} is not supported${moe}; this engine reads ` +
      `${Object.keys(GGUF_ARCHES).join(', ')} GGUF files (llama.cpp writes Mistral 7B as llama)`);
  }
  const num: Num = (key, fallback) => {
    const v = meta(file, `${arch}.${key}`) ?? fallback;
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isFinite(n)) {
      throw new CorruptCheckpoint(
        `${file.name}: metadata "${arch}.${key}" is missing or not a number (got ${String(v)}); convert the model again with llama.cpp's convert_hf_to_gguf.py`,
      );
    }
    return n;
  };
  // a size is a positive integer within config.json's limits, so that no per-layer list is sized by a forged header
  const size: Num = (key, fallback) => {
    const n = num(key, fallback);
    const over = Number.isInteger(n) && n > 0 ? sizeOverLimit(file.name, `${arch}.${key}`, n, GGUF_SIZES[key]) : `${file.name}: ` +
      `metadata "${arch}.${key}" must be a positive integer, got ${n}`;
    if (over) throw new CorruptCheckpoint(`${over}; convert the model again with llama.cpp's convert_hf_to_gguf.py`);
    return n;
  };
  const tensor = (n: string) => file.tensors.find((t) => t.name === n);
  const hidden = size('embedding_length');
  const heads = size('attention.head_count');
  const kvHeads = size('attention.head_count_kv', heads);
  const headDim = size('attention.key_length', hidden / heads);
  const rotary = num('rope.dimension_count', headDim);
  if (!Number.isInteger(rotary) || rotary < 2 || rotary % 2 || rotary > headDim) {
    throw new CorruptCheckpoint(`${file.name}: metadata "${arch}.rope.dimension_count" must be an even number of rotated ` +
      `dimensions from 2 to the head dimension ${headDim}, got ${rotary}; convert the model again with llama.cpp's convert_hf_to_gguf.py`);
  }
  if (rotary !== headDim && family !== 'qwen3_5') {
    throw new UnsupportedFeature(
      `${file.name}: partial rotary embeddings (rope.dimension_count ${rotary} of head_dim ${headDim}) are not supported`,
    );
  }
  const embd = tensor('token_embd.weight');
  if (!embd)
    throw new CorruptCheckpoint(
      `${file.name} has no tensor "token_embd.weight" (model.embed_tokens.weight); the file is incomplete or not a decoder`,
    );
  const tokens = meta(file, 'tokenizer.ggml.tokens');
  const vocabSize = embd.shape[0] ?? (Array.isArray(tokens) ? tokens.length : 0);
  const has = (n: string) => !!tensor(n);
  const theta = f32Decimal(num('rope.freq_base', 10000));
  const id = (k: string) => {
    const v = meta(file, `tokenizer.ggml.${k}`);
    return typeof v === 'number' || typeof v === 'bigint' ? Number(v) : null;
  };
  const eos = id('eos_token_id');
  // Qwen3.5's multi-token-prediction block is appended after the decoder's own layers (llama.cpp: n_layer_nextn)
  const layers = size('block_count') - (family === 'qwen3_5' ? num('nextn_predict_layers', 0) : 0);
  if (!Number.isInteger(layers) || layers < 1)
    throw new CorruptCheckpoint(`${file.name}: block_count less nextn_predict_layers leaves ${layers} decoder layers; convert the model again`);
  const scaling = await ropeScaling(file, arch, theta, headDim, num('context_length', 0));
  const base: DecoderConfig = {
    family,
    vocabSize,
    hidden,
    layers,
    heads,
    kvHeads,
    headDim,
    intermediate: size('feed_forward_length'),
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
    rope: { theta, headDim, scaling },
    ropeLocal: null,
    maxPositions: size('context_length', 32768),
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
  if (family === 'gemma3') return { ...base, ...gemma3Fields(file, num, base) };
  if (family === 'qwen3_5') return { ...base, ...qwen35Fields(file, num, base, rotary) };
  return base;
}

/** Gemma 3 as llama.cpp's llama_model_gemma3 reads it: what the file leaves out is hard-coded there. */
function gemma3Fields(file: GgufFile, num: Num, c: DecoderConfig): Partial<DecoderConfig> {
  const { hidden, heads, headDim, layers } = c;
  const window = num('attention.sliding_window', 0);
  if (Array.isArray(meta(file, 'gemma3.attention.sliding_window_pattern'))) {
    throw new UnsupportedFeature(
      `${file.name}: gemma3.attention.sliding_window_pattern is a per-layer array; llama.cpp's gemma3 reads one period`,
    );
  }
  // the converter writes no pattern: llama.cpp's default period 6 makes every 6th layer global (set_swa_pattern)
  const period = num('attention.sliding_window_pattern', 6);
  const cap = num('final_logit_softcapping', 0);
  return {
    qkNorm: true,
    sandwichNorms: true,
    mlpAct: 'gelu_tanh',
    embedScale: Math.sqrt(hidden),
    // query_pre_attn_scalar is not in the file: llama.cpp scales by 1/√head_dim, or 1/√(hidden/heads) for the
    // 62-layer 27B (both what the released configs say)
    attnScale: (layers === 62 ? Math.floor(hidden / heads) : headDim) ** -0.5,
    finalSoftcap: cap ? f32Decimal(cap) : null,
    // the local layers rotate with their own base (default 10000) and no scaling
    ropeLocal: window > 0 ? { theta: f32Decimal(num('rope.freq_base_swa', 10000)), headDim, scaling: null } : null,
    slidingWindow: window > 0 ? window : null,
    windowLayers: Array.from({ length: layers }, (_, i) => window > 0 && (period === 0 || i % period < period - 1)),
  };
}

/** Qwen3.5 as llama.cpp's llama_model_qwen35 reads it (ssm.* keys for the Gated DeltaNet). */
function qwen35Fields(file: GgufFile, num: Num, c: DecoderConfig, rotary: number): Partial<DecoderConfig> {
  const { layers, headDim } = c;
  const d: DeltaNetConfig = {
    keyHeads: num('ssm.group_count'), valueHeads: num('ssm.time_step_rank'), keyDim: num('ssm.state_size'),
    valueDim: num('ssm.inner_size') / num('ssm.time_step_rank'), convKernel: num('ssm.conv_kernel'),
  };
  if (!Number.isInteger(d.valueDim) || d.valueHeads % d.keyHeads) {
    throw new CorruptCheckpoint(`${file.name}: qwen35.ssm.inner_size ${d.valueDim * d.valueHeads} and time_step_rank ${d.valueHeads} ` +
      `(value heads) do not fit group_count ${d.keyHeads} (key heads); convert the model again`);
  }
  let linearLayers: boolean[];
  const rec = meta(file, 'qwen35.attention.recurrent_layers');
  if (Array.isArray(rec)) {
    if (rec.length < layers)
      throw new CorruptCheckpoint(`${file.name}: qwen35.attention.recurrent_layers lists ${rec.length} layers, block_count says ${layers}`);
    linearLayers = rec.slice(0, layers).map((v) => Number(v) !== 0);
  } else {
    const every = num('full_attention_interval', 4);
    if (!Number.isInteger(every) || every < 1)
      throw new CorruptCheckpoint(`${file.name}: qwen35.full_attention_interval must be a positive integer, got ${every}`);
    linearLayers = Array.from({ length: layers }, (_, i) => (i + 1) % every !== 0);
  }
  checkTextRope(file, rotary);
  const partial = rotary / headDim;
  const rope: RopeConfig = {
    ...c.rope,
    partialRotaryFactor: partial,
    ...(Math.trunc(headDim * partial) === rotary ? {} : { rotaryDim: rotary }),
  };
  return { qkNorm: true, attnOutputGate: true, deltaNet: d, linearLayers, rope };
}

/**
 * qwen35 rotates with ggml's interleaved multi-axis rope: rotary pair i takes its position from the axis that
 * rope.dimension_sections gives its sector. For text llama.cpp sets the first three axes to the token position
 * and the fourth to 0, so the rope is the plain one exactly when no rotated pair falls on the fourth axis.
 */
function checkTextRope(file: GgufFile, rotary: number) {
  const raw = meta(file, 'qwen35.rope.dimension_sections');
  if (!Array.isArray(raw)) return;
  const s = Array.from({ length: 4 }, (_, i) => Number(raw[i] ?? 0));
  const total = s.reduce((a, b) => a + b, 0);
  for (let i = 0; i < rotary / 2; i++) {
    const sector = total > 0 ? i % total : 0;
    const axis = [0, 1, 2].find((a) => sector % 3 === a && sector < 3 * s[a]);
    if (axis === undefined) {
      throw new UnsupportedFeature(`${file.name}: qwen35.rope.dimension_sections [${s.join(', ')}] put rotary pair ${i} on the fourth ` +
        'axis, which llama.cpp rotates by position 0 for text; this engine rotates every pair by the token position');
    }
  }
}

async function ropeScaling(file: GgufFile, arch: string, theta: number, headDim: number, ctx: number): Promise<RopeScaling | null> {
  const type = meta(file, `${arch}.rope.scaling.type`);
  const factor = meta(file, `${arch}.rope.scaling.factor`);
  if (type === 'linear' && typeof factor === 'number') return { rope_type: 'linear', factor: f32Decimal(factor) };
  if (type !== undefined && type !== 'none' && type !== 'linear') {
    throw new UnsupportedFeature(
      `${file.name}: rope scaling type ${JSON.stringify(type)} is not supported (default, linear and llama3 are)`,
    );
  }
  const info = file.tensors.find((t) => t.name === 'rope_freqs.weight');
  if (!info) return null;
  const t = await readGgufTensor(file, info);
  const ff = decode(t.dtype, t.bytes, t.shape);
  const inv = Array.from({ length: headDim / 2 }, (_, i) => 1 / theta ** ((2 * i) / headDim));
  if (ff.length !== inv.length)
    throw new CorruptCheckpoint(`${file.name}: rope_freqs.weight has ${ff.length} factors, head_dim ${headDim} needs ${inv.length}`);
  const scale = Math.max(...ff);
  // convert_hf_to_gguf.py writes llama3 divisors from (factor, low, high, original context); Llama 3.x uses
  // low 1, high 4. The original context is not stored: try the stated one, then every power of two.
  const tries = [meta(file, `${arch}.rope.scaling.original_context_length`), ctx, ...Array.from({ length: 20 }, (_, k) => 2 ** (k + 4))];
  for (const old of tries) {
    if (typeof old !== 'number' || !(old > 0)) continue;
    const s: RopeScaling = {
      rope_type: 'llama3',
      factor: Math.round(scale * 1e4) / 1e4,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: old,
    };
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

/**
 * A qwen35 DeltaNet tensor (`part` of linear_attn) back in Hugging Face's layout: the value heads in grouped order,
 * conv1d [C, 1, K], A_log from ssm_a. A tensor of an unexpected size is left as read for the loader's shape check.
 */
function deltaNetTensor(t: StorageTensor, part: string, d: DeltaNetConfig, file: string): StorageTensor {
  const { keyHeads: nk, valueHeads: nv, keyDim: dk, valueDim: dv } = d;
  const qk = 2 * nk * dk;
  if (part === 'conv1d' && t.shape.length === 2) t = { ...t, shape: [t.shape[0], 1, t.shape[1]] };
  if (part === 'A_log') {
    const a = decode(t.dtype, t.bytes, t.shape);
    if (!a.every((v) => v < 0))
      throw new CorruptCheckpoint(`${file}: ssm_a must hold −exp(A_log) < 0, as convert_hf_to_gguf.py writes it; convert the model again`);
    t = { dtype: 'f32', shape: t.shape, bytes: new Uint8Array(Float32Array.from(a, (v) => Math.log(-v)).buffer) };
  }
  if (nv === nk) return t;
  const at = (h: number) => vHeadAt(h, nk, nv);
  const head = (i: number, size: number) => at(Math.floor(i / size)) * size + (i % size);
  const rows = t.shape[0];
  switch (part) {
    case 'in_proj_qkv':
    case 'conv1d':
      return rows === qk + nv * dv ? moveRows(t, (r) => (r < qk ? r : qk + head(r - qk, dv))) : t;
    case 'in_proj_z':
      return rows === nv * dv ? moveRows(t, (r) => head(r, dv)) : t;
    case 'in_proj_b':
    case 'in_proj_a':
    case 'A_log':
    case 'dt_bias':
      return rows === nv ? moveRows(t, at) : t;
    case 'out_proj':
      return t.shape[1] === nv * dv ? moveCols(t, (c) => head(c, dv)) : t;
    default:
      return t;
  }
}

/** Serves Hugging Face tensor names from a GGUF file, in storage dtypes, with llama.cpp's layout changes undone. */
export function ggufWeightSource(file: GgufFile, config: DecoderConfig): WeightSource {
  const names = new Set(file.tensors.map((t) => t.name));
  const map = (n: string) => ggufTensorName(n, config.family);
  const readStorage = async (name: string): Promise<StorageTensor> => {
    const g = map(name);
    if (!g || !names.has(g))
      throw new CorruptCheckpoint(
        `${file.name} has no tensor "${g ?? name}" (${name}); the file is incomplete or belongs to another model`,
      );
    const t = await readGgufTensor(file, g);
    const dn = /\.linear_attn\.(\w+?)(?:\.weight)?$/.exec(name);
    if (dn && config.deltaNet) return deltaNetTensor(t, dn[1], config.deltaNet, file.name);
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
