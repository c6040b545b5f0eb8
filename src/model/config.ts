/**
 * Decoder configuration from a Hugging Face `config.json`, for the families the engine runs: llama
 * (Llama 3.x), qwen2 (Qwen2 / Qwen2.5), qwen3, mistral, gemma3 and qwen3_5 (Qwen3.5's hybrid of Gated DeltaNet
 * and gated attention layers); an image-text checkpoint's decoder is read from its `text_config`. Family
 * differences that matter to the forward pass are made explicit here (q/k/v biases, q/k RMSNorm, head_dim,
 * rope scaling), so the layer code has no
 * `model_type` switches. Both rope spellings are accepted: the older `rope_theta` + `rope_scaling` and
 * the newer `rope_parameters` (transformers ≥ 4.56 / 5.x).
 */
import { InvalidModelConfig, UnknownModelType } from '../errors';
import type { RopeConfig, RopeScaling } from '../kernels/rope';
import { showValue } from '../util/show';

export const FAMILIES = ['llama', 'qwen2', 'qwen3', 'mistral', 'gemma3', 'qwen3_5'] as const;
export type Family = (typeof FAMILIES)[number];
/** What the engine runs, for messages that refuse another model_type. */
export const SUPPORTED_DECODERS = `${FAMILIES.join(', ')} decoders (Llama 3.x, Qwen2/2.5, Qwen3, Mistral, Gemma 3, Qwen3.5)`;
/**
 * The decoder model_type inside an image-text checkpoint's `text_config` → its family. The wrapper's own
 * model_type (gemma3, qwen3_5) is the family too.
 */
const TEXT_MODEL_TYPES: Readonly<Record<string, string>> = { gemma3_text: 'gemma3', qwen3_5_text: 'qwen3_5' };
/** The window layer `l` attends through, or null for full attention. */
export const layerWindow = (c: DecoderConfig, l: number): number | null => (c.windowLayers[l] ? c.slidingWindow : null);

export const isSupportedModelType = (t: unknown): t is Family => typeof t === 'string' && (FAMILIES as readonly string[]).includes(t);

export interface DecoderConfig {
  family: Family;
  vocabSize: number;
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  rmsEps: number;
  tieEmbeddings: boolean;
  /** Bias on q/k/v projections (always in Qwen2; `attention_bias` elsewhere, which also adds o_proj's). */
  qkvBias: boolean;
  oBias: boolean;
  mlpBias: boolean;
  /** Qwen3's and Gemma 3's per-head RMSNorm on q and k before RoPE. */
  qkNorm: boolean;
  /** RMSNorm weights scale by (offset + w): 1 for Gemma (zero-centred weights), 0 elsewhere. */
  normOffset: number;
  /**
   * Gemma's four norms per layer: post_attention_layernorm normalises the attention output before its residual
   * add, pre_/post_feedforward_layernorm wrap the MLP. Otherwise post_attention_layernorm is the MLP's input norm.
   */
  sandwichNorms: boolean;
  /** The MLP's gate activation: silu (SwiGLU) or gelu_tanh (Gemma's GeGLU). */
  mlpAct: 'silu' | 'gelu_tanh';
  /** embed(ids) multiplies the rows by this, in f32 (Gemma: √hidden), or null. */
  embedScale: number | null;
  /** The attention's softmax scale (Gemma: query_pre_attn_scalar^−½), or null for 1/√head_dim. */
  attnScale: number | null;
  /** Logits become cap·tanh(logits/cap) (final_logit_softcapping), or null. */
  finalSoftcap: number | null;
  rope: RopeConfig;
  /** The rotary embedding of the sliding-window layers when it differs from `rope` (Gemma 3's local base), or null. */
  ropeLocal: RopeConfig | null;
  maxPositions: number;
  /** Sliding-window attention size, or null for full attention everywhere. */
  slidingWindow: number | null;
  /**
   * Per layer, whether it attends through the window (Qwen2: from max_window_layers on; Mistral: every layer);
   * all false when slidingWindow is null.
   */
  windowLayers: readonly boolean[];
  /** Per layer, whether it is a Gated DeltaNet (Qwen3.5's linear_attention layers); all false elsewhere. */
  linearLayers: readonly boolean[];
  /** The Gated DeltaNet's sizes (Qwen3.5), or null when no layer is linear. */
  deltaNet: DeltaNetConfig | null;
  /**
   * Qwen3.5's attention output gate: q_proj yields per head [query (head_dim) | gate (head_dim)] and
   * sigmoid(gate) scales the attention output before o_proj.
   */
  attnOutputGate: boolean;
  bosTokenId: number | null;
  eosTokenIds: number[];
  /** The dtype the weights were saved in (`torch_dtype` / `dtype`), e.g. 'bfloat16'. */
  savedDtype: string | null;
}

