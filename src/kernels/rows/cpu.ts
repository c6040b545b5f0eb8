/**
 * CPU reference for the row ops: every one of them is a copy of whole rows (dim 0 slices of
 * `rowElems` contiguous elements) from one tensor into another.
 */
import type { FloatArray } from '../kernel';

/** dst rows [dstRow, dstRow + n) = src rows [srcRow, srcRow + n). */
export function copyRows(src: FloatArray, srcRow: number, dst: FloatArray, dstRow: number, n: number, rowElems: number) {
  for (let i = 0; i < n * rowElems; i++) dst[dstRow * rowElems + i] = src[srcRow * rowElems + i];
}

/** out = x rows [start, start + out rows). */
export function sliceRowsForward(x: FloatArray, start: number, rowElems: number, out: FloatArray) {
  copyRows(x, start, out, 0, out.length / Math.max(rowElems, 1), rowElems);
}

/** out = the inputs' rows one after another; `rows[i]` rows of input i. */
export function concatRowsForward(xs: readonly FloatArray[], rows: readonly number[], rowElems: number, out: FloatArray) {
  let at = 0;
  xs.forEach((x, i) => {
    copyRows(x, 0, out, at, rows[i], rowElems);
    at += rows[i];
  });
}

/** out = zeros with g's rows placed at row `start` (the backward of sliceRows). */
export function placeRowsForward(g: FloatArray, start: number, gRows: number, rowElems: number, out: FloatArray) {
  out.fill(0);
  copyRows(g, 0, out, start, gRows, rowElems);
}
