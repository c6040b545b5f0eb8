/**
 * What `npm run bench:gpu` (bench/gpu.ts) measures on one backend: a random-weights decoder at Qwen3-1.7B's width
 * (q4_0 and bf16) through generate() and as a bare decode step, a latent step against that step, the dispatches
 * of one layer, batched decode, and a standalone GEMV over more weight than any GPU cache holds.
 *
 * Every layer holds the same random values (one layer generated, its bytes uploaded once per layer into buffers of
 * their own): timing does not depend on the values, and generating 28 layers' worth in JS would take minutes.
 */
import { F, noGrad } from '../src/autograd';
import { InvalidArgument, UnsupportedFeature } from '../src/errors';
import { byteSize } from '../src/formats/dtype';
import { decode, encode } from '../src/formats/encode';
import { type StorageTensor, toStorage } from '../src/formats/safetensors';
import { InnerLink, innerLinkParamCount } from '../src/mas/links';
import { type DecoderConfig, parseDecoderConfig } from '../src/model/config';
import { Decoder, KVCache } from '../src/model/decoder';
import { generate } from '../src/model/generate';
import { forwardCost, randomSource } from '../src/model/model.bench';
import { type DecoderWeights, type WeightSource, loadDecoderWeights, stepWeightBytes, weightSpecs } from '../src/model/weights';
import type { Backend } from '../src/tensor/backend';
import { tidy } from '../src/tensor/scope';
import type { Tensor } from '../src/tensor/tensor';
import type { BenchCase, BenchOptions, BenchResult, BenchRun } from '../src/kernels/workbench/bench';
import { Rng } from '../src/util/rng';
import { timeCase } from './harness';

export type WeightDType = 'q4_0' | 'bf16';

/** Sizes of one run: the full default, or --quick for a CPU adapter (2 layers at a quarter of the width). */
export interface GpuBenchSize {
  quick: boolean;
  layers: number;
  /** Prompt tokens prefilled before decoding (the KV cache the decode and latent steps attend to). */
  prompt: number;
  /** Decode steps timed by generate() after its first token. */
  tokens: number;
  timing: Omit<BenchOptions, 'size' | 'filter'>;
}

export const BATCH = 16;
export const BATCH_NOT_BUILT = 'batched decode is not built yet (issue 23 item 4)';

/** Qwen3-1.7B's shape at `layers` layers (quick: a quarter of the width, head_dim kept); a small vocab, see gpu.ts. */
export function qwen3Config(size: GpuBenchSize): DecoderConfig {
  const q = size.quick ? 4 : 1;
  return parseDecoderConfig({
    model_type: 'qwen3', vocab_size: size.quick ? 256 : 1024, hidden_size: 2048 / q, num_hidden_layers: size.layers,
    num_attention_heads: 16 / q, num_key_value_heads: 8 / q, head_dim: 128, intermediate_size: 6144 / q,
    rms_norm_eps: 1e-6, max_position_embeddings: 40960, rope_theta: 1000000, tie_word_embeddings: true,
  }, 'bench:gpu Qwen3-1.7B-width config');
}

/**
 * randomSource's values for layer 0 and the non-layer tensors, served for every layer; q4_0 projections are encoded
 * once and handed to the loader already quantized (as a GGUF's are), so each backend's load is only its upload.
 */
export class SharedLayerWeights {
  private readonly base: WeightSource;
  private readonly kinds: Map<string, string>;
  private readonly memo = new Map<string, Promise<StorageTensor>>();

  constructor(readonly config: DecoderConfig) {
    this.base = randomSource(config, 1);
    this.kinds = new Map(weightSpecs(config).map((s) => [s.name, s.kind]));
  }

  source(dtype: WeightDType): WeightSource {
    const layer0 = (n: string) => n.replace(/^model\.layers\.\d+\./, 'model.layers.0.');
    const memo = (key: string, make: () => Promise<StorageTensor>) => {
      let p = this.memo.get(key);
      if (!p) this.memo.set(key, (p = make()));
      return p;
    };
    const raw = (n: string) => memo(`bf16 ${n}`, async () => toStorage(await this.base.read(n), n, this.base.name));
    const storage = (n: string): Promise<StorageTensor> => {
      const n0 = layer0(n);
      if (dtype !== 'q4_0' || this.kinds.get(n) !== 'proj') return raw(n0);
      return memo(`q4_0 ${n0}`, async () => {
        const s = await raw(n0);
        return { dtype: 'q4_0', shape: s.shape, bytes: encode('q4_0', decode(s.dtype, s.bytes, s.shape), s.shape) };
      });
    };
    return {
      name: `${this.base.name}, layer 0's values in every layer`,
      has: (n) => this.base.has(n),
      read: (n) => this.base.read(layer0(n)),
      readStorage: storage,
    };
  }