/** Sizes of a Gated DeltaNet layer (Qwen3.5's linear_* fields). */
export interface DeltaNetConfig {
  /** linear_num_key_heads: heads of q and k. */
  keyHeads: number;
  /** linear_num_value_heads: a multiple of keyHeads; value head h reads key head ⌊h / (valueHeads / keyHeads)⌋. */
  valueHeads: number;
  keyDim: number;
  valueDim: number;
  /** linear_conv_kernel_dim: the causal depthwise conv's width over q|k|v. */
  convKernel: number;
}

/** Channels of the DeltaNet's conv: q and k (keyHeads·keyDim each), then v (valueHeads·valueDim). */
export const convChannels = (d: DeltaNetConfig): number => 2 * d.keyHeads * d.keyDim + d.valueHeads * d.valueDim;

type Json = Record<string, unknown>;

/**
 * Upper bounds on config.json's sizes: far above every released model (Llama 3.1 405B: 126 layers, hidden 16384, MLP
 * 53248; Gemma 3: vocab 262208; Llama 4 Scout: 10M positions), far below sizes whose per-layer lists alone would
 * exhaust memory before the checkpoint is read (num_hidden_layers 1e9 did).
 */
export const CONFIG_LIMITS: Readonly<Record<string, number>> = {
  num_hidden_layers: 1024, hidden_size: 65536, intermediate_size: 2 ** 20, num_attention_heads: 1024, num_key_value_heads: 1024,
  head_dim: 4096, vocab_size: 2 ** 22, max_position_embeddings: 2 ** 24, sliding_window: 2 ** 24, linear_num_key_heads: 1024,
  linear_num_value_heads: 1024, linear_key_head_dim: 4096, linear_value_head_dim: 4096, linear_conv_kernel_dim: 64,
};

/** The complaint about a size above CONFIG_LIMITS, or null when `value` is within it. */
export function sizeOverLimit(file: string, key: string, value: number, limitKey = key): string | null {
  const limit = CONFIG_LIMITS[limitKey];
  return limit !== undefined && value > limit
    ? `${file}: '${key}' is ${value}, above the limit of ${limit} this engine accepts (released models stay far below it)`
    : null;
}

