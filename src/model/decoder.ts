/**
 * The decoder forward pass (Llama 3.x, Qwen2/2.5, Qwen3, Mistral, Gemma 3, Qwen3.5), written only with
 * differentiable F ops so that a recording Tape backpropagates from the hidden states to `inputsEmbeds` through the
 * frozen weights. Family differences come from DecoderConfig (biases, per-head q/k RMSNorm before RoPE, rope
 * scaling and partial rotary, sliding windows per layer with their own rope, (1 + w) norms, sandwich norms, GeGLU,
 * scaled embeddings, attention scale, logit soft-capping, an attention output gate, Gated DeltaNet layers), not
 * from model_type switches.
 *
 * A cache holds per attention layer k and v [maxLen, Hkv, D] and a length; attention reads the first
 * `length + T` rows, so feeding a sequence chunk by chunk computes what feeding it whole does. A Gated DeltaNet
 * layer keeps instead the last K − 1 rows its conv saw and the delta rule's state, replaced by each forward: such
 * a cache goes on from where it stopped, never from an earlier length.
 */
import { F, currentTape, recompute } from '../autograd';
import { InvalidArgument, ShapeMismatch, UnsupportedFeature } from '../errors';
import { ropeInvFreq } from '../kernels/rope';
import { tidy, untrack } from '../tensor/scope';
import { Tensor } from '../tensor/tensor';
import type { WebGpuBackend } from '../tensor/webgpu';
import { type DecoderConfig, layerWindow } from './config';
import { BatchCache, KVCache, defaultKvDtype, type KvDType } from './cache';
import { FusedPath } from './fused';
import { type DecoderWeights, type DecoderLayerWeights, type DeltaNetWeights, type LayerWeights, isDeltaNetLayer } from './weights';

export { BatchCache, KVCache, type KvDType } from './cache';

export interface ForwardInput {
  /** i32 token ids [T]; exactly one of inputIds / inputsEmbeds. */
  inputIds?: Tensor;
  /** f32 [T, hidden]; may require grad (the gradient flows back to it). */
  inputsEmbeds?: Tensor;
  /** Appended to and read from; its length advances by T. */
  cache?: KVCache;
  /** RoPE positions [T] (i32 tensor or numbers); default cache length + t. */
  positions?: Tensor | ArrayLike<number>;
  /** Which rows to project to logits: every row, the last, the listed rows, or none (default). */
  logits?: 'all' | 'last' | number[] | false;
  /**
   * Activation recomputation while a tape records (autograd/recompute.ts): each layer keeps only its
   * input, and backward recomputes the layer. Same gradients, a layer's activations instead of all of them.
   */
  recompute?: boolean;
}

export interface ForwardOutput {
  /** Last-layer hidden states after the final norm, every position: [T, hidden]. */
  hidden: Tensor;
  /** [rows, vocab] for the rows `logits` selected. */
  logits?: Tensor;
}

export class Decoder {
  /** RoPE inverse frequencies, uploaded once (rope would upload a Float32Array on every call). */
  private readonly invFreq: Tensor;
  /** The sliding-window layers' own frequencies (Gemma 3's local base), or the same tensor. */
  private readonly invFreqLocal: Tensor;
  /**
   * The Gated DeltaNet's L2 norms as RMSNorm weights (null without such layers): rmsNorm(x, w, 1e-6/d) with w = 1/√d
   * is x·rsqrt(Σx² + 1e-6), the L2 norm with transformers' eps; for q, w = 1/d also applies the 1/√d scale.
   */
  private readonly l2: { q: Tensor; k: Tensor } | null;
  /**
   * One-token steps with a cache and no tape run the fused inference path (model/fused.ts): a few dispatches per
   * layer instead of one per op, equal within f32 rounding. On by default on WebGPU, where dispatches cost; the CPU
   * backend can run it too (tests compare the two paths there); CUDA has no fused kernels yet.
   */
  fusedSteps: boolean;
  /**
   * The dtype of the k and v caches newCache and newBatchCache make: 'f16' halves their memory and what attention
   * reads (values rounded to f16 as they are written). WebGPU needs shader-f16 for it; CUDA keeps f32. Starts as
   * defaultKvDtype: f16 on WebGPU devices with shader-f16, f32 elsewhere.
   */
  kvDtype: KvDType;
  private fusedImpl: FusedPath | null = null;

