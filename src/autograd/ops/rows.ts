/**
 * Differentiable row ops along dim 0: sliceRows and concatRows. The outer loop builds
 * `embed(prefix) ⊕ latents ⊕ embed(suffix)` with concatRows and trims latents with sliceRows;
 * gradients reach the latents through both. Both return new tensors (copies, never views).
 */
import { concatRowsKernel, concatRowsShape, placeRowsKernel, sliceRowsKernel } from '../../kernels/rows';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

/** Rows [start, start + n) of x (rank ≥ 1, rows along dim 0): [n, ...rest]. The gradient is placed into zeros shaped like x. */
export function sliceRows(x: Tensor, start: number, n: number): Tensor {
  return runOp1(sliceRowsKernel, [x], { start, n }, () => ({
    backward: ([g]) => [g ? runOp1(placeRowsKernel, [g], { start, rows: x.shape[0] }) : null],
  }));
}

/**
 * Concatenation along dim 0 of f32 tensors whose trailing shapes agree: [ΣR_i, ...rest]. Zero-row
 * inputs are allowed (they add nothing and get a zero-row gradient); each input's gradient is its slice.
 */
export function concatRows(xs: readonly Tensor[]): Tensor {
  // validated here too, so that an empty list gets the concat message rather than runOp's generic one
  concatRowsShape('concat_rows', xs.map((t) => ({ shape: t.shape, dtype: t.dtype })));
  const starts: number[] = [];
  let at = 0;
  for (const x of xs) starts.push(at), (at += x.shape[0]);
  return runOp1(concatRowsKernel, xs, undefined, () => ({
    backward: ([g], needs) => xs.map((x, i) => (g && needs[i] ? runOp1(sliceRowsKernel, [g], { start: starts[i], n: x.shape[0] }) : null)),
  }));
}
