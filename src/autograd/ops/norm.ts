import { DTypeMismatch } from '../../errors';
import { layernormBackwardKernel, layernormKernel } from '../../kernels/layernorm';
import { normParamGradKernel, rmsnormBackwardKernel, rmsnormKernel } from '../../kernels/rmsnorm';
import type { Tensor } from '../../tensor/tensor';
import { runOp, runOp1 } from './op';

function checkTrainable(op: string, what: string, p: Tensor | null) {
  if (p?.requiresGrad && p.dtype !== 'f32') {
    throw new DTypeMismatch(
      `${op}: ${what} requires grad but is ${p.dtype}; trainable parameters must be f32 (keep ${p.dtype} ones frozen, requiresGrad = false)`,
    );
  }
}

/**
 * RMSNorm over the last dim: x / sqrt(mean(x²) + eps) · (offset + w). `offset: 1` is Gemma's (1 + w).
 * w may be f32/f16/bf16 when frozen; a trainable w must be f32.
 */
export function rmsNorm(x: Tensor, w: Tensor, eps: number, opts: { offset?: number } = {}): Tensor {
  const offset = opts.offset ?? 0;
  checkTrainable('rmsNorm', 'the weight', w);
  return runOp1(rmsnormKernel, [x, w], { eps, offset }, () => ({
    backward: ([g], [nx, nw]) => {
      const outs = runOp(rmsnormBackwardKernel, nx ? [x, w, g!] : [x], { eps, offset, dx: nx });
      const stats = outs[outs.length - 1];
      const dw = nw ? runOp1(normParamGradKernel, [g!, x, stats], { gamma: true, beta: false }) : null;
      stats.dispose();
      return [nx ? outs[0] : null, dw];
    },
  }));
}

/** LayerNorm over the last dim with PyTorch nn.LayerNorm semantics; gamma/beta null turn the affine part off. */
export function layerNorm(x: Tensor, gamma: Tensor | null, beta: Tensor | null, eps = 1e-5): Tensor {
  checkTrainable('layerNorm', 'gamma', gamma);
  checkTrainable('layerNorm', 'beta', beta);
  const inputs = [x, gamma, beta].filter((t): t is Tensor => t !== null);
  return runOp1(layernormKernel, inputs, { eps, gamma: !!gamma, beta: !!beta }, () => ({
    backward: ([g], needs) => {
      const nx = needs[0];
      const ng = !!gamma && needs[1];
      const nb = !!beta && needs[gamma ? 2 : 1];
      const outs = runOp(layernormBackwardKernel, nx ? [x, g!, ...(gamma ? [gamma] : [])] : [x], { eps, gamma: !!gamma, dx: nx });
      const stats = outs[outs.length - 1];
      const pg = ng || nb ? runOp(normParamGradKernel, [g!, x, stats], { gamma: ng, beta: nb }) : [];
      stats.dispose();
      const grads: (Tensor | null)[] = [nx ? outs[0] : null];
      if (gamma) grads.push(ng ? pg[0] : null);
      if (beta) grads.push(nb ? pg[ng ? 1 : 0] : null);
      return grads;
    },
  }));
}
