/**
 * Decoder weights by Hugging Face names, from any TensorStore (one safetensors file, a sharded checkpoint,
 * or an in-memory file) onto a Backend. Every tensor is frozen (requiresGrad false): the engine
 * backpropagates to its inputs, never into the model.
 *
 * Storage choices:
 * - 2-D projections (q/k/v/o, gate/up/down, an untied lm_head) stay as stored (f32/f16/bf16) or, with
 *   `quantize`, are decoded to f32 and re-encoded as q8_0/q4_0 (ggml's block layout, formats/encode.ts).
 * - The embedding table stays as stored even when quantizing: embed(ids) must return exactly the rows the
 *   checkpoint holds (RecursiveMAS compares latent vectors with them). A tied lm_head reads the table itself, except
 *   with `quantize`, where it gets a quantized copy of it (a float table, hidden a multiple of 32): the head is read
 *   whole every token (at Qwen3-0.6B, 311 MB of bf16 against 247 MB for all the layers in q4_0), so quantizing the
 *   layers alone leaves it most of a token's bytes. The copy costs its own size in memory (87 MB in q4_0 there).
 * - Norm weights stay as stored (rmsNorm reads f16/bf16 directly); biases become f32 (matmul's bias is f32), and
 *   so do the Gated DeltaNet's small parameters (conv1d weights, A_log, dt_bias), which f32 kernels read.
 */
import { CorruptCheckpoint, DTypeMismatch, InvalidArgument, InvalidModelConfig, ShapeMismatch } from '../errors';
import { type DType, type QuantDType, QK, byteSize, isQuant } from '../formats/dtype';
import { decode, encode } from '../formats/encode';
import { type StTensor, type StorageTensor, toStorage } from '../formats/safetensors';
import type { Backend } from '../tensor/backend';
import type { Tensor } from '../tensor/tensor';
import { type DecoderConfig, convChannels } from './config';
import { layoutSource } from './layout';

/** What loading needs from a checkpoint (TensorStore satisfies it). */
export interface WeightSource {
  /** The file or folder, for error messages. */
  readonly name: string;
  has(name: string): boolean;
  read(name: string): Promise<StTensor>;
  /**
   * Optional: the tensor already in a storage dtype. Sources whose tensors safetensors dtypes cannot
   * express (GGUF's q8_0/q4_0 blocks) implement it; the loader prefers it over `read`.
   */
  readStorage?(name: string): Promise<StorageTensor>;
}

export interface LoadOptions {
  /** Quantize the 2-D projection weights on load; null/undefined keeps them as stored. */
  quantize?: QuantDType | null;
}

export interface LayerWeights {
  inputNorm: Tensor;
  q: Tensor;
  k: Tensor;
  v: Tensor;
  o: Tensor;
  qBias: Tensor | null;
  kBias: Tensor | null;
  vBias: Tensor | null;
  oBias: Tensor | null;
  qNorm: Tensor | null;
  kNorm: Tensor | null;
  /** post_attention_layernorm: the MLP's input norm, or with sandwich norms (Gemma) the attention output's. */
  postNorm: Tensor;
  /** Gemma's pre_feedforward_layernorm and post_feedforward_layernorm (sandwich norms), else null. */
  preFfnNorm: Tensor | null;
  postFfnNorm: Tensor | null;
  gate: Tensor;
  up: Tensor;
  down: Tensor;
  gateBias: Tensor | null;
  upBias: Tensor | null;
  downBias: Tensor | null;
}

/** A Gated DeltaNet's weights (Qwen3.5's linear_attn.*, named as released). */
export interface DeltaNetWeights {
  /** in_proj_qkv [convChannels, hidden]: q | k | v, head-major. */
  qkv: Tensor;
  /** in_proj_z [valueHeads·valueDim, hidden]: the output gate. */
  z: Tensor;
  /** in_proj_b [valueHeads, hidden]: β = sigmoid(b). */
  b: Tensor;
  /** in_proj_a [valueHeads, hidden]: the decay's input. */
  a: Tensor;
  /** conv1d.weight [convChannels, 1, kernel], f32. */
  conv: Tensor;
  /** A_log [valueHeads], f32: the decay g = −exp(A_log)·softplus(a + dt_bias). */
  aLog: Tensor;
  /** dt_bias [valueHeads], f32. */
  dtBias: Tensor;
  /** norm.weight [valueDim]: the gated RMSNorm's plain weight (no 1 +). */
  norm: Tensor;
  /** out_proj [hidden, valueHeads·valueDim]. */
  out: Tensor;
}