  async decoder(backend: Backend, dtype: WeightDType): Promise<Decoder> {
    return new Decoder(this.config, await loadDecoderWeights(this.config, this.source(dtype), backend));
  }
}

/** The first `n` layers of `model` as a decoder of their own, sharing its weights (disposing it leaves them alone). */
function firstLayers(model: Decoder, n: number): Decoder {
  const c = model.config;
  const entries = Object.entries(c).map(([k, v]) => [k, Array.isArray(v) && v.length === c.layers ? v.slice(0, n) : v]);
  const config = { ...(Object.fromEntries(entries) as DecoderConfig), layers: n };
  const weights: DecoderWeights = { ...model.weights, layers: model.weights.layers.slice(0, n), dispose: () => {} };
  return new Decoder(config, weights);
}

/** Weight bytes a latent step reads: the layers and the final norm (no embedding row, no LM head), and the link (f32). */
export function latentWeightBytes(w: DecoderWeights, hidden: number): number {
  const bytes = (t: Tensor) => byteSize(t.dtype, t.shape);
  return w.totalBytes - bytes(w.embed) - (w.lmHead !== w.embed ? bytes(w.lmHead) : 0) + 4 * innerLinkParamCount(hidden);
}

/** Per token or per step: what a counting backend (WebGPU) issued; null fields elsewhere. */
export interface Counted {
  dispatches: number | null;
  submits: number | null;
  readbacks: number | null;
  weight_bytes: number | null;
  activation_bytes: number | null;
}

export interface StepFigures extends Counted {
  ms: number;
  /**
   * Weight bytes read per step over its time (GB/s); compare with the adapter's nominal bandwidth. A latent step's
   * include the inner link's f32 parameters, which the counters count as activations.
   */
  weight_gbps: number;
}

export interface BatchFigures {
  batch: number;
  skipped?: string;
  tokens_per_s?: number;
  ms_per_step?: number;
  dispatches_per_step?: number | null;
  weight_bytes_per_step?: number | null;
  /** Tokens/s over the single-sequence decode step's. */
  speedup_over_batch_1?: number;
}

export interface DecodeFigures {
  dtype: WeightDType;
  /** All weights loaded, and what one decode step must read of them (stepWeightBytes). */
  weight_bytes: number;
  step_weight_bytes: number;
  fused_layers: number;
  prompt_tokens: number;
  /** generate(): prefill, then one token per step with its id read back, as `rmas generate` decodes. */
  prefill_tokens_per_s: number;
  decode_tokens_per_s: number;
  per_token: Counted;
  /** Dispatches of one layer: (hidden-only step of all layers − of the first layer) / (layers − 1). */
  dispatches_per_layer: number | null;
  /** A decode step (ids in, logits, argmax) back to back without readback: the GPU's own rate. */
  step: StepFigures;
  /** A latent step (inner link, one-row forward, no LM head) timed the same way, and its time over the step's. */
  latent: StepFigures & { ratio_to_decode_step: number };
  batch: BatchFigures;
}

const counted = (r: BenchResult, per = 1): Counted => {
  const p = r.perIter;
  return {
    dispatches: p ? p.dispatches / per : null, submits: p ? p.submits / per : null, readbacks: p ? p.readbacks / per : null,
    weight_bytes: p ? p.weightBytes / per : null, activation_bytes: p ? p.activationBytes / per : null,
  };
};

const caseOf = (name: string, run: BenchRun): BenchCase => ({ name, setup: () => run });

/** One hidden-only step (embeddings in, no logits) counted: the dispatches it issued. */
async function countHiddenStep(model: Decoder, cache: KVCache, past: number, x: Tensor): Promise<number> {
  const be = model.backend;
  const a = be.counters!();
  cache.length = past;
  noGrad(() => tidy(() => model.forward({ inputsEmbeds: x, cache }).hidden)).dispose();
  await be.sync();
  return be.counters!().dispatches - a.dispatches;
}

async function dispatchesPerLayer(model: Decoder, cache: KVCache, past: number, x: Tensor): Promise<number | null> {
  const L = model.config.layers;
  if (!model.backend.counters || L < 2) return null;
  const one = firstLayers(model, 1);
  try {
    const all = await countHiddenStep(model, cache, past, x);
    const first = await countHiddenStep(one, new KVCache(cache.k.slice(0, 1), cache.v.slice(0, 1), cache.maxLen), past, x);
    return (all - first) / (L - 1);
  } finally {
    one.dispose();
  }
}

/**
 * The model section for one dtype on one backend; `rows` hears each timed row for the table. The caller's
 * SharedLayerWeights hands every backend the same bytes.
 */
