/**
 * Test support for the decoder: tiny configs of each family, deterministic random bf16 checkpoints built
 * in memory with writeSafetensors, and an independent plain-JS f64 forward (no kernels, no F ops) written
 * from Hugging Face's modeling_llama / modeling_qwen2 / modeling_qwen3 / modeling_mistral / modeling_gemma3 to
 * check the engine against; the greedy decode loop without a cache that generate() is held to.
 */
import { F } from '../autograd';
import { bf16BitsToF32, f32ToBf16Bits } from '../formats/dtype';
import { ropeInvFreq } from '../kernels/rope';
import type { GgufKv } from './gguf-writer';
import { SafetensorsFile, type StTensor, writeSafetensors } from '../formats/safetensors';
import { Rng } from '../util/rng';
import { type DecoderConfig, type Family, layerWindow, parseDecoderConfig } from '../model/config';
import type { Decoder } from '../model/decoder';
import { weightSpecs } from '../model/weights';
import { tidy } from '../tensor/scope';

/** config.json of a tiny model: hidden 32 and every projection's input a multiple of 32 (q8_0/q4_0 blocks). */
export function tinyConfigJson(family: Family, over: Record<string, unknown> = {}): Record<string, unknown> {
  const base = { model_type: family, vocab_size: 48, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 4,
    num_key_value_heads: 2, intermediate_size: 64, rms_norm_eps: 1e-6, max_position_embeddings: 256, tie_word_embeddings: false };
  const fam: Record<Family, Record<string, unknown>> = {
    // llama3 scaling with a short original context so that all three bands (kept, blended, divided) occur
    llama: { rope_theta: 500000, rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4,
      original_max_position_embeddings: 64 } },
    // biases on q/k/v; the sliding window on layer 1 only, narrower than the test sequences
    qwen2: { rope_theta: 10000, use_sliding_window: true, sliding_window: 3, max_window_layers: 1, tie_word_embeddings: true },
    // explicit head_dim larger than hidden / heads, as in Qwen3-1.7B
    qwen3: { rope_theta: 1000000, head_dim: 16 },
    // the sliding window on every layer, narrower than the test sequences (BioMistral-7B: 4096)
    mistral: { rope_theta: 10000, sliding_window: 3 },
    // a text-only Gemma 3 (gemma3_text): head_dim and query_pre_attn_scalar apart, local and global layers
    // (pattern 2: layer 0 sliding, layer 1 full) with a window narrower than the test sequences and different
    // rope bases, the global one scaled; tied embeddings scaled by √hidden
    gemma3: { model_type: 'gemma3_text', head_dim: 16, query_pre_attn_scalar: 12, sliding_window: 3, sliding_window_pattern: 2,
      rope_theta: 1000000, rope_local_base_freq: 10000, rope_scaling: { rope_type: 'linear', factor: 8 }, tie_word_embeddings: true,
      hidden_activation: 'gelu_pytorch_tanh', final_logit_softcapping: null },
    // Qwen3.5's hybrid (qwen3_5_text): a Gated DeltaNet then a gated attention layer (every 2nd attends); two value
    // heads per key head (GVA), key and value dims apart, a quarter of each attention head rotated; (1 + w) norms
    qwen3_5: { model_type: 'qwen3_5_text', head_dim: 16, num_attention_heads: 2, num_key_value_heads: 1,
      full_attention_interval: 2, linear_num_key_heads: 2, linear_num_value_heads: 4,
      linear_key_head_dim: 16, linear_value_head_dim: 8, linear_conv_kernel_dim: 4,
      rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25 } },
  };
  return { ...base, ...fam[family], ...over };
}

export const tinyConfig = (family: Family, over?: Record<string, unknown>): DecoderConfig =>
  parseDecoderConfig(tinyConfigJson(family, over));

/** Random weights in bf16 (values exactly representable, so every backend starts from the same numbers). */
export function tinyTensors(c: DecoderConfig, seed = 1): Map<string, { shape: number[]; values: Float64Array }> {
  const rng = new Rng(seed);
  const out = new Map<string, { shape: number[]; values: Float64Array }>();
  for (const s of weightSpecs(c)) {
    const n = s.shape.reduce((a, b) => a * b, 1);
    // norms near 1 as trained models have; projections scaled by 1/√fan_in to keep activations O(1)
    const std = s.kind === 'norm' ? 0.2 : s.kind === 'bias' ? 0.1 : s.kind === 'embed' ? 1 : 1 / Math.sqrt(s.shape[1]);
    const base = s.kind === 'norm' ? 1 : 0;
    const values = Float64Array.from({ length: n }, () => bf16BitsToF32(f32ToBf16Bits(base + std * rng.normal())));
    out.set(s.name, { shape: s.shape, values });
  }
  return out;
}

