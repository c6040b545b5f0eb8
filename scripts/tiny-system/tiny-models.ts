/**
 * Writes the tiny deterministic random checkpoints in Hugging Face layout that tests, golden files and
 * the offline playground use: `npm run models:tiny` (`npx tsx scripts/tiny-system/build.ts models [--out DIR]`, default models/tiny).
 *
 * One folder per family, each shaped like the real checkpoint it stands for (Qwen3-1.7B,
 * Llama-3.2-1B-Instruct, Qwen2.5-Math-1.5B-Instruct, BioMistral-7B) but tiny, and each exercising what is
 * particular to its family: Qwen3's explicit head_dim (deliberately ≠ hidden/heads) and q/k RMSNorm, Llama 3's
 * rope scaling (original_max_position_embeddings small enough that all three frequency bands of the llama3
 * rule occur at head_dim 16), an untied lm_head, an eos list and a separate chat_template.jinja, Qwen2's q/k/v
 * biases, Mistral's sliding window on every layer, Gemma 3's released image-text layout with its sliding and
 * global layers, sandwich norms, GeGLU and scaled embeddings, and Qwen3.5's image-text layout with Gated DeltaNet
 * and gated attention layers, a vision tower and multi-token-prediction tensors beside them. Widths differ between
 * families so that a shape mix-up cannot pass by accident.
 *
 * Everything is a pure function of the specs below: the same bytes on every run and platform, which
 * test/tiny-models.test.ts checks against the committed folders.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { f32ToBf16Bits } from '../../src/formats/dtype.ts';
import { type StTensor, writeSafetensors } from '../../src/formats/safetensors.ts';
import { Rng } from '../../src/util/rng.ts';
import { buildTinyTokenizer } from './tokenizer.ts';

/** Merges of the shared tiny tokenizer; ~460 ids in all, so embeddings stay a few tens of KB. */
export const TINY_MERGES = 200;

export interface TinySpec {
  name: string;
  family: 'qwen3' | 'llama' | 'qwen2' | 'mistral' | 'gemma3' | 'qwen3_5';
  seed: number;
  hidden: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  tie: boolean;
  /** Write the chat template to chat_template.jinja instead of tokenizer_config.json. */
  separateTemplate: boolean;
}

