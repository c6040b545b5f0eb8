/**
 * Model-level benchmarks: prefill and decode tokens/s of a tiny model, and one decode step of layers at realistic
 * widths with q4_0 projections, read as ms per layer and achieved GB/s: Qwen3-1.7B's layer (hidden 2048, 16 heads,
 * 8 KV heads, head_dim 128, intermediate 6144), a Gemma 3 4B layer, and a Qwen3.5-4B layer pair (one Gated DeltaNet,
 * one gated attention layer).
 *
 * Weights are random, built in memory and loaded through loadDecoderWeights (so q4_0 comes from the real
 * quantize-on-load path); no files are read, so the same cases run on the bench page. Timing does not
 * depend on the values.
 *
 * Accounting: `flops` is 2 × (projection params) × tokens + attention (QKᵀ and PV, 4·Hq·D per cached
 * position per token) or a DeltaNet's conv (2·K per channel) and delta rule (8·dk·dv per value head per token:
 * decay, Sᵀk, update, Sᵀq) + the LM head for the logits rows; `bytes` is the minimum traffic of one iteration:
 * every layer weight and norm once, the LM head when logits are taken, the embedding rows gathered, the KV cache
 * rows attention reads (plus the rows written), and a DeltaNet's state read and written once (f32). Activations
 * are left out (negligible at T ≤ 32).
 */
import { F } from '../autograd';
import { byteSize, type QuantDType } from '../formats/dtype';
import type { StTensor } from '../formats/safetensors';
import type { Backend } from '../tensor/backend';
import { tidy } from '../tensor/scope';
import { Tensor } from '../tensor/tensor';
import type { BenchCase, BenchRun, BenchSize } from '../kernels/workbench/bench';
import { Rng } from '../util/rng';
import { type DecoderConfig, convChannels, layerWindow, parseDecoderConfig } from './config';
import { Decoder, KVCache } from './decoder';
import { type DecoderWeights, type WeightSource, isDeltaNetLayer, loadDecoderWeights, weightSpecs } from './weights';
import { bf16Tensor } from '../testing/model';

/**
 * A bf16 checkpoint of random weights for `c`, generated tensor by tensor as the loader asks for it (the
 * realistic-width layer is ~50 M values; holding them all as f64 first would cost 400 MB).
 */
export function randomSource(c: DecoderConfig, seed: number): WeightSource {
  const specs = new Map(weightSpecs(c).map((s, i) => [s.name, { ...s, seed: seed * 1000 + i }]));
  return {
    name: `random ${c.family} (hidden ${c.hidden}, ${c.layers} layer(s))`,
    has: (n) => specs.has(n),
    read: async (n): Promise<StTensor> => {
      const s = specs.get(n)!;
      const rng = new Rng(s.seed);
      const count = s.shape.reduce((a, b) => a * b, 1);
      // as tinyTensors: norms near 1, projections scaled by 1/√fan_in so activations stay O(1)
      const std = s.kind === 'norm' ? 0.2 : s.kind === 'bias' ? 0.1 : s.kind === 'embed' ? 1 : 1 / Math.sqrt(s.shape[1]);
      const base = s.kind === 'norm' ? 1 : 0;
      const v = new Float32Array(count);
      for (let i = 0; i < count; i++) v[i] = base + std * rng.normal();
      return bf16Tensor(s.shape, v);
    },
  };
}

export async function randomDecoder(c: DecoderConfig, backend: Backend, quantize: QuantDType | null): Promise<Decoder> {
  const w = await loadDecoderWeights(c, randomSource(c, 1), backend, { quantize });
  return new Decoder(c, w);
}

const bytesOf = (t: Tensor | null) => (t ? byteSize(t.dtype, t.shape) : 0);