export function bf16Tensor(shape: number[], values: ArrayLike<number>): StTensor {
  const bits = Uint16Array.from({ length: values.length }, (_, i) => f32ToBf16Bits(values[i]));
  return { dtype: 'BF16', shape, bytes: new Uint8Array(bits.buffer) };
}

/** The tensors as a bf16 safetensors file in memory, opened as a TensorStore. */
export function tinyCheckpoint(tensors: Map<string, { shape: number[]; values: Float64Array }>, name = 'tiny.safetensors') {
  const bytes = writeSafetensors([...tensors].map(([n, t]) => [n, bf16Tensor(t.shape, t.values)] as const));
  return SafetensorsFile.fromBytes(bytes, name);
}

// ---- the reference forward, f64, row-major plain arrays ----

type W = Map<string, { values: Float64Array }>;

/** x·rsqrt(mean(x²) + eps)·(offset + w) per row (offset 1: Gemma's zero-centred weights). */
function rmsNorm(x: Float64Array, rows: number, cols: number, w: Float64Array, eps: number, offset = 0): Float64Array {
  const y = new Float64Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let j = 0; j < cols; j++) ss += x[r * cols + j] ** 2;
    const inv = 1 / Math.sqrt(ss / cols + eps);
    for (let j = 0; j < cols; j++) y[r * cols + j] = x[r * cols + j] * inv * (offset + w[j]);
  }
  return y;
}

/** PyTorch's gelu(approximate='tanh'). */
const geluTanh = (z: number) => 0.5 * z * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (z + 0.044715 * z ** 3)));

/** x [rows, in] · wᵀ (w [out, in]) + b */
function linear(x: Float64Array, rows: number, w: Float64Array, out: number, b?: Float64Array): Float64Array {
  const inn = w.length / out;
  const y = new Float64Array(rows * out);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < out; o++) {
      let s = b ? b[o] : 0;
      for (let i = 0; i < inn; i++) s += x[r * inn + i] * w[o * inn + i];
      y[r * out + o] = s;
    }
  }
  return y;
}

/** HF rotate_half RoPE on [T, H, D] in place, over the first 2·inv.length dims of each head. */
function rope(x: Float64Array, T: number, H: number, D: number, pos: number[], inv: Float32Array) {
  const half = inv.length;
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < H; h++) {
      const o = (t * H + h) * D;
      for (let i = 0; i < half; i++) {
        // HF computes inv_freq @ positions in f32: the angle is an f32 product, as in the engine's kernels
        const a = Math.fround(pos[t] * inv[i]);
        const [c, s] = [Math.cos(a), Math.sin(a)];
        // pairs (i, i + half): the rotated dims 2·half ≤ D (partial rotary leaves the rest as they are)
        const x1 = x[o + i];
        const x2 = x[o + i + half];
        x[o + i] = x1 * c - x2 * s;
        x[o + i + half] = x2 * c + x1 * s;
      }
    }
  }
}

const sigmoid = (z: number) => 1 / (1 + Math.exp(-z));
const silu = (z: number) => z * sigmoid(z);

/**
 * transformers' Qwen3_5GatedDeltaNet on the normalised input h [T, d], written out step by step: the causal conv
 * over q|k|v (zeros before the sequence) and SiLU, L2-normalised q (then · 1/√dk) and k, and per value head the
 * recurrence S ← αS; δ = β(v − Sᵀk); S ← S + kδᵀ; o = Sᵀq, then the gated RMSNorm (plain w) and out_proj.
 */