  constructor(
    readonly config: DecoderConfig,
    readonly weights: DecoderWeights,
  ) {
    const upload = (r: DecoderConfig['rope']) => {
      const inv = ropeInvFreq(r);
      return weights.backend.fromValues(inv, [inv.length]);
    };
    this.invFreq = upload(config.rope);
    this.invFreqLocal = config.ropeLocal ? upload(config.ropeLocal) : this.invFreq;
    this.fusedSteps = weights.backend.kind === 'webgpu';
    this.kvDtype = defaultKvDtype(weights.backend);
    const dk = config.deltaNet?.keyDim;
    this.l2 =
      dk === undefined
        ? null
        : {
            q: weights.backend.fromValues(new Float32Array(dk).fill(1 / dk), [dk]),
            k: weights.backend.fromValues(new Float32Array(dk).fill(1 / Math.sqrt(dk)), [dk]),
          };
  }

  get backend() {
    return this.weights.backend;
  }

  /** The fused inference path (prepared on first use). */
  get fused(): FusedPath {
    if (!FusedPath.supports(this.backend))
      throw new InvalidArgument(`the fused inference path has no kernels on the ${this.backend.kind} backend; set fusedSteps = false`);
    this.fusedImpl ??= new FusedPath(this.config, this.weights, this.invFreq, this.invFreqLocal);
    return this.fusedImpl;
  }

  /**
   * The model's input embeddings of i32 `ids` [T]: [T, hidden] f32. Exactly the table's rows, or for Gemma the rows
   * times √hidden: upstream's "input embeddings" are the scaled rows. The scale is f32 and nothing is rounded to the
   * table's dtype, as transformers computes it for a model loaded in float32 (and llama.cpp after get_rows): one rule
   * with every other step, which computes in f32 from the upcast weights.
   */
  embed(ids: Tensor): Tensor {
    if (ids.dtype !== 'i32') throw new InvalidArgument(`embed: token ids must be i32, got ${ids.dtype}`);
    const s = this.config.embedScale;
    if (s === null) return F.embedding(ids, this.weights.embed);
    return tidy(() => F.scale(F.embedding(ids, this.weights.embed), Math.fround(s)));
  }

  /** A cache for up to `maxLen` positions (f32 k and v for every attention layer). */
  newCache(maxLen: number): KVCache {
    if (!Number.isInteger(maxLen) || maxLen < 1) throw new InvalidArgument(`newCache: maxLen must be a positive integer, got ${maxLen}`);
    const { layers, kvHeads, headDim, linearLayers } = this.config;
    this.checkKvDtype();
    const make = () =>
      Array.from({ length: layers }, (_, l) => (linearLayers[l] ? null : this.backend.zeros([maxLen, kvHeads, headDim], this.kvDtype)));
    return new KVCache(make(), make(), maxLen);
  }