/** FLOPs and minimum bytes of one forward of T tokens after `past` cached ones, with `logitsRows` rows projected. */
export function forwardCost(c: DecoderConfig, w: DecoderWeights, o: { T: number; past: number; logitsRows: number; ids: boolean }) {
  const { T, past, logitsRows } = o;
  const { hidden: d, heads: Hq, kvHeads: Hkv, headDim: D, intermediate: I } = c;
  // with Qwen3.5's output gate q_proj is twice as tall
  const projParams = d * (Hq * D * (c.attnOutputGate ? 2 : 1) + 2 * Hkv * D) + Hq * D * d + 3 * d * I;
  // token t (0-based in the chunk) attends to past + t + 1 positions: Σ = T·past + T(T+1)/2
  const attended = T * past + (T * (T + 1)) / 2;
  const window = (l: number) => layerWindow(c, l) !== null;
  let flops = 0;
  let bytes = 0;
  for (let l = 0; l < c.layers; l++) {
    const L = w.layers[l];
    if (isDeltaNetLayer(L)) {
      const n = c.deltaNet!;
      const C = convChannels(n);
      const vDim = n.valueHeads * n.valueDim;
      const params = d * (C + vDim + 2 * n.valueHeads) + vDim * d + 3 * d * I;
      flops += 2 * params * T + 2 * n.convKernel * C * T + 8 * n.valueHeads * n.keyDim * n.valueDim * T;
      bytes += [...Object.values(L), ...Object.values(L.deltaNet)].reduce((s, t) => s + (t instanceof Tensor ? bytesOf(t) : 0), 0);
      bytes += 2 * 4 * n.valueHeads * n.keyDim * n.valueDim;
      continue;
    }
    flops += 2 * projParams * T + 4 * Hq * D * (window(l) ? Math.min(attended, T * c.slidingWindow!) : attended);
    bytes += Object.values(L).reduce((s, t) => s + bytesOf(t as Tensor | null), 0);
    // k and v: the rows attention reads once, and the T rows appended (f32 cache)
    bytes += 2 * 4 * Hkv * D * (past + T + T);
  }
  bytes += bytesOf(w.norm);
  if (o.ids) bytes += T * byteSize(w.embed.dtype, [d]);
  if (logitsRows) {
    flops += 2 * c.vocabSize * d * logitsRows;
    bytes += bytesOf(w.lmHead);
  }
  return { flops, bytes };
}

// ---- tiny model: tokens/s of prefill and of one decode step, as generate() runs them ----

const PROMPT = 32;
/**
 * models/tiny/qwen3-tiny/config.json, copied: the cases also run on the bench page, which reads no files, and the
 * library imports nothing from models/ (src/model/config.test.ts checks that the copy still equals the file).
 */
export const TINY_QWEN3_CONFIG = {
  architectures: ['Qwen3ForCausalLM'], attention_bias: false, attention_dropout: 0, bos_token_id: 456, eos_token_id: 458,
  head_dim: 16, hidden_act: 'silu', hidden_size: 48, initializer_range: 0.02, intermediate_size: 128,
  max_position_embeddings: 512, max_window_layers: 2, model_type: 'qwen3', num_attention_heads: 4, num_hidden_layers: 2,
  num_key_value_heads: 2, rms_norm_eps: 0.000001, rope_scaling: null, rope_theta: 1000000, sliding_window: null,
  tie_word_embeddings: true, torch_dtype: 'bfloat16', transformers_version: '4.51.0', use_cache: true,
  use_sliding_window: false, vocab_size: 461,
};
export const tinyModelConfig = () => parseDecoderConfig(TINY_QWEN3_CONFIG, 'models/tiny/qwen3-tiny/config.json');

async function tinyPrefill(backend: Backend): Promise<BenchRun> {
  const c = tinyModelConfig();
  const model = await randomDecoder(c, backend, null);
  const rng = new Rng(3);
  const ids = backend.fromValues(Array.from({ length: PROMPT }, () => rng.int(c.vocabSize)), [PROMPT], 'i32');
  const cache = model.newCache(PROMPT);
  return {
    // as generate's prefill: the prompt into an empty cache, logits of the last row, the next id picked
    run: () => {
      cache.reset();
      tidy(() => F.argmax(model.forward({ inputIds: ids, cache, logits: 'last' }).logits!)).dispose();
    },
    ...forwardCost(c, model.weights, { T: PROMPT, past: 0, logitsRows: 1, ids: true }),
    tokens: PROMPT,
    dispose: () => (ids.dispose(), cache.dispose(), model.dispose()),
  };
}