function referenceDeltaNet(
  c: DecoderConfig,
  g: (n: string) => Float64Array | undefined,
  p: string,
  h: Float64Array,
  T: number,
): Float64Array {
  const { keyHeads: nk, valueHeads: nv, keyDim: dk, valueDim: dv, convKernel: K } = c.deltaNet!;
  const C = 2 * nk * dk + nv * dv;
  const mixed = linear(h, T, g(`${p}in_proj_qkv.weight`)!, C);
  const cw = g(`${p}conv1d.weight`)!;
  const conv = new Float64Array(T * C);
  for (let t = 0; t < T; t++) {
    for (let ch = 0; ch < C; ch++) {
      let s = 0;
      for (let j = 0; j < K; j++) {
        const u = t - (K - 1) + j;
        if (u >= 0) s += cw[ch * K + j] * mixed[u * C + ch];
      }
      conv[t * C + ch] = silu(s);
    }
  }
  const l2 = (off: number, n: number, scale: number) => {
    let ss = 0;
    for (let i = 0; i < n; i++) ss += conv[off + i] ** 2;
    const inv = scale / Math.sqrt(ss + 1e-6);
    return Array.from({ length: n }, (_, i) => conv[off + i] * inv);
  };
  const z = linear(h, T, g(`${p}in_proj_z.weight`)!, nv * dv);
  const b = linear(h, T, g(`${p}in_proj_b.weight`)!, nv);
  const a = linear(h, T, g(`${p}in_proj_a.weight`)!, nv);
  const [aLog, dtBias, nw] = [g(`${p}A_log`)!, g(`${p}dt_bias`)!, g(`${p}norm.weight`)!];
  const y = new Float64Array(T * nv * dv);
  for (let hv = 0; hv < nv; hv++) {
    const hk = Math.floor(hv / (nv / nk));
    const S = new Float64Array(dk * dv);
    for (let t = 0; t < T; t++) {
      const q = l2(t * C + hk * dk, dk, 1 / Math.sqrt(dk));
      const k = l2(t * C + nk * dk + hk * dk, dk, 1);
      const v = conv.subarray(t * C + 2 * nk * dk + hv * dv, t * C + 2 * nk * dk + (hv + 1) * dv);
      const sp = (x: number) => (x > 20 ? x : Math.log1p(Math.exp(x)));
      const alpha = Math.exp(-Math.exp(aLog[hv]) * sp(a[t * nv + hv] + dtBias[hv]));
      const beta = sigmoid(b[t * nv + hv]);
      for (let i = 0; i < S.length; i++) S[i] *= alpha;
      for (let j = 0; j < dv; j++) {
        let m = 0;
        for (let i = 0; i < dk; i++) m += S[i * dv + j] * k[i];
        const delta = beta * (v[j] - m);
        for (let i = 0; i < dk; i++) S[i * dv + j] += k[i] * delta;
      }
      const o = Array.from({ length: dv }, (_, j) => q.reduce((s, qi, i) => s + S[i * dv + j] * qi, 0));
      const inv = 1 / Math.sqrt(o.reduce((s, x) => s + x * x, 0) / dv + c.rmsEps);
      for (let j = 0; j < dv; j++) y[(t * nv + hv) * dv + j] = o[j] * inv * nw[j] * silu(z[(t * nv + hv) * dv + j]);
    }
  }
  return linear(y, T, g(`${p}out_proj.weight`)!, c.hidden);
}