/** The parts every layer has: its norms and the MLP. */
export type MlpWeights = Pick<
  LayerWeights,
  'inputNorm' | 'postNorm' | 'preFfnNorm' | 'postFfnNorm' | 'gate' | 'up' | 'down' | 'gateBias' | 'upBias' | 'downBias'
>;

/** A Qwen3.5 linear layer: its norms and MLP around a Gated DeltaNet instead of attention. */
export type DeltaNetLayerWeights = MlpWeights & { deltaNet: DeltaNetWeights };

/**
 * One decoder layer: attention (q_proj is [query | gate] per head with Qwen3.5's output gate) or, for Qwen3.5's
 * linear layers, a Gated DeltaNet.
 */
export type DecoderLayerWeights = LayerWeights | DeltaNetLayerWeights;

export const isDeltaNetLayer = (w: DecoderLayerWeights): w is DeltaNetLayerWeights => 'deltaNet' in w;

/** An attention layer's weights; a Gated DeltaNet layer is refused by name. */
export function attentionLayer(w: DecoderLayerWeights): LayerWeights {
  if (isDeltaNetLayer(w)) throw new InvalidArgument('this is a Gated DeltaNet layer: it has no attention weights (q, k, v, o)');
  return w;
}

export interface DecoderWeights {
  backend: Backend;
  embed: Tensor;
  layers: DecoderLayerWeights[];
  norm: Tensor;
  /** The output projection [vocab, hidden]; the embedding table itself when embeddings are tied. */
  lmHead: Tensor;
  /** Bytes held on the backend per storage dtype (a tied lm_head is counted once). */
  bytes: Partial<Record<DType, number>>;
  totalBytes: number;
  dispose(): void;
}

type Kind = 'proj' | 'norm' | 'bias' | 'embed';

interface Spec {
  name: string;
  shape: number[];
  kind: Kind;
}

/** An attention block's tensors under prefix `a` (`model.layers.{i}.self_attn.`). */
function attentionSpecs(c: DecoderConfig, a: string): Spec[] {
  const { hidden: d, heads, kvHeads, headDim: D } = c;
  // with Qwen3.5's output gate, q_proj yields each head's query and then its gate
  const qRows = heads * D * (c.attnOutputGate ? 2 : 1);
  const specs: Spec[] = [
    { name: `${a}q_proj.weight`, shape: [qRows, d], kind: 'proj' },
    { name: `${a}k_proj.weight`, shape: [kvHeads * D, d], kind: 'proj' },
    { name: `${a}v_proj.weight`, shape: [kvHeads * D, d], kind: 'proj' },
    { name: `${a}o_proj.weight`, shape: [d, heads * D], kind: 'proj' },
  ];
  if (c.qkvBias) {
    specs.push(
      { name: `${a}q_proj.bias`, shape: [qRows], kind: 'bias' },
      { name: `${a}k_proj.bias`, shape: [kvHeads * D], kind: 'bias' },
      { name: `${a}v_proj.bias`, shape: [kvHeads * D], kind: 'bias' },
    );
  }
  if (c.oBias) specs.push({ name: `${a}o_proj.bias`, shape: [d], kind: 'bias' });
  if (c.qkNorm)
    specs.push({ name: `${a}q_norm.weight`, shape: [D], kind: 'norm' }, { name: `${a}k_norm.weight`, shape: [D], kind: 'norm' });
  return specs;
}