async function tinyDecodeStep(backend: Backend): Promise<BenchRun> {
  const c = tinyModelConfig();
  const model = await randomDecoder(c, backend, null);
  const rng = new Rng(4);
  const prompt = backend.fromValues(Array.from({ length: PROMPT }, () => rng.int(c.vocabSize)), [PROMPT], 'i32');
  const cache = model.newCache(PROMPT + 1);
  // a real prefill fills the cache, so every timed step attends to the same 32 meaningful positions
  tidy(() => model.forward({ inputIds: prompt, cache }).hidden).dispose();
  const id = backend.fromValues([rng.int(c.vocabSize)], [1], 'i32');
  return {
    // rewinding the length each iteration overwrites the same row: the cache never overflows, whatever
    // the harness's iteration count
    run: () => {
      cache.length = PROMPT;
      tidy(() => F.argmax(model.forward({ inputIds: id, cache, logits: 'last' }).logits!)).dispose();
    },
    ...forwardCost(c, model.weights, { T: 1, past: PROMPT, logitsRows: 1, ids: true }),
    tokens: 1,
    dispose: () => (prompt.dispose(), id.dispose(), cache.dispose(), model.dispose()),
  };
}

// ---- one realistic-width q4_0 layer, one decode step against a filled KV cache ----

/** Qwen3-1.7B's layer shape; a small vocab so that the (untouched) embedding table costs little memory. */
export function wideLayerConfig(size: BenchSize): DecoderConfig {
  const full = size === 'full';
  return parseDecoderConfig({
    model_type: 'qwen3', vocab_size: full ? 1024 : 64, hidden_size: full ? 2048 : 256, num_hidden_layers: 1,
    num_attention_heads: full ? 16 : 4, num_key_value_heads: full ? 8 : 2, head_dim: full ? 128 : 64,
    intermediate_size: full ? 6144 : 768, rms_norm_eps: 1e-6, max_position_embeddings: 40960, rope_theta: 1000000,
    tie_word_embeddings: true,
  }, 'wide layer config');
}

async function wideLayerDecode(backend: Backend, size: BenchSize): Promise<BenchRun> {
  const c = wideLayerConfig(size);
  const past = size === 'full' ? 512 : 64;
  const model = await randomDecoder(c, backend, 'q4_0');
  const rng = new Rng(5);
  // random k/v stand in for a prefilled context: attention's cost does not depend on what the rows hold
  const kv = () => [backend.fromValues(rng.normals((past + 1) * c.kvHeads * c.headDim), [past + 1, c.kvHeads, c.headDim])];
  const cache = new KVCache(kv(), kv(), past + 1);
  const x = backend.fromValues(rng.normals(c.hidden), [1, c.hidden]);
  return {
    // embeddings in, hidden out (the final norm is the only non-layer work, d values): one layer's decode step
    run: () => {
      cache.length = past;
      model.forward({ inputsEmbeds: x, cache }).hidden.dispose();
    },
    ...forwardCost(c, model.weights, { T: 1, past, logitsRows: 0, ids: false }),
    dispose: () => (x.dispose(), cache.dispose(), model.dispose()),
  };
}

// ---- Gemma 3 and Qwen3.5 layers at the 4B widths (sequential_scaled's planner and solver), one decode step ----

/** gemma-3-4b-it's layer (a global one: every 6th); hidden 2560, 8 heads, 4 KV heads, head_dim 256, GeGLU 10240. */
export function gemma3LayerConfig(size: BenchSize): DecoderConfig {
  const full = size === 'full';
  return parseDecoderConfig({
    model_type: 'gemma3_text', vocab_size: full ? 1024 : 64, hidden_size: full ? 2560 : 256, num_hidden_layers: 1,
    num_attention_heads: full ? 8 : 4, num_key_value_heads: full ? 4 : 2, head_dim: full ? 256 : 64,
    intermediate_size: full ? 10240 : 1024, query_pre_attn_scalar: full ? 256 : 64, sliding_window_pattern: 1,
    rope_theta: 1000000, rope_local_base_freq: 10000, max_position_embeddings: 131072,
  }, 'gemma3 layer config');
}