/** Hidden states (post final norm) and logits of every position for input embeddings x0 [T, d]. */
export function referenceForward(c: DecoderConfig, w: W, x0: Float64Array, positions?: number[]) {
  const { hidden: d, heads: Hq, kvHeads: Hkv, headDim: D, rmsEps: eps } = c;
  const T = x0.length / d;
  const pos = positions ?? Array.from({ length: T }, (_, t) => t);
  const invGlobal = ropeInvFreq(c.rope);
  const invLocal = c.ropeLocal ? ropeInvFreq(c.ropeLocal) : invGlobal;
  const g = (n: string) => w.get(n)?.values;
  const off = c.normOffset;
  let x: Float64Array = Float64Array.from(x0);
  for (let l = 0; l < c.layers; l++) {
    const p = `model.layers.${l}.`;
    const a = `${p}self_attn.`;
    const h = rmsNorm(x, T, d, g(`${p}input_layernorm.weight`)!, eps, off);
    if (c.linearLayers[l]) {
      const mix = referenceDeltaNet(c, g, `${p}linear_attn.`, h, T);
      for (let i = 0; i < x.length; i++) x[i] += mix[i];
      x = mlpResidual(c, g, p, x, T);
      continue;
    }
    let q: Float64Array;
    let outGate: Float64Array | null = null;
    if (c.attnOutputGate) {
      // q_proj's rows: per head the query (D) then the gate (D)
      const qg = linear(h, T, g(`${a}q_proj.weight`)!, 2 * Hq * D);
      q = new Float64Array(T * Hq * D);
      outGate = new Float64Array(T * Hq * D);
      for (let r = 0; r < T * Hq; r++) {
        q.set(qg.subarray(r * 2 * D, r * 2 * D + D), r * D);
        outGate.set(qg.subarray(r * 2 * D + D, (r + 1) * 2 * D), r * D);
      }
    } else q = linear(h, T, g(`${a}q_proj.weight`)!, Hq * D, g(`${a}q_proj.bias`));
    let k = linear(h, T, g(`${a}k_proj.weight`)!, Hkv * D, g(`${a}k_proj.bias`));
    const v = linear(h, T, g(`${a}v_proj.weight`)!, Hkv * D, g(`${a}v_proj.bias`));
    if (c.qkNorm) {
      q = rmsNorm(q, T * Hq, D, g(`${a}q_norm.weight`)!, eps, off);
      k = rmsNorm(k, T * Hkv, D, g(`${a}k_norm.weight`)!, eps, off);
    }
    const window = layerWindow(c, l) ?? Infinity;
    // Gemma 3's sliding layers rotate with their own (local) base
    const inv = window !== Infinity ? invLocal : invGlobal;
    rope(q, T, Hq, D, pos, inv);
    rope(k, T, Hkv, D, pos, inv);
    const scale = c.attnScale ?? 1 / Math.sqrt(D);
    const o = new Float64Array(T * Hq * D);
    const rep = Hq / Hkv;
    for (let t = 0; t < T; t++) {
      for (let hq = 0; hq < Hq; hq++) {
        const hk = Math.floor(hq / rep); // repeat_kv: query head h reads kv head h // n_rep
        const js = [...Array(t + 1).keys()].filter((j) => t - j < window);
        const sc = js.map((j) => {
          let s = 0;
          for (let i = 0; i < D; i++) s += q[(t * Hq + hq) * D + i] * k[(j * Hkv + hk) * D + i];
          return s * scale;
        });
        const m = Math.max(...sc);
        const e = sc.map((s) => Math.exp(s - m));
        const z = e.reduce((u, b) => u + b, 0);
        js.forEach((j, n) => {
          for (let i = 0; i < D; i++) o[(t * Hq + hq) * D + i] += (e[n] / z) * v[(j * Hkv + hk) * D + i];
        });
      }
    }
    if (outGate) for (let i = 0; i < o.length; i++) o[i] *= sigmoid(outGate[i]);
    let att = linear(o, T, g(`${a}o_proj.weight`)!, d, g(`${a}o_proj.bias`));
    // Gemma: post_attention_layernorm on the attention output, pre/post_feedforward_layernorm around the MLP
    if (c.sandwichNorms) att = rmsNorm(att, T, d, g(`${p}post_attention_layernorm.weight`)!, eps, off);
    for (let i = 0; i < x.length; i++) x[i] += att[i];
    x = mlpResidual(c, g, p, x, T);
  }
  const hidden = rmsNorm(x, T, d, g('model.norm.weight')!, eps, off);
  const head = c.tieEmbeddings ? g('model.embed_tokens.weight')! : g('lm_head.weight')!;
  let logits = linear(hidden, T, head, c.vocabSize);
  const cap = c.finalSoftcap;
  if (cap !== null) logits = logits.map((z) => cap * Math.tanh(z / cap));
  return { hidden, logits };
}

/** x + MLP(norm(x)) of layer prefix `p` (Gemma: the MLP wrapped in its two norms). */
function mlpResidual(c: DecoderConfig, g: (n: string) => Float64Array | undefined, p: string, x: Float64Array, T: number): Float64Array {
  const { hidden: d, intermediate: I, rmsEps: eps, normOffset: off } = c;
  const h2 = rmsNorm(
    x,
    T,
    d,
    g(c.sandwichNorms ? `${p}pre_feedforward_layernorm.weight` : `${p}post_attention_layernorm.weight`)!,
    eps,
    off,
  );
  const gate = linear(h2, T, g(`${p}mlp.gate_proj.weight`)!, I);
  const up = linear(h2, T, g(`${p}mlp.up_proj.weight`)!, I);
  const act = gate.map((z, i) => (c.mlpAct === 'silu' ? silu(z) : geluTanh(z)) * up[i]);
  let mlp = linear(act, T, g(`${p}mlp.down_proj.weight`)!, d);
  if (c.sandwichNorms) mlp = rmsNorm(mlp, T, d, g(`${p}post_feedforward_layernorm.weight`)!, eps, off);
  return x.map((z, i) => z + mlp[i]);
}

/**
 * Rows `ids` of the embedding table, f64; with an embedScale (Gemma) times the scale rounded to f32, the product
 * unrounded: Decoder.embed's f32 rule, exact on the f64 backend.
 */
export function referenceEmbed(c: DecoderConfig, w: W, ids: number[]): Float64Array {
  const e = w.get('model.embed_tokens.weight')!.values;
  const out = new Float64Array(ids.length * c.hidden);
  ids.forEach((id, t) => out.set(e.subarray(id * c.hidden, (id + 1) * c.hidden), t * c.hidden));
  if (c.embedScale === null) return out;
  const s = Math.fround(c.embedScale);
  return out.map((v) => v * s);
}

