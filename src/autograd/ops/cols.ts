/**
 * Differentiable column ops along the last dim: splitCols and concatCols. Qwen3.5 splits a fused projection
 * [T, q | k | v] into its parts and a [T·heads, query | gate] tensor into halves. Both return new tensors
 * (copies, never views).
 */
import { InvalidArgument } from '../../errors';
import { MAX_CONCAT_COLS, checkSplitWidths, concatColsKernel, concatColsShape, sliceColsKernel, splitColsKernel } from '../../kernels/cols';
import type { Tensor } from '../../tensor/tensor';
import { runOp, runOp1 } from './op';

/**
 * x [..., Σ widths] cut along the last dim into parts [..., widths[i]], in order. One recorded op: its gradient
 * is the parts' gradients side by side (zeros for a part that got none).
 */
export function splitCols(x: Tensor, widths: readonly number[]): Tensor[] {
  checkSplitWidths('splitCols', { shape: x.shape, dtype: x.dtype }, widths);
  if (widths.length > MAX_CONCAT_COLS) {
    throw new InvalidArgument(
      `splitCols: ${widths.length} parts, at most ${MAX_CONCAT_COLS} (the backward joins them in one concat_cols); split in two steps`,
    );
  }
  return runOp(splitColsKernel, [x], { widths }, (parts) => ({
    backward: (gs) => {
      const zeros = gs.map((g, i) => (g ? null : x.backend.zeros(parts[i].shape)));
      const dx = runOp1(concatColsKernel, gs.map((g, i) => g ?? zeros[i]!), undefined);
      zeros.forEach((z) => z?.dispose());
      return [dx];
    },
  }));
}

/**
 * Concatenation along the last dim of 1 to 6 f32 tensors whose leading dims agree: [..., Σ w_i]. Each input's
 * gradient is its columns of the output's.
 */
export function concatCols(xs: readonly Tensor[]): Tensor {
  // validated here too, so that an empty list gets the concat message rather than runOp's generic one
  const metas = xs.map((t) => ({ shape: t.shape, dtype: t.dtype }));
  concatColsShape('concat_cols', metas);
  const starts: number[] = [];
  let at = 0;
  for (const x of xs) starts.push(at), (at += x.shape[x.shape.length - 1]);
  return runOp1(concatColsKernel, xs, undefined, () => ({
    backward: ([g], needs) =>
      xs.map((x, i) => (g && needs[i] ? runOp1(sliceColsKernel, [g], { start: starts[i], width: x.shape[x.shape.length - 1] }) : null)),
  }));
}
