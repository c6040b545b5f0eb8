/**
 * The decoder's inference path for one-token steps (decode and latent steps), when nothing records a tape: each layer
 * is a handful of fused dispatches (kernels/fused) instead of one per op, with the same numbers within f32 rounding.
 *
 *   attention layer: norm + QKV (+ biases)  ·  q/k norm + RoPE + KV append  ·  attention (split-K adds its merge)
 *                    ·  o-projection (+ Qwen3.5's output gate) + residual  ·  norm + gate/up + SwiGLU/GeGLU
 *                    ·  down-projection + residual                                        = 6 (7 with split-K)
 *   Gemma 3 adds one: the attention side's sandwich norm and residual fold into the gate/up product, the
 *   feed-forward side's take a norm-add dispatch                                          = 7 (8)
 *   Gated DeltaNet layer: norm + q|k|v, z, b, a  ·  conv + L2 norms + gates + delta rule + gated norm
 *                    ·  out-projection + residual  ·  MLP as above                         = 5
 *
 * A layer whose weights a binding cannot hold whole (split across bindings), or whose heads exceed what the fused
 * kernels hold, takes the differentiable path; the choice is made once per layer.
 */
import { F } from '../autograd';
import {
  DELTA_STEP_MAX_DIM,
  type FusedGemvAttrs,
  decodeAttentionKernel,
  deltaStepKernel,
  fusedGemvKernel,
  normAddKernel,
  ropeAppendKernel,
} from '../kernels/fused';
import type { Backend } from '../tensor/backend';
import { tidy, untrack } from '../tensor/scope';
import { Tensor } from '../tensor/tensor';
import { type DecoderConfig, layerWindow } from './config';
import { BatchCache, type KVCache } from './decoder';
import { type DeltaNetLayerWeights, type LayerWeights, type MlpWeights, isDeltaNetLayer, type DecoderWeights } from './weights';

/** One step of the fused path: the cache, the rows' positions and cache rows, and the most keys a row attends to. */
export interface StepInput {
  cache: KVCache | BatchCache;
  /** i32 [3, M]: per row its RoPE position, the cache row it writes (the stacked k/v's row index), and its sequence's first cache row. */
  rows: Tensor;
  maxKeys: number;
}

/** Per layer: what the fused kernels need beyond the loaded weights (concatenated biases, the decay's constants). */
interface Prepared {
  qkvBias: Tensor | null;
  gateUpBias: Tensor | null;
  /** Gated DeltaNet: [2, valueHeads] = (−exp(A_log), dt_bias). */
  gates: Tensor | null;
}

/** True when every storage of `t` is one binding (WebGPU tensors may be split across several). */
const whole = (t: Tensor | null) => !t || t.storage.kind !== 'webgpu' || t.storage.chunks.length === 1;

export class FusedPath {
  private readonly prepared: (Prepared | null)[];

  constructor(
    private readonly config: DecoderConfig,
    private readonly weights: DecoderWeights,
    private readonly invFreq: Tensor,
    private readonly invFreqLocal: Tensor,
  ) {
    this.prepared = weights.layers.map((w) => (this.fits(w) ? this.prepare(w) : null));
  }

  /** Whether the path can run on `backend` at all (CUDA has no fused kernels yet). */
  static supports(backend: Backend): boolean {
    return backend.kind === 'webgpu' || backend.kind === 'cpu';
  }

  /** Whether layer `l` runs fused. */
  has(l: number): boolean {
    return this.prepared[l] !== null;
  }

  /** How many layers run fused (bench and tests report it). */
  get fusedLayers(): number {
    return this.prepared.filter(Boolean).length;
  }

  private fits(w: LayerWeights | DeltaNetLayerWeights): boolean {
    const tensors = [...Object.values(w), ...(isDeltaNetLayer(w) ? Object.values(w.deltaNet) : [])].filter(
      (t): t is Tensor => t instanceof Tensor,
    );
    if (!tensors.every(whole)) return false;
    const d = this.config.deltaNet;
    if (isDeltaNetLayer(w) && d && (d.keyDim > DELTA_STEP_MAX_DIM || d.valueDim > DELTA_STEP_MAX_DIM)) return false;
    // the sandwich's gate/up product binds x, o, two norms, gate, up and two outputs: no room for biases
    if (this.config.sandwichNorms && (w.gateBias || w.upBias)) return false;
    return true;
  }

