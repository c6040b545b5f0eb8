/**
 * AdamW over several links at once (the outer loop trains three to six outer links together): gradients
 * are gathered per link, the global norm is clipped over all of them together (torch's
 * clip_grad_norm_ over every parameter), then each link's flat buffer takes its AdamW update. Decay
 * groups follow upstream: matrices decay, biases and LayerNorm parameters do not (FlatParams.decayMask).
 */
import { F } from '../autograd';
import type { FlatParams } from '../autograd/params';
import type { Tensor } from '../tensor/tensor';

export interface LinkOptimizerOptions {
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
  /** Clip the global gradient norm to this (Infinity: no clipping). */
  maxGradNorm?: number;
}

export class LinkOptimizer {
  /** Steps taken (AdamW bias correction uses t + 1 for the next one). */
  t = 0;
  readonly opts: Required<LinkOptimizerOptions>;

  constructor(readonly params: readonly FlatParams[], opts: LinkOptimizerOptions = {}) {
    this.opts = { ...F.ADAMW_DEFAULTS, maxGradNorm: 1, ...opts };
  }

  zeroGrad() {
    for (const p of this.params) p.zeroGrad();
  }

  /**
   * Moves the parameters' .grad (what the backward passes since the last gather accumulated) into the flat
   * buffers, adding to what is there, multiplied by `scale` (upstream rescales a batch by batch / valid
   * when samples were skipped).
   */
  gather(scale = 1) {
    for (const p of this.params) {
      if (scale !== 1) {
        for (const t of p.list()) {
          if (!t.grad) continue;
          const s = F.scale(t.grad, scale);
          t.grad.dispose();
          t.grad = s;
        }
      }
      p.gatherGrads({ accumulate: true });
    }
  }

  /** Clip + AdamW at `lr` over gradients already gathered; returns the pre-clip global norm, [1] (caller disposes). */
  step(lr: number): Tensor {
    const { beta1, beta2, eps, weightDecay, maxGradNorm } = this.opts;
    const norm = F.clipGradNorm(this.params.map((p) => p.grad), maxGradNorm);
    this.t++;
    for (const p of this.params) F.adamwStep(p.data, p.grad, p.m, p.v, { lr, t: this.t, beta1, beta2, eps, weightDecay, decayMask: p.decayMask });
    return norm;
  }
}
