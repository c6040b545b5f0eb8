/**
 * The DecoderConfig of a llama.cpp GGUF file, from its metadata: sizes (bounded as config.json's are), norms, rope
 * (Llama 3's scaling recovered from its rope_freqs.weight divisors), Gemma 3's windows and soft-caps, and Qwen3.5's
 * Gated DeltaNet layout. gguf.ts reads the weights; docs/backbones/gguf.md has what llama.cpp's converter changes.
 */
import { CorruptCheckpoint, UnknownModelType, UnsupportedFeature } from '../errors';
import { decode } from '../formats/encode';
import { type GgufFile, readGgufTensor } from '../formats/gguf';
import type { RopeConfig, RopeScaling } from '../kernels/rope';
import { type DecoderConfig, type DeltaNetConfig, type Family, sizeOverLimit } from './config';

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