/** Every tensor the config implies, with the shape it must have. */
export function weightSpecs(c: DecoderConfig): Spec[] {
  const { hidden: d, intermediate: I, vocabSize: V } = c;
  const specs: Spec[] = [{ name: 'model.embed_tokens.weight', shape: [V, d], kind: 'embed' }];
  const dn = c.deltaNet;
  for (let i = 0; i < c.layers; i++) {
    const p = `model.layers.${i}.`;
    const a = `${p}self_attn.`;
    specs.push({ name: `${p}input_layernorm.weight`, shape: [d], kind: 'norm' });
    if (c.linearLayers[i] && dn) {
      const l = `${p}linear_attn.`;
      const C = convChannels(dn);
      const vDim = dn.valueHeads * dn.valueDim;
      specs.push(
        { name: `${l}in_proj_qkv.weight`, shape: [C, d], kind: 'proj' },
        { name: `${l}in_proj_z.weight`, shape: [vDim, d], kind: 'proj' },
        { name: `${l}in_proj_b.weight`, shape: [dn.valueHeads, d], kind: 'proj' },
        { name: `${l}in_proj_a.weight`, shape: [dn.valueHeads, d], kind: 'proj' },
        { name: `${l}conv1d.weight`, shape: [C, 1, dn.convKernel], kind: 'bias' },
        { name: `${l}A_log`, shape: [dn.valueHeads], kind: 'bias' },
        { name: `${l}dt_bias`, shape: [dn.valueHeads], kind: 'bias' },
        { name: `${l}norm.weight`, shape: [dn.valueDim], kind: 'norm' },
        { name: `${l}out_proj.weight`, shape: [d, vDim], kind: 'proj' },
      );
    } else {
      specs.push(...attentionSpecs(c, a));
    }
    specs.push({ name: `${p}post_attention_layernorm.weight`, shape: [d], kind: 'norm' });
    if (c.sandwichNorms) {
      specs.push(
        { name: `${p}pre_feedforward_layernorm.weight`, shape: [d], kind: 'norm' },
        { name: `${p}post_feedforward_layernorm.weight`, shape: [d], kind: 'norm' },
      );
    }
    specs.push(
      { name: `${p}mlp.gate_proj.weight`, shape: [I, d], kind: 'proj' },
      { name: `${p}mlp.up_proj.weight`, shape: [I, d], kind: 'proj' },
      { name: `${p}mlp.down_proj.weight`, shape: [d, I], kind: 'proj' },
    );
    if (c.mlpBias) {
      specs.push(
        { name: `${p}mlp.gate_proj.bias`, shape: [I], kind: 'bias' },
        { name: `${p}mlp.up_proj.bias`, shape: [I], kind: 'bias' },
        { name: `${p}mlp.down_proj.bias`, shape: [d], kind: 'bias' },
      );
    }
  }
  specs.push({ name: 'model.norm.weight', shape: [d], kind: 'norm' });
  if (!c.tieEmbeddings) specs.push({ name: 'lm_head.weight', shape: [V, d], kind: 'proj' });
  return specs;
}

/**
 * A 2-D float tensor's bytes re-encoded as `q`, a few MB of rows at a time: every quantized row is whole in itself
 * (its blocks, then their scales), and decoding the whole tensor first held it in f32 (622 MB for a 151936-row
 * table at width 1024) beside its source and its result.
 */
function quantizeRows(q: QuantDType, s: StorageTensor): Uint8Array {
  const [rows, cols] = s.shape;
  const [inRow, outRow] = [byteSize(s.dtype, [1, cols]), byteSize(q, [1, cols])];
  const out = new Uint8Array(rows * outRow);
  const step = Math.max(1, Math.floor((1 << 20) / cols));
  for (let r = 0; r < rows; r += step) {
    const n = Math.min(step, rows - r);
    const values = decode(s.dtype, s.bytes.subarray(r * inRow, (r + n) * inRow), [n, cols]);
    out.set(encode(q, values, [n, cols]), r * outRow);
  }
  return out;
}