  private prepare(w: LayerWeights | DeltaNetLayerWeights): Prepared {
    let out: Prepared = { qkvBias: null, gateUpBias: null, gates: null };
    tidy(() => {
      // they stand in for weights (the biases, A_log and dt_bias they were made of): counted as weights
      const keep = (t: Tensor | null) => {
        if (t) {
          untrack(t);
          this.backend.markWeight?.(t);
        }
        return t;
      };
      const concat = (parts: (Tensor | null)[], sizes: number[]) => {
        if (parts.every((p) => !p)) return null;
        const cols = parts.map((p, i) => F.reshape(p ?? this.backend.zeros([sizes[i]]), [sizes[i], 1]));
        return F.reshape(F.concatRows(cols), [sizes.reduce((a, b) => a + b, 0)]);
      };
      const inter = w.gate.shape[0];
      const gateUpBias = keep(concat([w.gateBias, w.upBias], [inter, inter]));
      if (isDeltaNetLayer(w)) {
        const dn = w.deltaNet;
        const n = dn.aLog.shape[0];
        const gates = F.concatRows([F.reshape(F.scale(F.exp(dn.aLog), -1), [1, n]), F.reshape(dn.dtBias, [1, n])]);
        out = { qkvBias: null, gateUpBias, gates: keep(gates) };
        return;
      }
      const rows = [w.q.shape[0], w.k.shape[0], w.v.shape[0]];
      out = { qkvBias: keep(concat([w.qBias, w.kBias, w.vBias], rows)), gateUpBias, gates: null };
    });
    return out;
  }

  private get backend(): Backend {
    return this.weights.backend;
  }

  private gemv(inputs: Tensor[], attrs: FusedGemvAttrs): Tensor[] {
    return this.backend.run(fusedGemvKernel, inputs, attrs);
  }

  /**
   * Layer `l` on x [M, hidden], one token of each step row: x's next value. `step.rows` says each row's position and
   * cache rows (StepRows); a KVCache holds one sequence (M = 1), a BatchCache one per row.
   */
  layer(l: number, x: Tensor, step: StepInput): Tensor {
    const w = this.weights.layers[l];
    const p = this.prepared[l]!;
    const c = this.config;
    const norm = { kind: 'rms' as const, eps: c.rmsEps, offset: c.normOffset };
    let attn: Tensor;
    let gate: { tensor: Tensor; attrs: FusedGemvAttrs['inputGate'] } | null = null;
    let oWeight: Tensor;
    let oBias: Tensor | null = null;
    const { cache } = step;
    const M = x.shape[0];
    if (isDeltaNetLayer(w)) {
      attn = this.deltaNet(l, w, p, x, step);
      oWeight = w.deltaNet.out;
    } else {
      const [qkv] = this.gemv([x, w.inputNorm, w.q, w.k, w.v, ...(p.qkvBias ? [p.qkvBias] : [])], { norm, weights: 3, bias: !!p.qkvBias });
      const D = c.headDim;
      const inv = layerWindow(c, l) !== null ? this.invFreqLocal : this.invFreq;
      const [ck, cv] = [cache.k[l]!, cache.v[l]!];
      const [q] = this.backend.run(ropeAppendKernel, [qkv, ...(w.qNorm && w.kNorm ? [w.qNorm, w.kNorm] : []), step.rows, inv, ck, cv], {
        heads: c.heads,
        kvHeads: c.kvHeads,
        headDim: D,
        gated: c.attnOutputGate,
        qkNorm: !!(w.qNorm && w.kNorm),
        eps: c.rmsEps,
        offset: c.normOffset,
      });
      const window = layerWindow(c, l) ?? undefined;
      const [o] = this.backend.run(decodeAttentionKernel, [q, ck, cv, step.rows], {
        window, scale: c.attnScale ?? undefined, maxKeys: Math.min(step.maxKeys, window ?? Infinity),
      });
      attn = this.backend.reshape(o, [M, c.heads * D]);
      if (c.attnOutputGate) {
        gate = { tensor: qkv, attrs: { ld: qkv.shape[1], head: D, headStride: 2 * D, offset: D } };
      }
      oWeight = w.o;
      oBias = w.oBias;
    }
    const gateIn = gate ? [gate.tensor] : [];
    const biasIn = oBias ? [oBias] : [];
    if (c.sandwichNorms) {
      // Gemma: x1 = x + norm(o·W), normalised again for the MLP, in the gate/up product's prologue
      const [proj] = this.gemv([attn, ...gateIn, oWeight, ...biasIn], { inputGate: gate?.attrs, weights: 1, bias: !!oBias });
      const [h, x1] = this.gemv([x, proj, w.postNorm, w.preFfnNorm!, w.gate, w.up], {
        preAdd: { eps: c.rmsEps, offset: c.normOffset }, norm, weights: 2, glu: c.mlpAct,
      });
      const [mlp] = this.gemv([h, w.down, ...(w.downBias ? [w.downBias] : [])], { weights: 1, bias: !!w.downBias });
      return this.backend.run(normAddKernel, [mlp, w.postFfnNorm!, x1], { eps: c.rmsEps, offset: c.normOffset })[0];
    }
    const [x1] = this.gemv([attn, ...gateIn, oWeight, ...biasIn, x], { inputGate: gate?.attrs, weights: 1, bias: !!oBias, residual: true });
    return this.mlp(w, p, x1);
  }

