/**
 * Writes the tiny deterministic random checkpoints in Hugging Face layout that tests, golden files and
 * the offline playground use: `npx tsx models/generate.ts [--out models/tiny]` (or `npm run models:tiny`).
 *
 * One folder per family, each shaped like the real checkpoint it stands for (Qwen3-1.7B,
 * Llama-3.2-1B-Instruct, Qwen2.5-Math-1.5B-Instruct, BioMistral-7B) but tiny, and each exercising what is
 * particular to its family: Qwen3's explicit head_dim (deliberately ≠ hidden/heads) and q/k RMSNorm, Llama 3's
 * rope scaling (original_max_position_embeddings small enough that all three frequency bands of the llama3
 * rule occur at head_dim 16), an untied lm_head, an eos list and a separate chat_template.jinja, Qwen2's q/k/v
 * biases, Mistral's sliding window on every layer, and Gemma 3's released image-text layout with its sliding and
 * global layers, sandwich norms, GeGLU and scaled embeddings. Widths differ between families so that a shape mix-up cannot pass by accident.
 *
 * Everything is a pure function of the specs below: the same bytes on every run and platform, which
 * test/tiny-models.test.ts checks against the committed folders.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { f32ToBf16Bits } from '../src/formats/dtype.ts';
import { type StTensor, writeSafetensors } from '../src/formats/safetensors.ts';
import { Rng } from '../src/testing/rng.ts';
import { buildTinyTokenizer } from './tokenizer.ts';

/** Merges of the shared tiny tokenizer; ~460 ids in all, so embeddings stay a few tens of KB. */
export const TINY_MERGES = 200;

export interface TinySpec {
  name: string;
  family: 'qwen3' | 'llama' | 'qwen2' | 'mistral' | 'gemma3';
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
  { name: 'qwen3-tiny', family: 'qwen3', seed: 3, hidden: 48, layers: 2, heads: 4, kvHeads: 2, headDim: 16, intermediate: 128, tie: true, separateTemplate: false },
  { name: 'llama-tiny', family: 'llama', seed: 1, hidden: 64, layers: 2, heads: 4, kvHeads: 2, headDim: 16, intermediate: 160, tie: false, separateTemplate: true },
  { name: 'qwen2-tiny', family: 'qwen2', seed: 2, hidden: 32, layers: 2, heads: 4, kvHeads: 2, headDim: 8, intermediate: 88, tie: true, separateTemplate: false },
  // Mistral 7B's shape: 4 query heads per kv head, head_dim = hidden / heads (no head_dim key), untied, and a
  // sliding window (4) shorter than the golden's 7 tokens, so that the window changes the outputs
  { name: 'mistral-tiny', family: 'mistral', seed: 4, hidden: 40, layers: 2, heads: 4, kvHeads: 1, headDim: 10, intermediate: 96, tie: false, separateTemplate: false },
  // gemma-3-4b-it's layout: an image-text checkpoint (model_type gemma3, the decoder under text_config and under
  // language_model.model.*, a small vision tower and projector beside it that the engine must never read).
  // head_dim ≠ hidden/heads and query_pre_attn_scalar ≠ head_dim (as 256 vs 2560/8 = 320 on the 4B), three layers
  // with sliding_window_pattern 2 (sliding, full, sliding) so both rope bases and the window (4 < the golden's
  // 7 tokens) act, the global rope linearly scaled by 8, tied embeddings scaled by √hidden, zero-centred norms.
  { name: 'gemma3-tiny', family: 'gemma3', seed: 5, hidden: 56, layers: 3, heads: 4, kvHeads: 2, headDim: 24, intermediate: 128, tie: true, separateTemplate: false },
];
/** mistral-tiny's sliding_window (BioMistral-7B: 4096). */
export const TINY_MISTRAL_WINDOW = 4;
/** gemma3-tiny's text_config values that the released gemma-3-4b-it sets or inherits differently (4B: 1024, 256, 6). */
export const TINY_GEMMA3 = { slidingWindow: 4, queryPreAttnScalar: 20, pattern: 2 } as const;
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
    if (!t) throw new Error(`the tiny tokenizer has no ${content}; models/tokenizer.ts changed its added tokens`);
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
      architectures: ['Gemma3ForConditionalGeneration'], bos_token_id: ids.endOfText, eos_token_id: [ids.imEnd, ids.endOfText],
      image_token_index: vocab - 1, initializer_range: 0.02, mm_tokens_per_image: 4, model_type: 'gemma3', text_config: text,
      torch_dtype: 'bfloat16', transformers_version: '4.50.0',
      vision_config: { hidden_size: 8, image_size: 8, intermediate_size: 16, model_type: 'siglip_vision_model', num_attention_heads: 2, num_hidden_layers: 1, patch_size: 2 },
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
    out.push([`${p}.self_attn.q_proj.weight`, [heads * hd, d]]);
    out.push([`${p}.self_attn.k_proj.weight`, [kvHeads * hd, d]]);
    out.push([`${p}.self_attn.v_proj.weight`, [kvHeads * hd, d]]);
    if (spec.family === 'qwen2') {
      out.push([`${p}.self_attn.q_proj.bias`, [heads * hd]]);
      out.push([`${p}.self_attn.k_proj.bias`, [kvHeads * hd]]);
      out.push([`${p}.self_attn.v_proj.bias`, [kvHeads * hd]]);
    }
    if (spec.family === 'qwen3' || spec.family === 'gemma3') {
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
    // Gemma's norms scale by (1 + w): zero-centred weights
    const v = rng.normals(n, 0.1);
    if (family !== 'gemma3') for (let i = 0; i < n; i++) v[i] = v[i]! + 1;
    return v;
  }
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

async function main(argv: string[]): Promise<void> {
  let out = 'models/tiny';
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--out' && argv[i + 1]) out = argv[++i]!;
    else if (argv[i]!.startsWith('--out=')) out = argv[i]!.slice('--out='.length);
    else {
      process.stderr.write(`unknown argument ${argv[i]}; usage: tsx models/generate.ts [--out DIR]\n`);
      process.exit(2);
    }
  }
  for (const path of await writeTinyModels(resolve(out))) process.stdout.write(`${path}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  await main(process.argv.slice(2));
}
