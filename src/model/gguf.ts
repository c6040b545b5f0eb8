/**
 * Decoders from a llama.cpp GGUF file: the DecoderConfig from its metadata (gguf-config.ts) and a WeightSource
 * that serves the Hugging Face tensor names loadDecoderWeights asks for from llama.cpp's names, in our storage dtypes.
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
import { CorruptCheckpoint, UnsupportedFeature } from '../errors';
import { QK, isQuant, quantBytesPerRow, rowBytes } from '../formats/dtype';
import { decode } from '../formats/encode';
import { type GgufFile, readGgufHeader, readGgufTensor } from '../formats/gguf';
import type { StTensor, StorageTensor } from '../formats/safetensors';
import type { ByteSource } from '../formats/sources';
import type { Backend } from '../tensor/backend';
import type { DecoderConfig, DeltaNetConfig, Family } from './config';
import { decoderConfigFromGguf } from './gguf-config';
import { type DecoderWeights, type LoadOptions, type WeightSource, loadDecoderWeights } from './weights';

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