  forward(input: ForwardInput): ForwardOutput {
    const { inputIds, inputsEmbeds, cache } = input;
    const c = this.config;
    if (!!inputIds === !!inputsEmbeds) throw new InvalidArgument('forward: pass exactly one of inputIds and inputsEmbeds');
    if (inputsEmbeds && (inputsEmbeds.rank !== 2 || inputsEmbeds.shape[1] !== c.hidden)) {
      throw new ShapeMismatch(`forward: inputsEmbeds has shape [${inputsEmbeds.shape}], expected [T, ${c.hidden}]`);
    }
    if (inputIds && inputIds.rank !== 1) throw new ShapeMismatch(`forward: inputIds has shape [${inputIds.shape}], expected [T]`);
    const T = inputIds ? inputIds.shape[0] : inputsEmbeds!.shape[0];
    const past = cache?.length ?? 0;
    if (cache && past + T > cache.maxLen) {
      throw new InvalidArgument(
        `forward: ${T} new positions after ${past} cached ones exceed the cache's ${cache.maxLen}; allocate a longer cache`,
      );
    }
    if (cache && c.deltaNet && past !== cache.stateLength) {
      throw new InvalidArgument(
        `forward: the cache's length was set to ${past}, but its Gated DeltaNet states hold ${cache.stateLength} positions ` +
          'and cannot be rewound; reset() it and feed the sequence again, or use a new cache',
      );
    }
    const rows = selectRows(input.logits ?? false, T);
    const tape = currentTape();
    // one-token steps with host-known positions take the fused path (its kernels read positions from a small table)
    const fused = this.fusedSteps && !tape && cache && T === 1 && !(input.positions instanceof Tensor) ? this.fused : null;

    const out = tidy((): Record<string, Tensor> => {
      // the plain layers' positions; a step whose layers all run fused reads them from its own table instead
      const pos = fused?.fusedLayers === c.layers ? null : this.positions(input.positions, past, T);
      const ownPos = pos !== null && pos !== input.positions;
      const x0 = inputsEmbeds ?? this.embed(inputIds!);
      if (cache && tape && x0.requiresGrad) {
        throw new InvalidArgument(
          'forward: backward through a KV cache is not supported (the cache is written in place); ' +
            'run the forward without a cache while recording a tape',
        );
      }
      let x = x0;
      const step =
        fused && cache
          ? {
              cache,
              rows: this.backend.fromValues([(input.positions as ArrayLike<number> | undefined)?.[0] ?? past, past, 0], [3, 1], 'i32'),
              maxKeys: past + 1,
            }
          : null;
      for (let l = 0; l < c.layers; l++) {
        const prev = x;
        // a layer's intermediates go when it returns, not when the whole forward does (recorded ones
        // belong to the tape and stay)
        x = tidy(() =>
          step && fused?.has(l)
            ? fused.layer(l, prev, step)
            : input.recompute && tape && !cache
              ? recompute((xl) => this.layer(l, xl, pos!, T, past), [prev], layerTensors(this.weights.layers[l]))
              : this.layer(l, prev, pos!, T, past, cache),
        );
        // off the tape nothing reads the previous layer's output again
        if (!tape && prev !== x0) prev.dispose();
      }
      const hidden = F.rmsNorm(x, this.weights.norm, c.rmsEps, { offset: c.normOffset });
      let logits: Tensor | undefined;
      let sel: Tensor | null = null;
      if (rows) {
        // the selected rows are gathered with embedding (differentiable w.r.t. its table, here hidden)
        sel = rows.length === T && rows.every((r, i) => r === i) ? null : this.backend.fromValues(rows, [rows.length], 'i32');
        // a fused step's logits as stepBatch computes them (the same bits)
        logits = (step && !sel ? fused!.lmHead(hidden) : null) ?? F.linear(sel ? F.embedding(sel, hidden) : hidden, this.weights.lmHead);
        if (c.finalSoftcap !== null) logits = F.scale(F.tanh(F.scale(logits, 1 / c.finalSoftcap)), c.finalSoftcap);
      }
      // rope's and embedding's backward rules read these after the forward: hand them to the tape so that
      // tidy leaves them alive (record disposes them at once when nothing requires grad)
      tape?.record({
        name: 'decoder.keep',
        inputs: [x0],
        outputs: [],
        saved: [...(ownPos ? [pos!] : []), ...(sel ? [sel] : [])],
        backward: () => [null],
      });
      return logits ? { hidden, logits } : { hidden };
    });
    if (cache) cache.length = cache.stateLength = past + T;
    return out as unknown as ForwardOutput;
  }

  /** Caches for `rows` sequences of up to `maxLen` positions each, for stepBatch (prefill each with prefillRow). */
  newBatchCache(rows: number, maxLen: number): BatchCache {
    this.checkKvDtype();
    return BatchCache.create(this.config, this.backend, rows, maxLen, this.kvDtype);
  }

  /** An f16 cache needs a backend that reads and writes it. */
  private checkKvDtype() {
    if (this.kvDtype === 'f32') return;
    if (this.kvDtype !== 'f16') throw new InvalidArgument(`kvDtype must be 'f32' or 'f16', got ${JSON.stringify(this.kvDtype)}`);
    const b = this.backend;
    if (b.kind === 'cuda' || (b.kind === 'webgpu' && !(b as WebGpuBackend).ctx.hasFeature('shader-f16'))) {
      throw new UnsupportedFeature(
        `an f16 KV cache needs ${b.kind === 'cuda' ? 'the WebGPU or CPU backend (CUDA keeps f32 caches)' : 'a WebGPU device with shader-f16'}; set kvDtype 'f32'`,
      );
    }
  }