export const TINY_SPECS: readonly TinySpec[] = [
  {
    name: 'qwen3-tiny',
    family: 'qwen3',
    seed: 3,
    hidden: 48,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 128,
    tie: true,
    separateTemplate: false,
  },
  {
    name: 'llama-tiny',
    family: 'llama',
    seed: 1,
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 160,
    tie: false,
    separateTemplate: true,
  },
  {
    name: 'qwen2-tiny',
    family: 'qwen2',
    seed: 2,
    hidden: 32,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 8,
    intermediate: 88,
    tie: true,
    separateTemplate: false,
  },
  // Mistral 7B's shape: 4 query heads per kv head, head_dim = hidden / heads (no head_dim key), untied, and a
  // sliding window (4) shorter than the golden's 7 tokens, so that the window changes the outputs
  {
    name: 'mistral-tiny',
    family: 'mistral',
    seed: 4,
    hidden: 40,
    layers: 2,
    heads: 4,
    kvHeads: 1,
    headDim: 10,
    intermediate: 96,
    tie: false,
    separateTemplate: false,
  },
  // gemma-3-4b-it's layout: an image-text checkpoint (model_type gemma3, the decoder under text_config and under
  // language_model.model.*, a small vision tower and projector beside it that the engine must never read).
  // head_dim ≠ hidden/heads and query_pre_attn_scalar ≠ head_dim (as 256 vs 2560/8 = 320 on the 4B), three layers
  // with sliding_window_pattern 2 (sliding, full, sliding) so both rope bases and the window (4 < the golden's
  // 7 tokens) act, the global rope linearly scaled by 8, tied embeddings scaled by √hidden, zero-centred norms.
  {
    name: 'gemma3-tiny',
    family: 'gemma3',
    seed: 5,
    hidden: 56,
    layers: 3,
    heads: 4,
    kvHeads: 2,
    headDim: 24,
    intermediate: 128,
    tie: true,
    separateTemplate: false,
  },
  // Qwen3.5-9B's layout: an image-text checkpoint (model_type qwen3_5, the decoder under text_config and under
  // model.language_model.*, lm_head.weight at the top, untied; model.visual.* and mtp.* beside it, never read).
  // Three Gated DeltaNet layers then a gated attention layer (as every 4th on the real models), two value heads
  // per key head and key ≠ value dims (TINY_QWEN3_5), head_dim 32 of which a quarter rotates, zero-centred norms.
  {
    name: 'qwen3_5-tiny',
    family: 'qwen3_5',
    seed: 6,
    hidden: 48,
    layers: 4,
    heads: 2,
    kvHeads: 1,
    headDim: 32,
    intermediate: 96,
    tie: false,
    separateTemplate: false,
  },
  // Qwen3.5-4B's (and 2B's): tied embeddings, at both levels of the config; no layer_types, so that
  // full_attention_interval (2 here: linear, full, linear, full) places the attention layers
  {
    name: 'qwen3_5-tied-tiny',
    family: 'qwen3_5',
    seed: 7,
    hidden: 40,
    layers: 4,
    heads: 2,
    kvHeads: 1,
    headDim: 24,
    intermediate: 80,
    tie: true,
    separateTemplate: false,
  },
];
/** mistral-tiny's sliding_window (BioMistral-7B: 4096). */
export const TINY_MISTRAL_WINDOW = 4;
/** gemma3-tiny's text_config values that the released gemma-3-4b-it sets or inherits differently (4B: 1024, 256, 6). */
export const TINY_GEMMA3 = { slidingWindow: 4, queryPreAttnScalar: 20, pattern: 2 } as const;
/** The tiny Qwen3.5 models' Gated DeltaNet sizes (4B/9B: 16 key heads, 32 value heads, 128, 128, 4) and layer pattern. */
export const TINY_QWEN3_5: Readonly<Record<string, {
  keyHeads: number; valueHeads: number; keyDim: number; valueDim: number; convKernel: number;
  /** layer_types as written in config.json, or null: every `interval`-th layer attends. */
  layerTypes: readonly string[] | null; interval: number;
}>> = {
  'qwen3_5-tiny': {
    keyHeads: 2, valueHeads: 4, keyDim: 16, valueDim: 12, convKernel: 4, interval: 4,
    layerTypes: ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'],
  },
  'qwen3_5-tied-tiny': { keyHeads: 2, valueHeads: 4, keyDim: 8, valueDim: 10, convKernel: 4, interval: 2, layerTypes: null },
};

/** Whether layer `i` of a tiny Qwen3.5 is a Gated DeltaNet. */
const tinyLinear = (name: string, i: number): boolean => {
  const q = TINY_QWEN3_5[name]!;
  return q.layerTypes ? q.layerTypes[i] === 'linear_attention' : (i + 1) % q.interval !== 0;
};
/** Vision tower and multi-token-prediction tensors of qwen3_5-tiny: stand-ins, never read by the engine. */
export const QWEN3_5_UNREAD_TENSORS: readonly [string, number[]][] = [
  ['model.visual.patch_embed.proj.weight', [8, 3, 2, 2, 2]],
  ['model.visual.blocks.0.attn.qkv.weight', [24, 8]],
  ['model.visual.merger.linear_fc2.weight', [48, 32]],
  ['mtp.fc.weight', [48, 96]],
  ['mtp.layers.0.self_attn.q_proj.weight', [128, 48]],
  ['mtp.norm.weight', [48]],
];
/** The image-text checkpoint's prefix of the decoder (gemma-3-4b-it as released). */
const GEMMA3_PREFIX = 'language_model.';
/** Vision tower and projector tensors of gemma3-tiny: stand-ins, never read by the engine. */
export const GEMMA3_VISION_TENSORS: readonly [string, number[]][] = [
  ['vision_tower.vision_model.embeddings.patch_embedding.weight', [8, 3, 2, 2]],
  ['vision_tower.vision_model.embeddings.position_embedding.weight', [16, 8]],
  ['vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight', [8, 8]],
  ['vision_tower.vision_model.post_layernorm.weight', [8]],
  ['multi_modal_projector.mm_input_projection_weight', [8, 56]],
  ['multi_modal_projector.mm_soft_emb_norm.weight', [8]],
];

