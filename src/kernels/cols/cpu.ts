/**
 * CPU reference for the column ops over the last dimension of an f32 tensor seen as rows × columns:
 * sliceCols keeps columns [start, start + width) of every row, concatCols lays the inputs' rows side by side
 * (input i fills `widths[i]` columns of each output row, in order). Each is the other's backward.
 */
import type { FloatArray } from '../kernel';

/** out [R, width] = x [R, C] columns [start, start + width). */
export function sliceColsForward(x: FloatArray, out: FloatArray, R: number, C: number, start: number, width: number) {
  for (let r = 0; r < R; r++) {
    for (let j = 0; j < width; j++) out[r * width + j] = x[r * C + start + j];
  }
}

/** out [R, Σ widths] = xs[0] [R, widths[0]] | xs[1] [R, widths[1]] | ... */
export function concatColsForward(xs: readonly FloatArray[], widths: readonly number[], out: FloatArray, R: number) {
  const C = widths.reduce((a, b) => a + b, 0);
  for (let r = 0; r < R; r++) {
    let at = 0;
    xs.forEach((x, i) => {
      const w = widths[i];
      for (let j = 0; j < w; j++) out[r * C + at + j] = x[r * w + j];
      at += w;
    });
  }
}