/**
 * Qwen3.5-4B's layer pair: a Gated DeltaNet (16 key heads, 32 value heads, 128 × 128, conv 4) then a gated attention
 * layer (16 heads, 4 KV heads, head_dim 256, a quarter rotated); hidden 2560, intermediate 9216.
 */
export function qwen35PairConfig(size: BenchSize): DecoderConfig {
  const full = size === 'full';
  return parseDecoderConfig({
    model_type: 'qwen3_5_text', vocab_size: full ? 1024 : 64, hidden_size: full ? 2560 : 256, num_hidden_layers: 2,
    layer_types: ['linear_attention', 'full_attention'], num_attention_heads: full ? 16 : 4, num_key_value_heads: full ? 4 : 2,
    head_dim: full ? 256 : 64, intermediate_size: full ? 9216 : 768, linear_num_key_heads: full ? 16 : 2,
    linear_num_value_heads: full ? 32 : 4, linear_key_head_dim: full ? 128 : 32, linear_value_head_dim: full ? 128 : 32,
    linear_conv_kernel_dim: 4, rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25 },
    tie_word_embeddings: true,
  }, 'qwen3_5 layer pair config');
}

/**
 * One decode step of `c`'s layers (q4_0) after `past` positions: random k/v rows for the attention layers and random
 * DeltaNet states stand in for a prefill (the cost does not depend on what they hold).
 */
async function layersDecode(backend: Backend, size: BenchSize, c: DecoderConfig, fused = true): Promise<BenchRun> {
  const past = size === 'full' ? 512 : 64;
  const model = await randomDecoder(c, backend, 'q4_0');
  // the fused path is the default on WebGPU; the plain variant shows what it saves
  if (!fused) model.fusedSteps = false;
  const rng = new Rng(6);
  const kv = () => Array.from({ length: c.layers }, (_, l) => (c.linearLayers[l] ? null
    : backend.fromValues(rng.normals((past + 1) * c.kvHeads * c.headDim), [past + 1, c.kvHeads, c.headDim])));
  const cache = new KVCache(kv(), kv(), past + 1);
  const states = () => {
    const n = c.deltaNet;
    if (!n) return;
    for (let l = 0; l < c.layers; l++) {
      if (!c.linearLayers[l]) continue;
      const C = convChannels(n);
      cache.setStates(l, backend.fromValues(rng.normals((n.convKernel - 1) * C), [n.convKernel - 1, C]),
        backend.fromValues(rng.normals(n.valueHeads * n.keyDim * n.valueDim, 0.1), [n.valueHeads, n.keyDim, n.valueDim]));
    }
  };
  states();
  const x = backend.fromValues(rng.normals(c.hidden), [1, c.hidden]);
  return {
    // the same position every iteration: the k/v row is overwritten, the DeltaNet states go on from the last step's
    // (a rewind the decoder refuses unless both lengths are set, as here)
    run: () => {
      cache.length = cache.stateLength = past;
      model.forward({ inputsEmbeds: x, cache }).hidden.dispose();
    },
    ...forwardCost(c, model.weights, { T: 1, past, logitsRows: 0, ids: false }),
    dispose: () => (x.dispose(), cache.dispose(), model.dispose()),
  };
}

/**
 * sequential_light's three backbones at their real widths, 2 of their layers (the table's dispatches and weight
 * bytes per iteration are per token for 2 layers): Qwen3-1.7B (planner), Llama-3.2-1B (critic), Qwen2.5-Math-1.5B
 * (solver); tiny: the same head layouts at a quarter of the width.
 */