const MAX_POSITIONS = 512;
const TRANSFORMERS_VERSION = '4.51.0';

/** Token ids the configs refer to, looked up in the tokenizer that ships next to them. */
export function specialIds(tokenizerJson: Record<string, unknown>) {
  const added = tokenizerJson.added_tokens as { id: number; content: string }[];
  const id = (content: string) => {
    const t = added.find((a) => a.content === content);
    if (!t) throw new Error(`the tiny tokenizer has no ${content}; scripts/tiny-system/tokenizer.ts changed its added tokens`);
    return t.id;
  };
  return { endOfText: id('<|endoftext|>'), imEnd: id('<|im_end|>') };
}

/** The vocabulary size a config needs for a tokenizer: one past its largest id. */
export function vocabSize(tokenizerJson: Record<string, unknown>): number {
  const model = tokenizerJson.model as { vocab: Record<string, number> };
  const added = tokenizerJson.added_tokens as { id: number }[];
  return Math.max(...Object.values(model.vocab), ...added.map((a) => a.id)) + 1;
}

/** config.json with the key names and value conventions of the real checkpoint of each family. */
export function buildConfig(spec: TinySpec, vocab: number, ids: ReturnType<typeof specialIds>): Record<string, unknown> {
  const common = {
    attention_dropout: 0.0,
    bos_token_id: ids.endOfText,
    hidden_act: 'silu',
    hidden_size: spec.hidden,
    initializer_range: 0.02,
    intermediate_size: spec.intermediate,
    max_position_embeddings: MAX_POSITIONS,
    model_type: spec.family,
    num_attention_heads: spec.heads,
    num_hidden_layers: spec.layers,
    num_key_value_heads: spec.kvHeads,
    tie_word_embeddings: spec.tie,
    torch_dtype: 'bfloat16',
    transformers_version: TRANSFORMERS_VERSION,
    use_cache: true,
    vocab_size: vocab,
  };
  let config: Record<string, unknown>;
  if (spec.family === 'qwen3') {
    config = {
      ...common, architectures: ['Qwen3ForCausalLM'], attention_bias: false, eos_token_id: ids.imEnd,
      head_dim: spec.headDim, max_window_layers: spec.layers, rms_norm_eps: 1e-6, rope_scaling: null,
      rope_theta: 1000000, sliding_window: null, use_sliding_window: false,
    };
  } else if (spec.family === 'llama') {
    config = {
      ...common, architectures: ['LlamaForCausalLM'], attention_bias: false, eos_token_id: [ids.imEnd, ids.endOfText],
      head_dim: spec.headDim, mlp_bias: false, pretraining_tp: 1, rms_norm_eps: 1e-5,
      // Wavelengths 2π·500000^(i/8) at head_dim 16: i = 0 (6.3) is below 64/4 and kept, i = 1 (32.5)
      // lies between 64/4 and 64/1 and is smoothed, i ≥ 2 exceed 64 and are divided by the factor.
      rope_scaling: { factor: 8.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 64, rope_type: 'llama3' },
      rope_theta: 500000.0,
    };
  } else if (spec.family === 'gemma3') {
    // the wrapper as gemma-3-4b-it ships it: text_config lists only what differs from Gemma3TextConfig's defaults
    // (the tiny sizes, the window, the rope), ids and dtype live at the top
    const text = sortKeys({
      hidden_size: spec.hidden, intermediate_size: spec.intermediate, model_type: 'gemma3_text', num_attention_heads: spec.heads,
      num_hidden_layers: spec.layers, num_key_value_heads: spec.kvHeads, head_dim: spec.headDim, max_position_embeddings: MAX_POSITIONS,
      query_pre_attn_scalar: TINY_GEMMA3.queryPreAttnScalar, rope_scaling: { factor: 8.0, rope_type: 'linear' },
      sliding_window: TINY_GEMMA3.slidingWindow, sliding_window_pattern: TINY_GEMMA3.pattern, vocab_size: vocab,
    });
    return sortKeys({
      architectures: ['Gemma3ForConditionalGeneration'],
      bos_token_id: ids.endOfText,
      eos_token_id: [ids.imEnd, ids.endOfText],
      image_token_index: vocab - 1,
      initializer_range: 0.02,
      mm_tokens_per_image: 4,
      model_type: 'gemma3',
      text_config: text,
      torch_dtype: 'bfloat16',
      transformers_version: '4.50.0',
      vision_config: {
        hidden_size: 8,
        image_size: 8,
        intermediate_size: 16,
        model_type: 'siglip_vision_model',
        num_attention_heads: 2,
        num_hidden_layers: 1,
        patch_size: 2,
      },
    });
  } else if (spec.family === 'qwen3_5') {
    // as the Qwen3.5 releases ship it: every text field written out, rope_parameters with the partial rotary and
    // mRoPE sections (a text-only input makes mRoPE plain RoPE), the special ids of the image-text wrapper
    const q = TINY_QWEN3_5[spec.name]!;
    const text = sortKeys({
      attention_bias: false,
      attention_dropout: 0.0,
      attn_output_gate: true,
      dtype: 'bfloat16',
      eos_token_id: ids.endOfText,
      full_attention_interval: q.interval,
      head_dim: spec.headDim,
      hidden_act: 'silu',
      hidden_size: spec.hidden,
      initializer_range: 0.02,
      intermediate_size: spec.intermediate,
      ...(q.layerTypes ? { layer_types: [...q.layerTypes] } : {}),
      linear_conv_kernel_dim: q.convKernel,
      linear_key_head_dim: q.keyDim,
      linear_num_key_heads: q.keyHeads,
      linear_num_value_heads: q.valueHeads,
      linear_value_head_dim: q.valueDim,
      mamba_ssm_dtype: 'float32',
      max_position_embeddings: MAX_POSITIONS,
      mlp_only_layers: [],
      model_type: 'qwen3_5_text',
      mtp_num_hidden_layers: 1,
      mtp_use_dedicated_embeddings: false,
      num_attention_heads: spec.heads,
      num_hidden_layers: spec.layers,
      num_key_value_heads: spec.kvHeads,
      rms_norm_eps: 1e-6,
      rope_parameters: {
        mrope_interleaved: true,
        mrope_section: [1, 1, 2],
        partial_rotary_factor: 0.25,
        rope_theta: 10000000,
        rope_type: 'default',
      },
      tie_word_embeddings: spec.tie,
      use_cache: true,
      vocab_size: vocab,
    });
    return sortKeys({
      architectures: ['Qwen3_5ForConditionalGeneration'],
      image_token_id: vocab - 1,
      model_type: 'qwen3_5',
      text_config: text,
      tie_word_embeddings: spec.tie,
      transformers_version: '4.57.0.dev0',
      video_token_id: vocab - 2,
      vision_config: {
        deepstack_visual_indexes: [],
        depth: 1,
        hidden_act: 'gelu_pytorch_tanh',
        hidden_size: 8,
        in_channels: 3,
        intermediate_size: 16,
        model_type: 'qwen3_5',
        num_heads: 2,
        out_hidden_size: spec.hidden,
        patch_size: 2,
        spatial_merge_size: 2,
        temporal_patch_size: 2,
      },
      vision_end_token_id: vocab - 3,
      vision_start_token_id: vocab - 4,
    });
  } else if (spec.family === 'mistral') {
    config = {
      ...common, architectures: ['MistralForCausalLM'], eos_token_id: ids.imEnd, rms_norm_eps: 1e-5, rope_theta: 10000.0,
      sliding_window: TINY_MISTRAL_WINDOW,
    };
  } else {
    config = {
      ...common, architectures: ['Qwen2ForCausalLM'], eos_token_id: ids.imEnd, max_window_layers: spec.layers,
      rms_norm_eps: 1e-6, rope_theta: 10000.0, sliding_window: MAX_POSITIONS, use_mrope: false, use_sliding_window: false,
    };
  }
  return sortKeys(config);
}