/** Parses config.json text or object; `file` names the source in error messages. */
export function parseDecoderConfig(input: string | Json, file = 'config.json'): DecoderConfig {
  let c: Json;
  if (typeof input === 'string') {
    try {
      c = JSON.parse(input) as Json;
    } catch (e) {
      throw new InvalidModelConfig(`${file} is not valid JSON (${(e as Error).message}); re-download the model folder`);
    }
  } else c = input;
  if (!c || typeof c !== 'object' || Array.isArray(c)) throw new InvalidModelConfig(`${file} must hold a JSON object`);
  const imageText = c.text_config != null;
  c = textConfig(c, file);

  const type = c.model_type;
  if (!isSupportedModelType(type)) {
    throw new UnknownModelType(`${file}: model_type ${showValue(type)} is not supported; this engine runs ${SUPPORTED_DECODERS}`);
  }
  const family = type as Family;
  // a released gemma-3 text_config leaves most sizes to Gemma3TextConfig's defaults
  if (family === 'gemma3') c = { ...GEMMA3_DEFAULTS, ...c };
  if (family === 'qwen3_5') c = { ...QWEN3_5_DEFAULTS, ...c };
  const int = (key: string, fallback?: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
      throw new InvalidModelConfig(`${file}: '${key}' must be a positive integer, got ${showValue(c[key])}`);
    }
    const over = sizeOverLimit(file, key, v);
    if (over) throw new InvalidModelConfig(`${over}; fix config.json`);
    return v;
  };
  const num = (key: string, fallback: number): number => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new InvalidModelConfig(`${file}: '${key}' must be a number, got ${showValue(c[key])}`);
    return v;
  };
  /** A number that must be above 0 (an epsilon, a scale, a cap), and below `below` when given. */
  const positive = (key: string, fallback: number, below?: number): number => {
    const v = num(key, fallback);
    if (!(v > 0) || (below !== undefined && !(v < below))) {
      throw new InvalidModelConfig(
        `${file}: '${key}' must be a positive number${below !== undefined ? ` below ${below}` : ''}, got ${showValue(c[key])}; fix config.json`,
      );
    }
    return v;
  };
  const bool = (key: string, fallback: boolean): boolean => {
    const v = c[key] ?? fallback;
    if (typeof v !== 'boolean') throw new InvalidModelConfig(`${file}: '${key}' must be true or false, got ${showValue(c[key])}`);
    return v;
  };

  const hidden = int('hidden_size');
  const heads = int('num_attention_heads');
  const kvHeads = int('num_key_value_heads', heads);
  if (heads % kvHeads)
    throw new InvalidModelConfig(`${file}: num_attention_heads (${heads}) must be a multiple of num_key_value_heads (${kvHeads})`);
  // head_dim is explicit in Qwen3 (128 with hidden 2048 and 16 heads) and optional elsewhere
  const headDim = c.head_dim == null ? hidden / heads : int('head_dim');
  if (!Number.isInteger(headDim))
    throw new InvalidModelConfig(`${file}: hidden_size ${hidden} is not divisible by ${heads} heads and no head_dim is given`);
  const gemma = family === 'gemma3';
  const act = gemma ? c.hidden_activation ?? c.hidden_act : c.hidden_act ?? 'silu';
  const mlpAct = act === 'silu' ? 'silu' : act === 'gelu_pytorch_tanh' || act === 'gelu_tanh' ? 'gelu_tanh' : null;
  if (!mlpAct || (gemma && mlpAct !== 'gelu_tanh')) {
    throw new InvalidModelConfig(
      `${file}: hidden activation ${showValue(act)} is not supported (${gemma ? 'Gemma 3 uses gelu_pytorch_tanh' : 'these families use silu'})`,
    );
  }
  // attn_logit_softcapping is read by Gemma 3's config but never passed to its attention (only Gemma 2 used it):
  // ignored here as there; a family that would use it does not reach this point

  const attentionBias = bool('attention_bias', false);
  // MistralConfig's sliding_window defaults to 4096 when the key is absent; null turns it off
  if (family === 'mistral' && c.sliding_window === undefined) c = { ...c, sliding_window: 4096 };
  // Qwen2 windows only when use_sliding_window says so, from max_window_layers on; Mistral whenever
  // sliding_window is set (null in v0.2 and later), on every layer; Gemma 3 on its sliding layers
  const useWindow = family === 'qwen2' ? bool('use_sliding_window', false) : (family === 'mistral' || gemma) && c.sliding_window != null;
  const eos = c.eos_token_id;
  const eosTokenIds = Array.isArray(eos) ? eos.filter((x): x is number => typeof x === 'number') : typeof eos === 'number' ? [eos] : [];
  const layers = int('num_hidden_layers');
  const qwen35 = family === 'qwen3_5';
  const linearLayers = qwen35
    ? layersOfKind(c, layers, file, 'linear_attention', { key: 'full_attention_interval', fallback: 4 })
    : Array.from({ length: layers }, () => false);
  let deltaNet: DeltaNetConfig | null = null;
  if (qwen35) {
    deltaNet = {
      keyHeads: int('linear_num_key_heads'), valueHeads: int('linear_num_value_heads'),
      keyDim: int('linear_key_head_dim'), valueDim: int('linear_value_head_dim'), convKernel: int('linear_conv_kernel_dim'),
    };
    if (deltaNet.valueHeads % deltaNet.keyHeads) {
      throw new InvalidModelConfig(
        `${file}: linear_num_value_heads (${deltaNet.valueHeads}) must be a multiple of linear_num_key_heads (${deltaNet.keyHeads})`,
      );
    }
    // Qwen3_5TextConfig has no other activation: the MLP and the conv both use SiLU
    if (mlpAct !== 'silu') throw new InvalidModelConfig(`${file}: Qwen3.5 uses hidden_act silu, got '${String(act)}'`);
  }

  return {
    family,
    vocabSize: int('vocab_size'),
    hidden,
    layers,
    heads,
    kvHeads,
    headDim,
    intermediate: int('intermediate_size'),
    // a negative or zero epsilon turns a zero row's norm into NaN; released models use 1e-6 or 1e-5
    rmsEps: positive('rms_norm_eps', 1e-6, 1),
    tieEmbeddings: bool('tie_word_embeddings', false),
    qkvBias: family === 'qwen2' ? true : attentionBias,
    oBias: family === 'qwen2' ? false : attentionBias,
    mlpBias: bool('mlp_bias', false),
    qkNorm: family === 'qwen3' || gemma || qwen35,
    // Qwen3.5's norms are zero-centred as Gemma's (its DeltaNet's gated norm is not: plain w, in the decoder)
    normOffset: gemma || qwen35 ? 1 : 0,
    sandwichNorms: gemma,
    mlpAct,
    embedScale: gemma ? Math.sqrt(hidden) : null,
    attnScale: gemma ? positive('query_pre_attn_scalar', headDim) ** -0.5 : null,
    // transformers applies it in Gemma3ForCausalLM (text-only checkpoints) but not in the image-text model
    finalSoftcap: c.final_logit_softcapping == null || (gemma && imageText) ? null : positive('final_logit_softcapping', 0),
    rope: parseRope(gemma ? ropeOf(c, 'full_attention') : c, headDim, file, qwen35 ? 0.25 : undefined),
    ropeLocal: gemma ? parseRope(ropeOf(c, 'sliding_attention'), headDim, file) : null,
    maxPositions: int('max_position_embeddings', 32768),
    slidingWindow: useWindow ? int('sliding_window') : null,
    windowLayers: gemma
      ? layersOfKind(c, layers, file, 'sliding_attention', { key: 'sliding_window_pattern' }).map((sliding) => useWindow && sliding)
      : Array.from(
          { length: layers },
          (_, l) => useWindow && l >= (family === 'qwen2' && typeof c.max_window_layers === 'number' ? c.max_window_layers : 0),
        ),
    linearLayers,
    deltaNet,
    // config.json's attn_output_gate is true in every release and transformers never reads it: the gate is always on
    attnOutputGate: qwen35,
    bosTokenId: typeof c.bos_token_id === 'number' ? c.bos_token_id : null,
    eosTokenIds,
    savedDtype: typeof (c.torch_dtype ?? c.dtype) === 'string' ? String(c.torch_dtype ?? c.dtype) : null,
  };
}

