/**
 * CPU references for reductions (sum, mean, sum of squares) over all elements or the last dim,
 * their backward (broadcast of the output gradient), and global gradient-norm clipping.
 * Accumulation is in JS numbers (f64), so the f64 backend stays exact.
 */
import type { FloatArray } from '../kernel';

/** out[r] = alpha * sum_c f(x[r * cols + c]), f = identity or square; `rows * cols` = x.length. */
export function reduceRowsForward(x: FloatArray, cols: number, square: boolean, alpha: number, out: FloatArray) {
  const rows = out.length;
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) {
      const v = x[r * cols + c];
      s += square ? v * v : v;
    }
    out[r] = s * alpha;
  }
}

/** dx[i] = alpha * g[floor(i / cols)] * (square ? 2 x[i] : 1). */
export function reduceRowsBackward(g: FloatArray, x: FloatArray | null, cols: number, alpha: number, dx: FloatArray) {
  for (let i = 0; i < dx.length; i++) {
    const gi = alpha * g[Math.floor(i / cols)];
    dx[i] = x ? gi * 2 * x[i] : gi;
  }
}

/**
 * torch.nn.utils.clip_grad_norm_: total = sqrt(sum of squares of every element), then every gradient
 * is scaled in place by min(1, maxNorm / (total + 1e-6)). Returns the total norm before clipping.
 */
export function clipGradNormCpu(grads: FloatArray[], maxNorm: number): number {
  let ss = 0;
  for (const g of grads) for (let i = 0; i < g.length; i++) ss += g[i] * g[i];
  const total = Math.sqrt(ss);
  const coef = Math.min(1, maxNorm / (total + 1e-6));
  // torch multiplies even when coef is 1, so a NaN norm spreads NaN into every gradient: same here
  for (const g of grads) for (let i = 0; i < g.length; i++) g[i] *= coef;
  return total;
}