/** As Qwen3 ships it; generation stops on any of the eos ids, <|endoftext|> included. */
export function buildGenerationConfig(ids: ReturnType<typeof specialIds>): Record<string, unknown> {
  return {
    bos_token_id: ids.endOfText,
    do_sample: true,
    eos_token_id: [ids.imEnd, ids.endOfText],
    pad_token_id: ids.endOfText,
    temperature: 0.6,
    top_k: 20,
    top_p: 0.95,
    transformers_version: TRANSFORMERS_VERSION,
  };
}

/** Hugging Face tensor names and shapes ([out, in] for Linear weights), in generation order. */
export function tensorShapes(spec: TinySpec, vocab: number): [string, number[]][] {
  const { hidden: d, heads, kvHeads, headDim: hd, intermediate: ff } = spec;
  const out: [string, number[]][] = [['model.embed_tokens.weight', [vocab, d]]];
  for (let i = 0; i < spec.layers; i++) {
    const p = `model.layers.${i}`;
    out.push([`${p}.input_layernorm.weight`, [d]]);
    if (spec.family === 'qwen3_5' && tinyLinear(spec.name, i)) {
      const { keyHeads: nk, valueHeads: nv, keyDim: dk, valueDim: dv, convKernel: K } = TINY_QWEN3_5[spec.name]!;
      const C = 2 * nk * dk + nv * dv;
      const l = `${p}.linear_attn`;
      out.push([`${l}.in_proj_qkv.weight`, [C, d]], [`${l}.in_proj_z.weight`, [nv * dv, d]], [`${l}.in_proj_b.weight`, [nv, d]],
        [`${l}.in_proj_a.weight`, [nv, d]], [`${l}.conv1d.weight`, [C, 1, K]], [`${l}.A_log`, [nv]], [`${l}.dt_bias`, [nv]],
        [`${l}.norm.weight`, [dv]], [`${l}.out_proj.weight`, [d, nv * dv]]);
      out.push([`${p}.post_attention_layernorm.weight`, [d]]);
      out.push([`${p}.mlp.gate_proj.weight`, [ff, d]], [`${p}.mlp.up_proj.weight`, [ff, d]], [`${p}.mlp.down_proj.weight`, [d, ff]]);
      continue;
    }
    // Qwen3.5's q_proj holds each head's query and then its output gate
    out.push([`${p}.self_attn.q_proj.weight`, [heads * hd * (spec.family === 'qwen3_5' ? 2 : 1), d]]);
    out.push([`${p}.self_attn.k_proj.weight`, [kvHeads * hd, d]]);
    out.push([`${p}.self_attn.v_proj.weight`, [kvHeads * hd, d]]);
    if (spec.family === 'qwen2') {
      out.push([`${p}.self_attn.q_proj.bias`, [heads * hd]]);
      out.push([`${p}.self_attn.k_proj.bias`, [kvHeads * hd]]);
      out.push([`${p}.self_attn.v_proj.bias`, [kvHeads * hd]]);
    }
    if (spec.family === 'qwen3' || spec.family === 'gemma3' || spec.family === 'qwen3_5') {
      out.push([`${p}.self_attn.q_norm.weight`, [hd]]);
      out.push([`${p}.self_attn.k_norm.weight`, [hd]]);
    }
    out.push([`${p}.self_attn.o_proj.weight`, [d, heads * hd]]);
    out.push([`${p}.post_attention_layernorm.weight`, [d]]);
    if (spec.family === 'gemma3') {
      out.push([`${p}.pre_feedforward_layernorm.weight`, [d]]);
      out.push([`${p}.post_feedforward_layernorm.weight`, [d]]);
    }
    out.push([`${p}.mlp.gate_proj.weight`, [ff, d]]);
    out.push([`${p}.mlp.up_proj.weight`, [ff, d]]);
    out.push([`${p}.mlp.down_proj.weight`, [d, ff]]);
  }
  out.push(['model.norm.weight', [d]]);
  if (!spec.tie) out.push(['lm_head.weight', [vocab, d]]);
  if (spec.family === 'qwen3_5') {
    const moved = out.map(([n, sh]): [string, number[]] => [
      n.startsWith('model.') ? `model.language_model.${n.slice('model.'.length)}` : n,
      sh,
    ]);
    return [...moved, ...QWEN3_5_UNREAD_TENSORS];
  }
  if (spec.family !== 'gemma3') return out;
  return [...out.map(([n, sh]): [string, number[]] => [GEMMA3_PREFIX + n, sh]), ...GEMMA3_VISION_TENSORS];
}