/** Greedy decoding without a cache: the whole sequence again at every step, argmax of the last row. */
export async function uncachedGreedy(model: Decoder, prompt: number[], n: number): Promise<number[]> {
  const seq = [...prompt];
  for (let i = 0; i < n; i++) {
    const id = tidy(() => {
      const out = model.forward({ inputIds: model.backend.fromValues(seq, [seq.length], 'i32'), logits: 'last' });
      return F.argmax(out.logits!);
    });
    seq.push((await id.readI32())[0]);
    id.dispose();
  }
  return seq.slice(prompt.length);
}

/** max |a − b| / max |b|: the error measure the tests quote (robust to entries that cancel to ~0). */
export function scaledError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let peak = 0;
  let diff = 0;
  for (let i = 0; i < b.length; i++) {
    peak = Math.max(peak, Math.abs(b[i]));
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
  }
  return a.length !== b.length || Number.isNaN(diff) ? Infinity : diff / peak;
}

/**
 * The GGUF metadata llama.cpp's convert_hf_to_gguf.py writes for a decoder config (architecture `arch`: the family,
 * or qwen35 for Qwen3.5), from its set_gguf_parameters: LlamaModel's keys for llama/qwen2/qwen3/mistral, Gemma3Model's
 * (no rope.dimension_count; the local rope base; the window but not its pattern), Qwen3NextModel's ssm.* keys and
 * the Qwen3.5 mixins' default rope.dimension_sections.
 */
export function ggufMetadata(c: DecoderConfig, arch: string = c.family === 'qwen3_5' ? 'qwen35' : c.family): GgufKv[] {
  const u32 = (k: string, value: number): GgufKv => ({ key: `${arch}.${k}`, type: 'u32', value });
  const f32 = (k: string, value: number): GgufKv => ({ key: `${arch}.${k}`, type: 'f32', value });
  const kv: GgufKv[] = [
    { key: 'general.architecture', type: 'str', value: arch },
    u32('context_length', c.maxPositions), u32('embedding_length', c.hidden), u32('block_count', c.layers),
    u32('feed_forward_length', c.intermediate), u32('attention.head_count', c.heads), u32('attention.head_count_kv', c.kvHeads),
    u32('attention.key_length', c.headDim), u32('attention.value_length', c.headDim),
    f32('rope.freq_base', c.rope.theta), f32('attention.layer_norm_rms_epsilon', c.rmsEps),
  ];
  if (c.family === 'gemma3') {
    const s = c.rope.scaling;
    if (s && (s.rope_type ?? s.type) === 'linear')
      kv.push({ key: `${arch}.rope.scaling.type`, type: 'str', value: 'linear' }, f32('rope.scaling.factor', s.factor!));
    if (c.ropeLocal) kv.push(f32('rope.freq_base_swa', c.ropeLocal.theta));
    if (c.slidingWindow !== null && c.windowLayers.some(Boolean)) kv.push(u32('attention.sliding_window', c.slidingWindow));
    if (c.finalSoftcap !== null) kv.push(f32('final_logit_softcapping', c.finalSoftcap));
  } else if (c.family === 'qwen3_5') {
    const d = c.deltaNet!;
    kv.push(
      u32('ssm.conv_kernel', d.convKernel), u32('ssm.state_size', d.keyDim), u32('ssm.group_count', d.keyHeads),
      u32('ssm.time_step_rank', d.valueHeads), u32('ssm.inner_size', d.valueDim * d.valueHeads),
      u32('full_attention_interval', c.linearLayers.indexOf(false) + 1 || 4),
      u32('rope.dimension_count', Math.trunc(c.headDim * (c.rope.partialRotaryFactor ?? 0.25))),
      { key: `${arch}.rope.dimension_sections`, type: 'arr_i32', value: [11, 11, 10, 0] },
    );
  } else {
    kv.push(u32('rope.dimension_count', c.headDim));
  }
  kv.push({ key: 'tokenizer.ggml.tokens', type: 'arr_str', value: Array.from({ length: c.vocabSize }, (_, i) => `t${i}`) });
  if (c.bosTokenId !== null) kv.push({ key: 'tokenizer.ggml.bos_token_id', type: 'u32', value: c.bosTokenId });
  if (c.eosTokenIds.length) kv.push({ key: 'tokenizer.ggml.eos_token_id', type: 'u32', value: c.eosTokenIds[0] });
  return kv;
}