export async function decodeSection(
  backend: Backend, weights: SharedLayerWeights, dtype: WeightDType, size: GpuBenchSize, rows: (r: BenchResult) => void,
): Promise<DecodeFigures> {
  const c = weights.config;
  const model = await weights.decoder(backend, dtype);
  const rng = new Rng(11);
  const ids = (n: number) => Array.from({ length: n }, () => rng.int(c.vocabSize));
  const P = size.prompt;
  const cache = model.newCache(P + 1);
  const id = backend.fromValues(ids(1), [1], 'i32');
  const h = backend.fromValues(rng.normals(c.hidden), [1, c.hidden]);
  const inner = InnerLink.create(backend, c.hidden, { seed: 2 });
  try {
    // pipelines compile on a short run first; the timed one decodes `tokens` steps after its first token
    await generate(model, { inputIds: ids(8), maxNewTokens: 4, sampling: { greedy: true }, eosTokenIds: [] });
    const g = await generate(model, { inputIds: ids(P), maxNewTokens: size.tokens + 1, sampling: { greedy: true }, eosTokenIds: [] });
    const stepBytes = stepWeightBytes(model.weights);
    const dc = g.decodeCounters;
    const per = (n: number | undefined) => (dc && n !== undefined ? n / dc.steps : null);
    const perToken: Counted = {
      dispatches: per(dc?.dispatches), submits: per(dc?.submits), readbacks: per(dc?.readbacks),
      weight_bytes: per(dc?.weightBytes), activation_bytes: per(dc?.activationBytes),
    };
    const tps = g.decodeTokensPerSec;
    rows({
      name: `${dtype}: generate() decode, one id read back per token (prompt ${P})`, backend: backend.name, iters: g.tokens.length - 1,
      msPerIter: 1000 / tps, gflops: null, gbps: (stepBytes * tps) / 1e9, tokensPerSec: tps,
      ...(dc ? { perIter: { dispatches: dc.dispatches / dc.steps, submits: dc.submits / dc.steps, readbacks: dc.readbacks / dc.steps,
        weightBytes: dc.weightBytes / dc.steps, activationBytes: dc.activationBytes / dc.steps } } : {}),
    });

    // the same context for the bare steps: a real prefill, then each iteration rewinds and overwrites row P
    noGrad(() => tidy(() => model.forward({ inputIds: backend.fromValues(ids(P), [P], 'i32'), cache }).hidden)).dispose();
    const cost = forwardCost(c, model.weights, { T: 1, past: P, logitsRows: 1, ids: true });
    const step = await timeCase(backend, caseOf(`${dtype}: decode step, ids in, logits + argmax, no readback (KV ${P})`, {
      run: () => {
        cache.length = P;
        noGrad(() => tidy(() => F.argmax(model.forward({ inputIds: id, cache, logits: 'last' }).logits!))).dispose();
      },
      flops: cost.flops, bytes: stepBytes, tokens: 1, dispose: () => {},
    }), { size: 'full', ...size.timing });
    rows(step);
    const latentBytes = latentWeightBytes(model.weights, c.hidden);
    const latent = await timeCase(backend, caseOf(`${dtype}: latent step, inner link + one-row forward, no LM head (KV ${P})`, {
      run: () => {
        cache.length = P;
        noGrad(() => tidy(() => model.forward({ inputsEmbeds: inner.forward(h), cache }).hidden)).dispose();
      },
      flops: forwardCost(c, model.weights, { T: 1, past: P, logitsRows: 0, ids: false }).flops + 4 * c.hidden * c.hidden,
      bytes: latentBytes, tokens: 1, dispose: () => {},
    }), { size: 'full', ...size.timing });
    rows(latent);
    const perLayer = await dispatchesPerLayer(model, cache, P, h);
    const batch = await batchSection(model, dtype, size, rows);
    if (batch.tokens_per_s !== undefined) batch.speedup_over_batch_1 = batch.tokens_per_s / step.tokensPerSec!;
    return {
      dtype,
      weight_bytes: model.weights.totalBytes,
      step_weight_bytes: stepBytes,
      fused_layers: model.fusedSteps ? model.fused.fusedLayers : 0,
      prompt_tokens: P,
      prefill_tokens_per_s: g.prefillTokensPerSec,
      decode_tokens_per_s: tps,
      per_token: perToken,
      dispatches_per_layer: perLayer,
      step: { ms: step.msPerIter, weight_gbps: step.gbps!, ...counted(step) },
      latent: {
        ms: latent.msPerIter,
        weight_gbps: latent.gbps!,
        ...counted(latent),
        ratio_to_decode_step: latent.msPerIter / step.msPerIter,
      },
      batch,
    };
  } finally {
    [id, h].forEach((t) => t.dispose());
    inner.dispose();
    cache.dispose();
    model.dispose();
  }
}

