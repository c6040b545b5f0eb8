/**
 * Differentiable reductions. Results over all elements have shape [1] (a scalar the tape can seed);
 * results over the last dim have the leading shape ([1] for a vector).
 */
import { type ReduceAttrs, reduceBackwardKernel, reduceKernel } from '../../kernels/reduce';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

function reduce(x: Tensor, attrs: ReduceAttrs): Tensor {
  return runOp1(reduceKernel, [x], attrs, () => ({
    backward: ([g]) => {
      const inputs = attrs.op === 'sumsq' ? [g!, x] : [g!];
      return [runOp1(reduceBackwardKernel, inputs, { ...attrs, shape: x.shape })];
    },
  }));
}

/** Sum of every element, [1]. */
export const sum = (x: Tensor) => reduce(x, { op: 'sum', axis: 'all' });
/** Mean of every element, [1] (NaN for an empty tensor, as in torch). */
export const mean = (x: Tensor) => reduce(x, { op: 'mean', axis: 'all' });
/** Sum of squares of every element, [1] (the squared 2-norm). */
export const sumSquares = (x: Tensor) => reduce(x, { op: 'sumsq', axis: 'all' });
/** Sum over the last dim: [..., C] -> [...]. */
export const sumLastDim = (x: Tensor) => reduce(x, { op: 'sum', axis: 'last' });
/** Mean over the last dim: [..., C] -> [...]. */
export const meanLastDim = (x: Tensor) => reduce(x, { op: 'mean', axis: 'last' });