  /**
   * Prefills sequence `b` of a batch cache with a prompt (pieces of embeddings, or token ids), on the plain path as
   * forward does it alone; returns the last piece's output (`logits` as in forward).
   */
  prefillRow(
    cache: BatchCache,
    b: number,
    prompt: { inputIds: Tensor } | { inputsEmbeds: readonly Tensor[] },
    logits: ForwardInput['logits'] = false,
  ): ForwardOutput {
    if (cache.lengths[b] !== 0)
      throw new InvalidArgument(`prefillRow: sequence ${b} already holds ${cache.lengths[b]} positions; batch caches are filled once`);
    const row = cache.rowCache(b);
    try {
      const pieces = 'inputIds' in prompt ? [prompt.inputIds] : prompt.inputsEmbeds.filter((p) => p.shape[0] > 0);
      if (!pieces.length) throw new InvalidArgument('prefillRow: the prompt is empty');
      let out: ForwardOutput | null = null;
      for (const [i, piece] of pieces.entries()) {
        out?.hidden.dispose();
        out?.logits?.dispose();
        const last = i === pieces.length - 1;
        out = this.forward({
          ...('inputIds' in prompt ? { inputIds: piece } : { inputsEmbeds: piece }),
          cache: row,
          logits: last ? logits : false,
        });
      }
      cache.takeStates(b, row);
      return out!;
    } finally {
      row.dispose();
    }
  }

  /**
   * One token for each of the listed sequences of a batch cache (default all), on the fused path: x [M, hidden] (or
   * ids [M]) at each sequence's next position. A row's numbers do not depend on the other rows, so a batch gives what
   * the same sequences give one at a time (batched decoding is token-identical). Returns the post-norm hidden states
   * and, with `logits`, the LM head's [M, vocab].
   */
  stepBatch(input: {
    inputsEmbeds?: Tensor;
    inputIds?: Tensor;
    cache: BatchCache;
    rows?: readonly number[];
    logits?: boolean;
  }): ForwardOutput {
    const { cache } = input;
    const c = this.config;
    const rows = input.rows ?? Array.from({ length: cache.rows }, (_, i) => i);
    const x0 = input.inputsEmbeds;
    if (!!input.inputIds === !!x0) throw new InvalidArgument('stepBatch: pass exactly one of inputIds and inputsEmbeds');
    const M = x0 ? x0.shape[0] : input.inputIds!.shape[0];
    if (M !== rows.length) throw new ShapeMismatch(`stepBatch: ${M} input rows for ${rows.length} sequences`);
    if (x0 && (x0.rank !== 2 || x0.shape[1] !== c.hidden))
      throw new ShapeMismatch(`stepBatch: inputsEmbeds [${x0.shape}], expected [${M}, ${c.hidden}]`);
    if (new Set(rows).size !== rows.length) throw new InvalidArgument('stepBatch: a sequence is listed twice');
    for (const r of rows) {
      if (!Number.isInteger(r) || r < 0 || r >= cache.rows)
        throw new InvalidArgument(`stepBatch: sequence ${r} is not one of the cache's ${cache.rows}`);
      if (cache.lengths[r] < 1) throw new InvalidArgument(`stepBatch: sequence ${r} was not prefilled (prefillRow)`);
      if (cache.lengths[r] >= cache.maxLen)
        throw new InvalidArgument(`stepBatch: sequence ${r} is full (${cache.maxLen} positions); allocate a longer batch cache`);
    }
    if (currentTape()) throw new InvalidArgument('stepBatch: batched steps are inference only; run forward while recording a tape');
    const fused = this.fused;
    if (fused.fusedLayers !== c.layers) {
      throw new UnsupportedFeature(
        `stepBatch: ${c.layers - fused.fusedLayers} layer(s) hold weights split across bindings, which batched steps cannot read; ` +
          'use a batch size of 1, or a device with a larger maxStorageBufferBindingSize',
      );
    }
    const out = tidy((): Record<string, Tensor> => {
      const len = rows.map((r) => cache.lengths[r]);
      const info = this.backend.fromValues(
        [...len, ...rows.map((r, i) => r * cache.stride + len[i]), ...rows.map((r) => r * cache.stride)],
        [3, M],
        'i32',
      );
      const step = { cache, rows: info, maxKeys: Math.max(...len) + 1 };
      let x = x0 ?? this.embed(input.inputIds!);
      for (let l = 0; l < c.layers; l++) {
        const prev = x;
        x = tidy(() => fused.layer(l, prev, step));
        if (prev !== x0) prev.dispose();
      }
      const hidden = F.rmsNorm(x, this.weights.norm, c.rmsEps, { offset: c.normOffset });
      if (!input.logits) return { hidden };
      // the LM head as a fused GEMV when its weight is one binding: per row the same bits whatever M is
      let logits = fused.lmHead(hidden) ?? F.linear(hidden, this.weights.lmHead);
      if (c.finalSoftcap !== null) logits = F.scale(F.tanh(F.scale(logits, 1 / c.finalSoftcap)), c.finalSoftcap);
      return { hidden, logits };
    });
    for (const r of rows) cache.lengths[r]++;
    return out as unknown as ForwardOutput;
  }