/**
 * Random values for one tensor. Not the 0.02 of initializer_range: with such small weights attention
 * would be nearly uniform and a RoPE or masking bug would not change the outputs. Linear weights get
 * std 1/√fan_in, so activations stay O(1) and attention scores spread; embeddings std 1 (tied logits
 * then spread over a few units, so greedy decoding is not a tie-break); norm weights 1 ± 0.1 and
 * biases std 0.1, so a missing norm weight or bias shows up too.
 */
function values(rng: Rng, name: string, shape: number[], family: TinySpec['family']): Float32Array {
  const n = shape.reduce((a, b) => a * b, 1);
  if (name.endsWith('norm.weight')) {
    // Gemma's and Qwen3.5's norms scale by (1 + w): zero-centred weights; the DeltaNet's gated norm uses plain w
    const v = rng.normals(n, 0.1);
    const centred = family === 'gemma3' || (family === 'qwen3_5' && !name.endsWith('linear_attn.norm.weight'));
    if (!centred) for (let i = 0; i < n; i++) v[i] = v[i]! + 1;
    return v;
  }
  // the decay rate exp(A_log) near 0.2, so that the state keeps a few tokens (α = e^{−0.2·softplus(·)} ≈ 0.87)
  if (name.endsWith('.A_log')) return rng.normals(n, 0.3).map((x) => x - 1.6);
  if (name.endsWith('.dt_bias')) return rng.normals(n, 0.1);
  if (name.endsWith('.bias')) return rng.normals(n, 0.1);
  if (name.endsWith('model.embed_tokens.weight')) return rng.normals(n, 1);
  return rng.normals(n, 1 / Math.sqrt(shape[shape.length - 1]!));
}

