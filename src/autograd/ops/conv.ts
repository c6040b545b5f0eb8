import { InvalidArgument } from '../../errors';
import { causalConv1dBackwardKernel, causalConv1dKernel } from '../../kernels/conv1d';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

/**
 * Causal depthwise conv1d over x [T, C] with w [C, K] (frozen), the K − 1 positions before x taken from `state`
 * [K − 1, C] when given, else zeros (kernels/conv1d). The gradient reaches x.
 */
export function causalConv1d(x: Tensor, w: Tensor, state?: Tensor): Tensor {
  if (w.requiresGrad || state?.requiresGrad) {
    throw new InvalidArgument('causalConv1d: the weights and a cached state are frozen here (the gradient reaches x only); set requiresGrad = false on them');
  }
  return runOp1(causalConv1dKernel, state ? [x, w, state] : [x, w], undefined, () => ({
    backward: ([g]) => [runOp1(causalConv1dBackwardKernel, [g!, w], undefined), null, ...(state ? [null] : [])],
  }));
}
