/** CPU references for softmax and log-softmax over the last dim of [rows, cols], forward and backward. */
import type { FloatArray } from '../kernel';

/** y = softmax(x) (or log-softmax with `log`) row by row; the row max is subtracted first. */
export function softmaxForward(x: FloatArray, rows: number, cols: number, log: boolean, y: FloatArray) {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let m = -Infinity;
    for (let c = 0; c < cols; c++) m = Math.max(m, x[o + c]);
    let s = 0;
    for (let c = 0; c < cols; c++) s += Math.exp(x[o + c] - m);
    if (log) {
      const ls = Math.log(s);
      for (let c = 0; c < cols; c++) y[o + c] = x[o + c] - m - ls;
    } else {
      for (let c = 0; c < cols; c++) y[o + c] = Math.exp(x[o + c] - m) / s;
    }
  }
}

/**
 * Backward from the forward output y: softmax dx = y·(dy − Σ dy·y); log-softmax dx = dy − exp(y)·Σ dy.
 */
export function softmaxBackward(y: FloatArray, dy: FloatArray, rows: number, cols: number, log: boolean, dx: FloatArray) {
  for (let r = 0; r < rows; r++) {
    const o = r * cols;
    let s = 0;
    for (let c = 0; c < cols; c++) s += log ? dy[o + c] : dy[o + c] * y[o + c];
    for (let c = 0; c < cols; c++) {
      dx[o + c] = log ? dy[o + c] - Math.exp(y[o + c]) * s : y[o + c] * (dy[o + c] - s);
    }
  }
}