  /** norm + gate/up + GLU, then down + residual. */
  private mlp(w: MlpWeights, p: Prepared, x1: Tensor): Tensor {
    const c = this.config;
    const [h] = this.gemv([x1, w.postNorm, w.gate, w.up, ...(p.gateUpBias ? [p.gateUpBias] : [])], {
      norm: { kind: 'rms', eps: c.rmsEps, offset: c.normOffset }, weights: 2, glu: c.mlpAct, bias: !!p.gateUpBias,
    });
    return this.gemv([h, w.down, ...(w.downBias ? [w.downBias] : []), x1], { weights: 1, bias: !!w.downBias, residual: true })[0];
  }

  /**
   * Logits [M, vocab] of the post-norm hidden states through the LM head, one GEMV whose rows do not depend on M (the
   * plain matmul picks its path by M); null when the head is split across bindings.
   */
  lmHead(hidden: Tensor): Tensor | null {
    const head = this.weights.lmHead;
    if (!whole(head)) return null;
    return this.gemv([hidden, head], { weights: 1 })[0];
  }

  /** The Gated DeltaNet of one token per row: its output before out_proj [M, valueHeads·valueDim]; the states advance. */
  private deltaNet(l: number, w: DeltaNetLayerWeights, p: Prepared, x: Tensor, step: StepInput): Tensor {
    const c = this.config;
    const d = c.deltaNet!;
    const dn = w.deltaNet;
    const C = 2 * d.keyHeads * d.keyDim + d.valueHeads * d.valueDim;
    const [proj] = this.gemv([x, w.inputNorm, dn.qkv, dn.z, dn.b, dn.a], {
      norm: { kind: 'rms', eps: c.rmsEps, offset: c.normOffset },
      weights: 4,
    });
    const conv = this.backend.reshape(dn.conv, [C, d.convKernel]);
    const attrs = {
      keyHeads: d.keyHeads,
      valueHeads: d.valueHeads,
      keyDim: d.keyDim,
      valueDim: d.valueDim,
      convKernel: d.convKernel,
      eps: c.rmsEps,
    };
    const { cache } = step;
    if (cache instanceof BatchCache) {
      // the stacked rings and states are updated in place
      return this.backend.run(deltaStepKernel, [proj, conv, cache.conv[l]!, cache.ssm[l]!, p.gates!, dn.norm, step.rows], {
        ...attrs,
        rowStride: cache.stride,
      })[0];
    }
    const fresh = (shape: number[]) => {
      const t = this.backend.zeros(shape);
      untrack(t);
      return t;
    };
    const convState = cache.conv[l] ?? fresh([d.convKernel - 1, C]);
    const state = cache.ssm[l] ?? fresh([d.valueHeads, d.keyDim, d.valueDim]);
    const [y, convNext] = this.backend.run(deltaStepKernel, [proj, conv, convState, state, p.gates!, dn.norm], attrs);
    untrack(convNext);
    // the state was updated in place: the cache keeps it and takes the conv's next rows
    if (!cache.conv[l]) convState.dispose();
    cache.advanceStates(l, convNext, state);
    return y;
  }

  dispose() {
    for (const p of this.prepared) {
      p?.qkvBias?.dispose();
      p?.gateUpBias?.dispose();
      p?.gates?.dispose();
    }
  }
}
