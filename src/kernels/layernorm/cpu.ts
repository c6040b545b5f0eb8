/**
 * CPU references for LayerNorm over the last dimension with PyTorch nn.LayerNorm semantics:
 * y = (x − mean) / sqrt(var + eps) · γ + β, var biased (divided by C). γ and β are optional.
 * Exact under Float64Array.
 */
import type { FloatArray } from '../kernel';

/** Mean and 1/sqrt(biased var + eps) of one row (two passes: no E[x²] − mean² cancellation). */
function rowStats(x: FloatArray, base: number, cols: number, eps: number): [number, number] {
  let s = 0;
  for (let c = 0; c < cols; c++) s += x[base + c];
  const mean = s / cols;
  let v = 0;
  for (let c = 0; c < cols; c++) v += (x[base + c] - mean) * (x[base + c] - mean);
  return [mean, 1 / Math.sqrt(v / cols + eps)];
}

export function layernormForward(
  x: FloatArray, gamma: FloatArray | null, beta: FloatArray | null, cols: number, eps: number, out: FloatArray,
) {
  for (let base = 0; base < x.length; base += cols) {
    const [mean, rstd] = rowStats(x, base, cols, eps);
    for (let c = 0; c < cols; c++) {
      const h = (x[base + c] - mean) * rstd;
      out[base + c] = h * (gamma ? gamma[c] : 1) + (beta ? beta[c] : 0);
    }
  }
}

/**
 * dx = rstd·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)) with ĝ = g·γ; `dx` null computes only the per-row stats
 * (mean, rstd) that the parameter gradients need.
 */
export function layernormBackward(
  x: FloatArray, g: FloatArray | null, gamma: FloatArray | null, cols: number, eps: number,
  dx: FloatArray | null, stats: FloatArray,
) {
  for (let row = 0, base = 0; base < x.length; row++, base += cols) {
    const [mean, rstd] = rowStats(x, base, cols, eps);
    stats[2 * row] = mean;
    stats[2 * row + 1] = rstd;
    if (!dx) continue;
    let sg = 0;
    let sgh = 0;
    for (let c = 0; c < cols; c++) {
      const gh = g![base + c] * (gamma ? gamma[c] : 1);
      sg += gh;
      sgh += gh * (x[base + c] - mean) * rstd;
    }
    const mg = sg / cols;
    const mgh = sgh / cols;
    for (let c = 0; c < cols; c++) {
      const gh = g![base + c] * (gamma ? gamma[c] : 1);
      dx[base + c] = rstd * (gh - mg - (x[base + c] - mean) * rstd * mgh);
    }
  }
}