export function sequentialLightLayers(role: 'planner' | 'critic' | 'solver', size: BenchSize): DecoderConfig {
  const q = size === 'full' ? 1 : 4;
  const shapes = {
    planner: {
      model_type: 'qwen3',
      hidden_size: 2048,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      intermediate_size: 6144,
      rope_theta: 1000000,
    },
    critic: {
      model_type: 'llama',
      hidden_size: 2048,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      head_dim: 64,
      intermediate_size: 8192,
      rope_theta: 500000,
    },
    solver: {
      model_type: 'qwen2',
      hidden_size: 1536,
      num_attention_heads: 12,
      num_key_value_heads: 2,
      head_dim: 128,
      intermediate_size: 8960,
      rope_theta: 10000,
    },
  }[role];
  return parseDecoderConfig(
    {
      ...shapes,
      hidden_size: shapes.hidden_size / q,
      num_attention_heads: shapes.num_attention_heads / q,
      num_key_value_heads: Math.max(1, shapes.num_key_value_heads / q),
      intermediate_size: shapes.intermediate_size / q,
      vocab_size: size === 'full' ? 1024 : 64,
      num_hidden_layers: 2,
      rms_norm_eps: 1e-6,
      max_position_embeddings: 4096,
      tie_word_embeddings: true,
    },
    `sequential_light ${role} layers`,
  );
}

/**
 * One batched decode step (Decoder.stepBatch) of `rows` sequences through 2 layers of sequential_light's planner
 * width, each sequence `past` positions in: tokens/s counts every row's token, so batch 1, 4 and 16 compare directly.
 */
async function layersDecodeBatch(backend: Backend, size: BenchSize, rows: number): Promise<BenchRun> {
  const c = sequentialLightLayers('planner', size);
  const past = size === 'full' ? 512 : 64;
  const model = await randomDecoder(c, backend, 'q4_0');
  const rng = new Rng(7);
  const cache = model.newBatchCache(rows, past + 1);
  // random k/v rows stand in for prefilled contexts: every sequence is `past` positions in
  for (const k of [...cache.k, ...cache.v])
    if (k) tidy(() => F.kvAppend(k, backend.fromValues(rng.normals(k.shape[0] * c.kvHeads * c.headDim), k.shape), 0));
  const x = backend.fromValues(rng.normals(rows * c.hidden), [rows, c.hidden]);
  return {
    run: () => {
      cache.lengths.fill(past);
      model.stepBatch({ inputsEmbeds: x, cache }).hidden.dispose();
    },
    ...forwardCost(c, model.weights, { T: 1, past, logitsRows: 0, ids: false }),
    tokens: rows,
    dispose: () => (x.dispose(), cache.dispose(), model.dispose()),
  };
}

export const benches: BenchCase[] = [
  { name: `tiny model prefill (qwen3-tiny, ${PROMPT} tokens)`, setup: (b) => tinyPrefill(b) },
  { name: 'tiny model decode step (qwen3-tiny)', setup: (b) => tinyDecodeStep(b) },
  { name: 'decode layer hidden 2048 q4_0 (one layer, KV 512; tiny hidden 256, KV 64)', setup: (b, s) => wideLayerDecode(b, s) },
  {
    name: 'decode Gemma 3 4B layer q4_0 (global, KV 512; tiny hidden 256, KV 64)',
    setup: (b, s) => layersDecode(b, s, gemma3LayerConfig(s)),
  },
  ...(['planner', 'critic', 'solver'] as const).map((role): BenchCase => ({
    name: `decode 2 layers of sequential_light's ${role} (${{ planner: 'Qwen3-1.7B', critic: 'Llama-3.2-1B', solver: 'Qwen2.5-Math-1.5B' }[role]} width) q4_0, KV 512 (tiny: ¼ width, KV 64)`,
    setup: (b, s) => layersDecode(b, s, sequentialLightLayers(role, s)),
  })),
  ...[1, 4, 16].map((rows): BenchCase => ({
    name: `decode 2 layers of sequential_light's planner, batch ${rows} (stepBatch; tokens/s over the batch)`,
    setup: (b, s) => layersDecodeBatch(b, s, rows),
  })),
  {
    name: "decode 2 layers of sequential_light's planner, plain ops (the unfused path, for the dispatch count it saves)",
    setup: (b, s) => layersDecode(b, s, sequentialLightLayers('planner', s), false),
  },
  {
    name: 'decode Qwen3.5-4B layer pair q4_0 (DeltaNet + gated attention, KV 512; tiny hidden 256, KV 64)',
    setup: (b, s) => layersDecode(b, s, qwen35PairConfig(s)),
  },
];