async function loadOne(src: WeightSource, spec: Spec, backend: Backend, quantize: QuantDType | null): Promise<Tensor> {
  const s = src.readStorage ? await src.readStorage(spec.name) : toStorage(await src.read(spec.name), spec.name, src.name);
  if (s.shape.length !== spec.shape.length || s.shape.some((n, i) => n !== spec.shape[i])) {
    throw new ShapeMismatch(`${src.name}: tensor "${spec.name}" has shape [${s.shape.join(', ')}], but config.json implies ` +
      `[${spec.shape.join(', ')}]; the weights do not belong to this config (check hidden_size, heads, head_dim, vocab_size)`);
  }
  if (s.dtype === 'i32') {
    throw new DTypeMismatch(
      `${src.name}: tensor "${spec.name}" is an integer tensor; model weights must be F32, F16 or BF16 (re-export the checkpoint)`,
    );
  }
  let t: Tensor;
  if ((spec.kind === 'bias' || spec.kind === 'norm') && isQuant(s.dtype)) {
    // a quantized norm or bias (never written by llama.cpp, but legal GGUF): the kernels want floats
    t = backend.fromValues(decode(s.dtype, s.bytes, s.shape), s.shape, 'f32');
  } else if (spec.kind === 'bias' && s.dtype !== 'f32') {
    t = backend.fromValues(decode(s.dtype, s.bytes, s.shape), s.shape, 'f32');
  } else if (spec.kind === 'proj' && quantize && !isQuant(s.dtype)) {
    // already-quantized weights (GGUF) pass through: re-quantizing would add a second rounding
    const cols = spec.shape[1];
    if (cols % QK) {
      throw new InvalidArgument(`${src.name}: cannot quantize "${spec.name}" to ${quantize}: its input dimension ${cols} is not a ` +
        `multiple of ${QK}; load this model without quantization`);
    }
    t = backend.fromBytes(quantizeRows(quantize, s), s.shape, quantize);
  } else {
    t = backend.fromBytes(s.bytes, s.shape, s.dtype);
  }
  t.requiresGrad = false;
  // a GPU backend counts the bytes its kernels bind from weights apart from activations (GpuCounters)
  backend.markWeight?.(t);
  return t;
}

/** Each layer's weights under the Hugging Face names, from a lookup of required (`w`) and optional (`opt`) tensors. */
export function layerWeights(
  config: DecoderConfig,
  w: (name: string) => Tensor,
  opt: (name: string) => Tensor | null,
): DecoderLayerWeights[] {
  return Array.from({ length: config.layers }, (_, i): DecoderLayerWeights => {
    const p = `model.layers.${i}.`;
    const a = `${p}self_attn.`;
    const mlp: MlpWeights = {
      inputNorm: w(`${p}input_layernorm.weight`),
      postNorm: w(`${p}post_attention_layernorm.weight`),
      preFfnNorm: opt(`${p}pre_feedforward_layernorm.weight`),
      postFfnNorm: opt(`${p}post_feedforward_layernorm.weight`),
      gate: w(`${p}mlp.gate_proj.weight`),
      up: w(`${p}mlp.up_proj.weight`),
      down: w(`${p}mlp.down_proj.weight`),
      gateBias: opt(`${p}mlp.gate_proj.bias`),
      upBias: opt(`${p}mlp.up_proj.bias`),
      downBias: opt(`${p}mlp.down_proj.bias`),
    };
    if (config.linearLayers[i]) {
      const l = `${p}linear_attn.`;
      return {
        ...mlp,
        deltaNet: {
          qkv: w(`${l}in_proj_qkv.weight`),
          z: w(`${l}in_proj_z.weight`),
          b: w(`${l}in_proj_b.weight`),
          a: w(`${l}in_proj_a.weight`),
          conv: w(`${l}conv1d.weight`),
          aLog: w(`${l}A_log`),
          dtBias: w(`${l}dt_bias`),
          norm: w(`${l}norm.weight`),
          out: w(`${l}out_proj.weight`),
        },
      };
    }
    return {
      ...mlp,
      q: w(`${a}q_proj.weight`),
      k: w(`${a}k_proj.weight`),
      v: w(`${a}v_proj.weight`),
      o: w(`${a}o_proj.weight`),
      qBias: opt(`${a}q_proj.bias`),
      kBias: opt(`${a}k_proj.bias`),
      vBias: opt(`${a}v_proj.bias`),
      oBias: opt(`${a}o_proj.bias`),
      qNorm: opt(`${a}q_norm.weight`),
      kNorm: opt(`${a}k_norm.weight`),
    };
  });
}

/**
 * Refuses a config.json that claims more layers than the checkpoint holds before any per-layer list is built: one
 * lookup when it fits, one per layer held when it does not (then the message says how many there are).
 */
export function checkLayerCount(config: DecoderConfig, src: Pick<WeightSource, 'name' | 'has'>): void {
  const norm = (l: number) => `model.layers.${l}.input_layernorm.weight`;
  if (src.has(norm(config.layers - 1))) return;
  let held = 0;
  while (held < config.layers && src.has(norm(held))) held++;
  throw new InvalidModelConfig(
    `${src.name}: the config says num_hidden_layers ${config.layers} (block_count in GGUF), but the checkpoint holds ${held} ` +
      `layer(s) (${norm(held)} is missing); set num_hidden_layers to ${held} if the config is wrong, or re-download the model`,
  );
}

