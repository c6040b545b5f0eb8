import { softmaxBackwardKernel, softmaxKernel } from '../../kernels/softmax';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

function softmaxOp(x: Tensor, log: boolean): Tensor {
  const attrs = { log };
  return runOp1(softmaxKernel, [x], attrs, (y) => ({
    // Both backwards need only the output, which the tape keeps alive until it is disposed.
    backward: ([g]) => [runOp1(softmaxBackwardKernel, [y, g!], attrs)],
  }));
}

/** softmax over the last dim (row max subtracted, so large logits are safe). */
export function softmax(x: Tensor): Tensor {
  return softmaxOp(x, false);
}

/** log-softmax over the last dim: x − logsumexp(x). */
export function logSoftmax(x: Tensor): Tensor {
  return softmaxOp(x, true);
}
