/**
 * Optimizer steps, in place and never recorded on a tape: global gradient-norm clipping, one AdamW
 * update over flat buffers, and AdamW over FlatParams (the one optimizer training runs). Nothing here
 * reads back: norms stay on the device as [1] tensors the host may read later.
 */
import { InvalidArgument, NonFiniteLoss } from '../../errors';
import { type AdamWHyper, adamwKernel } from '../../kernels/adamw';
import { clipGradNormKernel } from '../../kernels/reduce';
import type { Backend } from '../../tensor/backend';
import type { Tensor } from '../../tensor/tensor';
import type { FlatParams } from '../params';
import { scale as scaleOp } from './elementwise';

/**
 * torch.nn.utils.clip_grad_norm_: scales every gradient in place by min(1, maxNorm / (total + 1e-6)),
 * total = sqrt(sum of squares over all of them). Returns the total before clipping, [1], on the device
 * of the first gradient.
 *
 * Gradients on several backends (links of a system placed one role per device) are clipped together:
 * each backend's norm is read back (synchronously: cpu and cuda), the global coefficient c is formed on
 * the host, and each backend scales its own by c, as its kernel's coefficient maxNorm_b / (norm_b + 1e-6)
 * with maxNorm_b = c (norm_b + 1e-6) (within an f32 rounding of c). A non-finite global norm leaves the
 * gradients unscaled there (the backend that holds the NaN or Inf keeps it).
 */
export function clipGradNorm(grads: Tensor[], maxNorm: number): Tensor {
  if (!grads.length) throw new InvalidArgument('clipGradNorm: no gradients given');
  const first = grads[0].backend;
  const groups = new Map<Backend, Tensor[]>();
  for (const g of grads) groups.set(g.backend, [...(groups.get(g.backend) ?? []), g]);
  if (groups.size === 1) return first.run(clipGradNormKernel, grads, { maxNorm })[0];
  if (!(maxNorm > 0)) throw new InvalidArgument(`clip_grad_norm: maxNorm must be positive, got ${maxNorm}`);
  const norms = [...groups].map(([be, gs]) => {
    if (!be.readBytesSync)
      throw new InvalidArgument(
        `clipGradNorm: gradients on ${be.name} cannot be clipped with others on other backends (no synchronous read)`,
      );
    const n = be.run(clipGradNormKernel, gs, { maxNorm: Infinity })[0];
    const bytes = be.readBytesSync(n);
    n.dispose();
    return new Float32Array(bytes.buffer, bytes.byteOffset, 1)[0];
  });
  const total = Math.sqrt(norms.reduce((a, n) => a + n * n, 0));
  const coef = Math.min(1, maxNorm / (total + 1e-6));
  if (coef < 1 && Number.isFinite(total)) {
    [...groups.values()].forEach((gs, i) => gs[0].backend.run(clipGradNormKernel, gs, { maxNorm: coef * (norms[i] + 1e-6) })[0].dispose());
  }
  return first.fromValues([total], [1]);
}

export interface AdamWStepOptions {
  lr: number;
  /** Step number from 1 (bias correction). */
  t: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  weightDecay?: number;
  /** Per-element multiplier of the weight decay (0 = no decay); without it every element decays. */
  decayMask?: Tensor;
}

/** Hyperparameter defaults: upstream's AdamW (0.9, 0.95), torch's eps. */
const ADAMW_DEFAULTS = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0 } as const;

/** One AdamW update in place over flat params, grads, m and v of one shape (torch.optim.AdamW semantics). */
export function adamwStep(params: Tensor, grads: Tensor, m: Tensor, v: Tensor, opts: AdamWStepOptions) {
  const h: AdamWHyper = { ...ADAMW_DEFAULTS, ...opts };
  const inputs = opts.decayMask ? [params, grads, m, v, opts.decayMask] : [params, grads, m, v];
  params.backend.run(adamwKernel, inputs, { lr: h.lr, t: h.t, beta1: h.beta1, beta2: h.beta2, eps: h.eps, weightDecay: h.weightDecay });
}

export interface AdamWOptions {
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Applied where FlatParams' decay mask is 1 (upstream: 0.0). */
  weightDecay?: number;
  /** Clip the global gradient norm to this before each update (upstream: 1.0; Infinity: no clipping). */
  maxGradNorm?: number;
}

/**
 * AdamW over one or several FlatParams at once (the outer loop trains three to six outer links together,
 * the tiny agents a whole decoder): gradients are gathered per set, the global norm is clipped over all
 * of them together (torch's clip_grad_norm_ over every parameter), then each set's flat buffer takes its
 * AdamW update. Decay groups follow upstream: matrices decay, biases and norm parameters do not
 * (FlatParams.decayMask). The moments live in the FlatParams, so a checkpoint restores them and `t`.
 *
 *   opt.zeroGrad(); ...backward passes...; opt.gather(); const norm = opt.step(lr);
 */
export class AdamW {
  /** Steps taken (bias correction uses t + 1 for the next one). */
  t = 0;
  readonly opts: Required<AdamWOptions>;

  constructor(readonly params: readonly FlatParams[], opts: AdamWOptions = {}) {
    this.opts = { ...ADAMW_DEFAULTS, maxGradNorm: 1, ...opts };
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
          const s = scaleOp(t.grad, scale);
          t.grad.dispose();
          t.grad = s;
        }
      }
      p.gatherGrads({ accumulate: true });
    }
  }

  /** Clip + AdamW at `lr` over gradients already gathered; returns the pre-clip global norm, [1] (caller disposes). */
  step(lr: number): Tensor {
    const norm = clipGradNorm(this.params.map((p) => p.grad), this.opts.maxGradNorm);
    this.update(lr);
    return norm;
  }

  /**
   * step() for training runs: the clipped norm is read back before the update (the step's one readback), and
   * a NaN or infinite norm throws NonFiniteLoss with the parameters and moments as they were (and `t`
   * unchanged), so that nothing non-finite is ever applied or saved. Returns the pre-clip norm.
   */
  async checkedStep(lr: number, where: string): Promise<number> {
    const n = clipGradNorm(this.params.map((p) => p.grad), this.opts.maxGradNorm);
    const norm = (await n.read())[0]!;
    n.dispose();
    if (!Number.isFinite(norm)) {
      throw new NonFiniteLoss(`${where}: the gradient norm is ${norm}; no update was made (the links are as after the step before)`);
    }
    this.update(lr);
    return norm;
  }

  private update(lr: number) {
    const { beta1, beta2, eps, weightDecay } = this.opts;
    this.t++;
    for (const p of this.params)
      adamwStep(p.data, p.grad, p.m, p.v, { lr, t: this.t, beta1, beta2, eps, weightDecay, decayMask: p.decayMask });
  }
}