  private positions(p: ForwardInput['positions'], past: number, T: number): Tensor {
    if (p instanceof Tensor) {
      if (p.dtype !== 'i32' || p.rank !== 1 || p.shape[0] !== T) {
        throw new ShapeMismatch(`forward: positions is ${p.dtype} [${p.shape}], expected i32 [${T}]`);
      }
      return p;
    }
    const a = p ?? Int32Array.from({ length: T }, (_, t) => past + t);
    if (a.length !== T) throw new ShapeMismatch(`forward: ${a.length} positions for ${T} tokens`);
    return this.backend.fromValues(a, [T], 'i32');
  }

  private layer(l: number, x: Tensor, pos: Tensor, T: number, past: number, cache?: KVCache): Tensor {
    const c = this.config;
    const w = this.weights.layers[l];
    const norm = (t: Tensor, weight: Tensor) => F.rmsNorm(t, weight, c.rmsEps, { offset: c.normOffset });

    const h = norm(x, w.inputNorm);
    let attn = isDeltaNetLayer(w) ? this.deltaNet(l, w.deltaNet, h, T, past, cache) : this.attention(l, w, h, pos, T, past, cache);
    // Gemma's sandwich: the attention output is normalised before its residual add, the MLP wrapped in two norms
    if (c.sandwichNorms) attn = norm(attn, w.postNorm);
    const x1 = F.add(x, attn);
    const h2 = norm(x1, c.sandwichNorms ? w.preFfnNorm! : w.postNorm);
    const gate = F.linear(h2, w.gate, w.gateBias ?? undefined);
    const up = F.linear(h2, w.up, w.upBias ?? undefined);
    let mlp = F.linear(c.mlpAct === 'silu' ? F.swiglu(gate, up) : F.geglu(gate, up), w.down, w.downBias ?? undefined);
    if (c.sandwichNorms) mlp = norm(mlp, w.postFfnNorm!);
    return F.add(x1, mlp);
  }

  /** Attention of the normalised input `h` [T, hidden], o_proj applied. */
  private attention(l: number, w: LayerWeights, h: Tensor, pos: Tensor, T: number, past: number, cache?: KVCache): Tensor {
    const c = this.config;
    const D = c.headDim;
    const heads = (t: Tensor, n: number) => F.reshape(t, [T, n, D]);
    const norm = (t: Tensor, weight: Tensor) => F.rmsNorm(t, weight, c.rmsEps, { offset: c.normOffset });

    let q: Tensor;
    let outGate: Tensor | null = null;
    if (c.attnOutputGate) {
      // q_proj yields per head its query then its gate (D rows each)
      const [query, gate] = F.splitCols(F.reshape(F.linear(h, w.q, w.qBias ?? undefined), [T * c.heads, 2 * D]), [D, D]);
      q = heads(query, c.heads);
      outGate = F.reshape(gate, [T, c.heads * D]);
    } else {
      q = heads(F.linear(h, w.q, w.qBias ?? undefined), c.heads);
    }
    let k = heads(F.linear(h, w.k, w.kBias ?? undefined), c.kvHeads);
    const v = heads(F.linear(h, w.v, w.vBias ?? undefined), c.kvHeads);
    // Qwen3 and Gemma 3 normalise each head before rotating it
    if (w.qNorm) q = norm(q, w.qNorm);
    if (w.kNorm) k = norm(k, w.kNorm);
    const window = layerWindow(c, l) ?? undefined;
    const inv = window !== undefined ? this.invFreqLocal : this.invFreq;
    q = F.rope(q, pos, inv);
    k = F.rope(k, pos, inv);

    const scale = c.attnScale ?? undefined;
    let o: Tensor;
    if (cache) {
      const [ck, cv] = [cache.k[l]!, cache.v[l]!];
      F.kvAppend(ck, k, past);
      F.kvAppend(cv, v, past);
      o = F.attention(q, ck, cv, { kvLen: past + T, window, scale });
    } else {
      o = F.attention(q, k, v, { window, scale });
    }
    let flat = F.reshape(o, [T, c.heads * D]);
    // Qwen3.5: sigmoid(gate) scales the attention output before o_proj
    if (outGate) flat = F.mul(flat, F.sigmoid(outGate));
    return F.linear(flat, w.o, w.oBias ?? undefined);
  }