/** Gemma3TextConfig's defaults (transformers), for the fields a released text_config leaves out. */
const GEMMA3_DEFAULTS: Json = {
  vocab_size: 262208, hidden_size: 2304, intermediate_size: 9216, num_hidden_layers: 26, num_attention_heads: 8,
  num_key_value_heads: 4, head_dim: 256, hidden_activation: 'gelu_pytorch_tanh', max_position_embeddings: 131072,
  rms_norm_eps: 1e-6, rope_theta: 1000000, rope_local_base_freq: 10000, rope_scaling: null, query_pre_attn_scalar: 256,
  sliding_window: 4096, sliding_window_pattern: 6, final_logit_softcapping: null, attn_logit_softcapping: null,
  tie_word_embeddings: true, attention_bias: false, bos_token_id: 2, eos_token_id: 1,
};

/**
 * Qwen3_5TextConfig's defaults for the fields that shape the model (transformers); released text_configs give
 * them all, so these matter only for hand-written configs.
 */
const QWEN3_5_DEFAULTS: Json = {
  vocab_size: 248320, hidden_size: 4096, intermediate_size: 12288, num_hidden_layers: 32, num_attention_heads: 16,
  num_key_value_heads: 4, head_dim: 256, hidden_act: 'silu', max_position_embeddings: 32768, rms_norm_eps: 1e-6,
  linear_conv_kernel_dim: 4, linear_key_head_dim: 128, linear_value_head_dim: 128, linear_num_key_heads: 16,
  linear_num_value_heads: 32, attention_bias: false,
};

/**
 * Gemma 3's rope settings of one layer type as parseRope reads them: transformers 5's rope_parameters keyed by
 * layer type, or the older rope_theta + rope_scaling (full attention) and rope_local_base_freq (sliding, unscaled).
 */
function ropeOf(c: Json, type: 'full_attention' | 'sliding_attention'): Json {
  const p = c.rope_parameters as Record<string, unknown> | undefined;
  if (p && typeof p === 'object' && type in p) return { rope_parameters: p[type] };
  return type === 'full_attention'
    ? { rope_theta: c.rope_theta, rope_scaling: c.rope_scaling }
    : { rope_theta: c.rope_local_base_freq, rope_scaling: null };
}