function toBf16(v: Float32Array): Uint8Array {
  const bytes = new Uint8Array(v.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < v.length; i++) view.setUint16(2 * i, f32ToBf16Bits(v[i]!), true);
  return bytes;
}

const json = (x: unknown) => `${JSON.stringify(x, null, 2)}\n`;

function sortKeys(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
}

/** Every file of one tiny model folder, by file name. */
export function buildTinyModel(spec: TinySpec): Map<string, Uint8Array> {
  const tok = buildTinyTokenizer({ merges: TINY_MERGES });
  const ids = specialIds(tok.tokenizerJson);
  const vocab = vocabSize(tok.tokenizerJson);
  const rng = new Rng(spec.seed);
  const tensors: [string, StTensor][] = tensorShapes(spec, vocab).map(([name, shape]) => [
    name, { dtype: 'BF16', shape, bytes: toBf16(values(rng, name, shape, spec.family)) },
  ]);

  const tokenizerConfig: Record<string, unknown> = { ...tok.tokenizerConfig };
  if (spec.separateTemplate) delete tokenizerConfig.chat_template;
  // Llama 3 folders name the generic fast class; the Qwen ones keep Qwen2Tokenizer.
  if (spec.family === 'llama') tokenizerConfig.tokenizer_class = 'PreTrainedTokenizerFast';

  const enc = new TextEncoder();
  const files = new Map<string, Uint8Array>([
    ['config.json', enc.encode(json(buildConfig(spec, vocab, ids)))],
    ['generation_config.json', enc.encode(json(buildGenerationConfig(ids)))],
    ['model.safetensors', writeSafetensors(tensors, { format: 'pt' })],
    ['tokenizer.json', enc.encode(json(tok.tokenizerJson))],
    ['tokenizer_config.json', enc.encode(json(tokenizerConfig))],
  ]);
  if (spec.separateTemplate) files.set('chat_template.jinja', enc.encode(tok.chatTemplate));
  return files;
}

/** Writes every tiny model under `outDir/<name>/`; returns the paths written. */
export async function writeTinyModels(outDir: string, specs: readonly TinySpec[] = TINY_SPECS): Promise<string[]> {
  const written: string[] = [];
  for (const spec of specs) {
    const dir = join(outDir, spec.name);
    await mkdir(dir, { recursive: true });
    for (const [file, bytes] of buildTinyModel(spec)) {
      await writeFile(join(dir, file), bytes);
      written.push(join(dir, file));
    }
  }
  return written;
}