  /**
   * A Gated DeltaNet (Qwen3.5's linear attention) of the normalised input `h` [T, hidden], out_proj applied:
   * q|k|v through the causal conv and SiLU, q and k L2-normalised (q also by 1/√keyDim), the decay
   * g = −exp(A_log)·softplus(a + dt_bias) and β = sigmoid(b) per value head, the delta rule, then per value head an
   * RMSNorm with the plain weight, gated by SiLU(z). With a cache the conv and the delta rule go on from its states.
   */
  private deltaNet(l: number, w: DeltaNetWeights, h: Tensor, T: number, past: number, cache?: KVCache): Tensor {
    const c = this.config;
    const d = c.deltaNet!;
    const { keyHeads: nk, valueHeads: nv, keyDim: dk, valueDim: dv, convKernel: K } = d;
    const C = 2 * nk * dk + nv * dv;
    const mixed = F.linear(h, w.qkv);
    const resume = cache && past > 0;
    const convState = resume ? cache.conv[l]! : undefined;
    const conv = F.silu(F.causalConv1d(mixed, F.reshape(w.conv, [C, K]), convState));
    const [q, k, v] = F.splitCols(conv, [nk * dk, nk * dk, nv * dv]);
    const l2 = this.l2!;
    const eps = 1e-6 / dk;
    const qn = F.rmsNorm(F.reshape(q, [T, nk, dk]), l2.q, eps);
    const kn = F.rmsNorm(F.reshape(k, [T, nk, dk]), l2.k, eps);
    const beta = F.sigmoid(F.linear(h, w.b));
    const g = F.mul(F.softplus(F.add(F.linear(h, w.a), w.dtBias)), F.scale(F.exp(w.aLog), -1));
    const rule = F.gatedDeltaRule(qn, kn, F.reshape(v, [T, nv, dv]), g, beta, resume ? cache.ssm[l]! : undefined);
    if (cache) {
      // the conv's next state: the last K − 1 rows of (its state, or zeros) followed by this chunk's inputs
      const rows = K - 1;
      let next: Tensor;
      if (T >= rows) next = F.sliceRows(mixed, T - rows, rows);
      else {
        const before = convState ?? this.backend.zeros([rows, C]);
        next = F.sliceRows(F.concatRows([before, mixed]), T, rows);
      }
      untrack(next);
      untrack(rule.state);
      cache.setStates(l, next, rule.state);
    }
    // without a cache the final state goes with the layer's intermediates (or with the tape that recorded it)
    const y = F.mul(F.rmsNorm(rule.o, w.norm, c.rmsEps), F.silu(F.reshape(F.linear(h, w.z), [T, nv, dv])));
    return F.linear(F.reshape(y, [T, nv * dv]), w.out);
  }

  dispose() {
    this.fusedImpl?.dispose();
    this.l2?.q.dispose();
    this.l2?.k.dispose();
    this.invFreq.dispose();
    if (this.invFreqLocal !== this.invFreq) this.invFreqLocal.dispose();
    this.weights.dispose();
  }
}

/** The tensors of a layer's weights (the trainable among them get gradients through the recomputation). */
function layerTensors(w: DecoderLayerWeights): Tensor[] {
  const own = Object.values(w).filter((t): t is Tensor => t instanceof Tensor);
  return isDeltaNetLayer(w) ? [...own, ...Object.values(w.deltaNet)] : own;
}

function selectRows(sel: ForwardInput['logits'], T: number): number[] | null {
  if (!sel) return null;
  if (sel === 'all') return Array.from({ length: T }, (_, i) => i);
  if (sel === 'last') return [T - 1];
  if (!Array.isArray(sel) || sel.some((r) => !Number.isInteger(r) || r < 0 || r >= T)) {
    throw new InvalidArgument(`forward: logits rows ${JSON.stringify(sel)} must be integers in [0, ${T})`);
  }
  return sel;
}
