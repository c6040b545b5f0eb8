import { InvalidArgument } from '../../errors';
import { causalConv1dBackwardKernel, causalConv1dBackwardWKernel, causalConv1dKernel } from '../../kernels/conv1d';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

/**
 * Causal depthwise conv1d over x [T, C] with w [C, K], the K − 1 positions before x taken from `state`
 * [K − 1, C] when given, else zeros (kernels/conv1d). The gradient reaches x and w (a trainable decoder's); a
 * cached state is not trained through.
 */
export function causalConv1d(x: Tensor, w: Tensor, state?: Tensor): Tensor {
  if (state?.requiresGrad) {
    throw new InvalidArgument(
      'causalConv1d: a cached state is not trained through (the gradient reaches x and w); set requiresGrad = false on it',
    );
  }
  const K = w.shape[1];
  return runOp1(causalConv1dKernel, state ? [x, w, state] : [x, w], undefined, () => ({
    backward: ([g], [nx, nw]) => [
      nx ? runOp1(causalConv1dBackwardKernel, [g!, w], undefined) : null,
      nw ? runOp1(causalConv1dBackwardWKernel, state ? [g!, x, state] : [g!, x], { k: K }) : null,
      ...(state ? [null] : []),
    ],
  }));
}