/**
 * Per layer, whether it is of `kind` rather than full attention: config.json's layer_types (`kind` / 'full_attention'),
 * else every layer but each `period.key`-th (Gemma 3's sliding_window_pattern; Qwen3.5's full_attention_interval,
 * default 4: layers 3, 7, … attend).
 */
function layersOfKind(
  c: Json,
  layers: number,
  file: string,
  kind: 'sliding_attention' | 'linear_attention',
  period: { key: string; fallback?: number },
): boolean[] {
  const types = c.layer_types;
  if (Array.isArray(types)) {
    if (types.length !== layers || types.some((t) => t !== kind && t !== 'full_attention')) {
      throw new InvalidModelConfig(`${file}: layer_types must list ${layers} of '${kind}' / 'full_attention'`);
    }
    return types.map((t) => t === kind);
  }
  const every = c[period.key] ?? period.fallback;
  if (typeof every !== 'number' || !Number.isInteger(every) || every < 1) {
    throw new InvalidModelConfig(`${file}: ${period.key} must be a positive integer, got ${showValue(every)}`);
  }
  return Array.from({ length: layers }, (_, i) => (i + 1) % every !== 0);
}

/**
 * The decoder's own config: an image-text config's `text_config` (with the wrapper's tie_word_embeddings and
 * dtype where the text config leaves them out), else the config itself.
 */
function textConfig(c: Json, file: string): Json {
  const inner = c.text_config;
  if (inner === undefined || inner === null) {
    if (c.model_type === 'gemma3' || c.model_type === 'qwen3_5') {
      throw new InvalidModelConfig(
        `${file}: a ${c.model_type} config holds its decoder under text_config, which is missing; re-download config.json`,
      );
    }
    // a text-only checkpoint of such a family (gemma-3-1b-it is gemma3_text)
    return typeof c.model_type === 'string' && TEXT_MODEL_TYPES[c.model_type] ? { ...c, model_type: TEXT_MODEL_TYPES[c.model_type] } : c;
  }
  if (typeof inner !== 'object' || Array.isArray(inner)) throw new InvalidModelConfig(`${file}: text_config must be a JSON object`);
  const t = { ...(inner as Json) };
  for (const k of ['tie_word_embeddings', 'torch_dtype', 'dtype', 'bos_token_id', 'eos_token_id'])
    if (t[k] === undefined && c[k] !== undefined) t[k] = c[k];
  const mt = typeof t.model_type === 'string' ? t.model_type : typeof c.model_type === 'string' ? c.model_type : undefined;
  t.model_type = mt !== undefined ? TEXT_MODEL_TYPES[mt] ?? mt : mt;
  return t;
}

function parseRope(c: Json, headDim: number, file: string, defaultPartial?: number): RopeConfig {
  const params = c.rope_parameters as (RopeScaling & { rope_theta?: number; partial_rotary_factor?: number }) | undefined;
  const scaling = (params ?? (c.rope_scaling as RopeScaling | null | undefined)) ?? null;
  const theta = params?.rope_theta ?? c.rope_theta ?? 10000;
  if (typeof theta !== 'number' || !(theta > 0))
    throw new InvalidModelConfig(`${file}: rope_theta must be a positive number, got ${showValue(theta)}`);
  const type = scaling ? scaling.rope_type ?? scaling.type ?? 'default' : 'default';
  if (typeof type !== 'string' || !['default', 'linear', 'llama3'].includes(type)) {
    throw new InvalidModelConfig(`${file}: rope type ${showValue(type)} is not supported (default, linear and llama3 are)`);
  }
  // Qwen3.5 rotates a quarter of each head unless told otherwise (its config's default)
  const partial = params?.partial_rotary_factor ?? c.partial_rotary_factor ?? defaultPartial;
  if (partial !== undefined && partial !== null && !(typeof partial === 'number' && partial > 0 && partial <= 1))
    throw new InvalidModelConfig(`${file}: partial_rotary_factor must be a number in (0, 1], got ${showValue(partial)}; fix config.json`);
  return {
    theta,
    headDim,
    partialRotaryFactor: typeof partial === 'number' ? partial : undefined,
    scaling: type === 'default' ? null : scaling,
  };
}