/**
 * Decode at batch 16: each of 16 sequences prefilled with its own prompt (prefillRow), then one batched step of 16
 * ids with logits and a per-row argmax, rewound to the prompt's end every iteration as the single-row step is.
 * Where the decoder has no batched step (issue 23 item 4 not built), or none on this backend, the section says so instead.
 */
export async function batchSection(
  model: Decoder,
  dtype: WeightDType,
  size: GpuBenchSize,
  rows: (r: BenchResult) => void,
): Promise<BatchFigures> {
  if (typeof (model as Partial<Decoder>).stepBatch !== 'function') return { batch: BATCH, skipped: BATCH_NOT_BUILT };
  const be = model.backend;
  const c = model.config;
  const P = size.prompt;
  const rng = new Rng(12);
  const cache = model.newBatchCache(BATCH, P + 1);
  const ids = be.fromValues(
    Array.from({ length: BATCH }, () => rng.int(c.vocabSize)),
    [BATCH],
    'i32',
  );
  try {
    for (let b = 0; b < BATCH; b++) {
      const prompt = Array.from({ length: P }, () => rng.int(c.vocabSize));
      noGrad(() => tidy(() => model.prefillRow(cache, b, { inputIds: be.fromValues(prompt, [P], 'i32') }).hidden)).dispose();
    }
    const r = await timeCase(
      be,
      caseOf(`${dtype}: batched decode step, ${BATCH} sequences, logits + argmax (KV ${P} each)`, {
        run: () => {
          cache.lengths.fill(P);
          noGrad(() => tidy(() => F.argmax(model.stepBatch({ inputIds: ids, cache, logits: true }).logits!))).dispose();
        },
        flops: BATCH * forwardCost(c, model.weights, { T: 1, past: P, logitsRows: 1, ids: true }).flops,
        bytes: stepWeightBytes(model.weights),
        tokens: BATCH,
        dispose: () => {},
      }),
      { size: 'full', ...size.timing },
    );
    rows(r);
    return {
      batch: BATCH,
      tokens_per_s: r.tokensPerSec!,
      ms_per_step: r.msPerIter,
      dispatches_per_step: r.perIter?.dispatches ?? null,
      weight_bytes_per_step: r.perIter?.weightBytes ?? null,
    };
  } catch (e) {
    // a backend the batched step has no kernels for says so by name (CUDA: the fused path it runs on)
    if (e instanceof InvalidArgument || e instanceof UnsupportedFeature) return { batch: BATCH, skipped: `${e.name}: ${e.message}` };
    throw e;
  } finally {
    ids.dispose();
    cache.dispose();
  }
}

export interface GemvFigures {
  dtype: WeightDType;
  rows: number;
  cols: number;
  /** Distinct weight copies cycled through, together larger than a GPU's last-level cache. */
  copies: number;
  ms_per_gemv: number;
  gbps: number;
}

/**
 * y = x·Wᵀ, x [1, cols] f32, W [rows, cols] (the gate/up projection's shape) through F.linear, over `copies` distinct
 * weights of the same bytes so that no iteration finds its weight in cache (256 MB in all at full size).
 */
export async function gemvSection(
  backend: Backend,
  dtype: WeightDType,
  size: GpuBenchSize,
  rows: (r: BenchResult) => void,
): Promise<GemvFigures> {
  const [N, K] = size.quick ? [1536, 512] : [6144, 2048];
  const rng = new Rng(13);
  const bytes = encode(dtype, rng.normals(N * K, 1 / Math.sqrt(K)), [N, K]);
  const copies = size.quick ? 2 : Math.max(2, Math.ceil(256e6 / bytes.length));
  const ws = Array.from({ length: copies }, () => {
    const w = backend.fromBytes(bytes, [N, K], dtype);
    backend.markWeight?.(w);
    return w;
  });
  const x = backend.fromValues(rng.normals(K), [1, K]);
  try {
    const r = await timeCase(
      backend,
      caseOf(`gemv ${dtype} [1, ${K}] x [${N}, ${K}]ᵀ, ${copies} weight copies per iteration`, {
        run: () => noGrad(() => ws.forEach((w) => F.linear(x, w).dispose())),
        flops: copies * 2 * N * K,
        bytes: copies * (bytes.length + 4 * (K + N)),
        dispose: () => {},
      }),
      { size: 'full', ...size.timing },
    );
    rows(r);
    return { dtype, rows: N, cols: K, copies, ms_per_gemv: r.msPerIter / copies, gbps: r.gbps! };
  } finally {
    ws.forEach((w) => w.dispose());
    x.dispose();
  }
}