/** The key of a tied lm_head's quantized copy among the loaded tensors (no checkpoint tensor has this name). */
const TIED_HEAD = 'lm_head.weight (quantized copy of model.embed_tokens.weight)';

/** Loads and checks every weight of `config` from `src`. Nothing is uploaded when a tensor is missing. */
export async function loadDecoderWeights(
  config: DecoderConfig, src: WeightSource, backend: Backend, opts: LoadOptions = {},
): Promise<DecoderWeights> {
  const quantize = opts.quantize ?? null;
  if (quantize !== null && quantize !== 'q8_0' && quantize !== 'q4_0') {
    throw new InvalidArgument(`quantize must be 'q8_0', 'q4_0' or null, got ${JSON.stringify(quantize)}`);
  }
  // image-text checkpoints keep the decoder under another prefix (layout.ts); only its tensors are read
  src = layoutSource(src);
  checkLayerCount(config, src);
  const specs = weightSpecs(config);
  const missing = specs.filter((s) => !src.has(s.name));
  if (missing.length) {
    const list = missing.slice(0, 5).map((s) => `"${s.name}" [${s.shape.join(', ')}]`).join(', ');
    throw new CorruptCheckpoint(
      `${src.name} lacks ${missing.length} tensor(s) that a ${config.family} model with this config.json needs: ` +
        `${list}${missing.length > 5 ? ', ...' : ''}; the checkpoint is incomplete or belongs to another model: re-download it`,
    );
  }
  const got = new Map<string, Tensor>();
  try {
    for (const s of specs) got.set(s.name, await loadOne(src, s, backend, quantize));
  } catch (e) {
    for (const t of got.values()) t.dispose();
    throw e;
  }
  const w = (n: string) => got.get(n)!;
  const opt = (n: string) => got.get(n) ?? null;
  const layers = layerWeights(config, w, opt);
  const bytes: Partial<Record<DType, number>> = {};
  let totalBytes = 0;
  for (const t of got.values()) {
    const n = byteSize(t.dtype, t.shape);
    bytes[t.dtype] = (bytes[t.dtype] ?? 0) + n;
    totalBytes += n;
  }
  const embed = w('model.embed_tokens.weight');
  if (config.tieEmbeddings && quantize && !isQuant(embed.dtype) && config.hidden % QK === 0) {
    const head = await loadOne(src, { name: 'model.embed_tokens.weight', shape: [...embed.shape], kind: 'proj' }, backend, quantize);
    got.set(TIED_HEAD, head);
    bytes[quantize] = (bytes[quantize] ?? 0) + byteSize(quantize, head.shape);
    totalBytes += byteSize(quantize, head.shape);
  }
  return {
    backend,
    embed,
    layers,
    norm: w('model.norm.weight'),
    lmHead: got.get(TIED_HEAD) ?? (config.tieEmbeddings ? embed : w('lm_head.weight')),
    bytes,
    totalBytes,
    dispose: () => got.forEach((t) => t.dispose()),
  };
}

/** "bf16 1.2 MB, q4_0 3.4 MB (total 4.6 MB)" for logs and the CLI. */
export function formatWeightBytes(w: Pick<DecoderWeights, 'bytes' | 'totalBytes'>): string {
  const mb = (n: number) => `${(n / 1e6).toFixed(n < 1e5 ? 3 : 1)} MB`;
  const parts = Object.entries(w.bytes).map(([d, n]) => `${d} ${mb(n!)}`);
  return `${parts.join(', ')} (total ${mb(w.totalBytes)})`;
}

/**
 * The weight bytes one decode step reads when every weight is read once: all of them, except that the embedding
 * lookup reads only its row of the table (the whole table again when the LM head is tied to it). The counters'
 * weight bytes per token equal this on the fused path (GpuCounters).
 */
export function stepWeightBytes(w: Pick<DecoderWeights, 'embed' | 'lmHead' | 'totalBytes'>): number {
  const table = byteSize(w.embed.dtype, w.embed.shape);
  const row = table / w.embed.shape[0];
  return w.totalBytes - table + row + (w.lmHead === w.embed ? table : 0);
}
