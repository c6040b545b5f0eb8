/**
 * The decoder forward pass (Llama 3.x, Qwen2/2.5, Qwen3), written only with differentiable F ops so that a
 * recording Tape backpropagates from the hidden states to `inputsEmbeds` through the frozen weights.
 * Family differences come from DecoderConfig (biases, per-head q/k RMSNorm before RoPE, rope scaling,
 * Qwen2's sliding window), not from model_type switches.
 *
 * A KV cache holds per layer k and v [maxLen, Hkv, D] and a length; attention reads the first
 * `length + T` rows, so feeding a sequence chunk by chunk computes what feeding it whole does.
 */
import { F, checkpoint, currentTape } from '../autograd';
import { InvalidArgument, ShapeMismatch } from '../errors';
import { ropeInvFreq } from '../kernels/rope';
import { tidy } from '../tensor/scope';
import { Tensor } from '../tensor/tensor';
import { type DecoderConfig, layerWindow } from './config';
import type { DecoderWeights, LayerWeights } from './weights';

export class KVCache {
  length = 0;
  constructor(
    readonly k: Tensor[],
    readonly v: Tensor[],
    readonly maxLen: number,
  ) {}

  /** Starts a new sequence; the buffers are reused (rows past `length` are never read). */
  reset() {
    this.length = 0;
  }

  dispose() {
    [...this.k, ...this.v].forEach((t) => t.dispose());
  }
}

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
   * Activation recomputation while a tape records (autograd/checkpoint.ts): each layer keeps only its
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

  constructor(
    readonly config: DecoderConfig,
    readonly weights: DecoderWeights,
  ) {
    const inv = ropeInvFreq(config.rope);
    this.invFreq = weights.backend.fromValues(inv, [inv.length]);
  }

  get backend() {
    return this.weights.backend;
  }

  /** Exactly the rows of the input embedding table at i32 `ids` [T]: [T, hidden] f32. */
  embed(ids: Tensor): Tensor {
    if (ids.dtype !== 'i32') throw new InvalidArgument(`embed: token ids must be i32, got ${ids.dtype}`);
    return F.embedding(ids, this.weights.embed);
  }

  /** A cache for up to `maxLen` positions (all layers; f32 k and v). */
  newCache(maxLen: number): KVCache {
    if (!Number.isInteger(maxLen) || maxLen < 1) throw new InvalidArgument(`newCache: maxLen must be a positive integer, got ${maxLen}`);
    const { layers, kvHeads, headDim } = this.config;
    const make = () => Array.from({ length: layers }, () => this.backend.zeros([maxLen, kvHeads, headDim]));
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
      throw new InvalidArgument(`forward: ${T} new positions after ${past} cached ones exceed the cache's ${cache.maxLen}; allocate a longer cache`);
    }
    const rows = selectRows(input.logits ?? false, T);
    const tape = currentTape();

    const out = tidy((): Record<string, Tensor> => {
      const pos = this.positions(input.positions, past, T);
      const ownPos = pos !== input.positions;
      const x0 = inputsEmbeds ?? this.embed(inputIds!);
      if (cache && tape && x0.requiresGrad) {
        throw new InvalidArgument('forward: backward through a KV cache is not supported (the cache is written in place); ' +
          'run the forward without a cache while recording a tape');
      }
      let x = x0;
      for (let l = 0; l < c.layers; l++) {
        const prev = x;
        // a layer's intermediates go when it returns, not when the whole forward does (recorded ones
        // belong to the tape and stay)
        x = tidy(() => input.recompute && tape && !cache
          ? checkpoint((xl) => this.layer(l, xl, pos, T, past), [prev], layerTensors(this.weights.layers[l]))
          : this.layer(l, prev, pos, T, past, cache));
        // off the tape nothing reads the previous layer's output again
        if (!tape && prev !== x0) prev.dispose();
      }
      const hidden = F.rmsNorm(x, this.weights.norm, c.rmsEps);
      let logits: Tensor | undefined;
      let sel: Tensor | null = null;
      if (rows) {
        // the selected rows are gathered with embedding (differentiable w.r.t. its table, here hidden)
        sel = rows.length === T && rows.every((r, i) => r === i) ? null : this.backend.fromValues(rows, [rows.length], 'i32');
        logits = F.linear(sel ? F.embedding(sel, hidden) : hidden, this.weights.lmHead);
      }
      // rope's and embedding's backward rules read these after the forward: hand them to the tape so that
      // tidy leaves them alive (record disposes them at once when nothing requires grad)
      tape?.record({ name: 'decoder.keep', inputs: [x0], outputs: [], saved: [...(ownPos ? [pos] : []), ...(sel ? [sel] : [])], backward: () => [null] });
      return logits ? { hidden, logits } : { hidden };
    });
    if (cache) cache.length = past + T;
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
    const D = c.headDim;
    const eps = c.rmsEps;
    const heads = (t: Tensor, n: number) => F.reshape(t, [T, n, D]);

    const h = F.rmsNorm(x, w.inputNorm, eps);
    let q = heads(F.linear(h, w.q, w.qBias ?? undefined), c.heads);
    let k = heads(F.linear(h, w.k, w.kBias ?? undefined), c.kvHeads);
    const v = heads(F.linear(h, w.v, w.vBias ?? undefined), c.kvHeads);
    // Qwen3 normalises each head before rotating it
    if (w.qNorm) q = F.rmsNorm(q, w.qNorm, eps);
    if (w.kNorm) k = F.rmsNorm(k, w.kNorm, eps);
    q = F.rope(q, pos, this.invFreq);
    k = F.rope(k, pos, this.invFreq);

    const window = layerWindow(c, l) ?? undefined;
    let o: Tensor;
    if (cache) {
      F.kvAppend(cache.k[l], k, past);
      F.kvAppend(cache.v[l], v, past);
      o = F.attention(q, cache.k[l], cache.v[l], { kvLen: past + T, window });
    } else {
      o = F.attention(q, k, v, { window });
    }
    const x1 = F.add(x, F.linear(F.reshape(o, [T, c.heads * D]), w.o, w.oBias ?? undefined));
    const h2 = F.rmsNorm(x1, w.postNorm, eps);
    const act = F.swiglu(F.linear(h2, w.gate, w.gateBias ?? undefined), F.linear(h2, w.up, w.upBias ?? undefined));
    return F.add(x1, F.linear(act, w.down, w.downBias ?? undefined));
  }

  dispose() {
    this.invFreq.dispose();
    this.weights.dispose();
  }
}

/** The tensors of a layer's weights (the trainable among them get gradients through a checkpoint). */
function layerTensors(w: LayerWeights): Tensor[] {
  return Object.values(w).filter((t): t is Tensor => t instanceof Tensor);
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
