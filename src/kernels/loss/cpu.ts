/**
 * CPU references for the training losses, each a masked mean over rows:
 * - cross-entropy with an ignore index (outer links: answer tokens labelled, everything else -100);
 * - cosine distance 1 - cos(a_i, b_i) with torch 1.13's eps handling (inner links);
 * - MSE, mean over included rows and all columns (the inner loop's optional term).
 * A mean over zero included rows is 0 with zero gradients (torch gives NaN; a batch without
 * supervised tokens then contributes nothing instead of poisoning the step).
 */
import { InvalidArgument } from '../../errors';
import type { FloatArray } from '../kernel';

/** torch.nn.functional.cosine_similarity's default eps, squared as it is applied to squared norms. */
export const COS_EPS2 = 1e-8 * 1e-8;

/** sum_i w_i l_i / (div * sum_i w_i) over rows with w_i != 0 (w = 1 without a mask); scale = 1 / (div * sum w). */
export function maskedMean(rowLoss: FloatArray, w: FloatArray | null, div: number): { loss: number; scale: number } {
  let sl = 0;
  let sw = 0;
  for (let r = 0; r < rowLoss.length; r++) {
    const wr = w ? w[r] : 1;
    if (wr === 0) continue;
    sl += wr * rowLoss[r];
    sw += wr;
  }
  if (sw === 0) return { loss: 0, scale: 0 };
  return { loss: sl / (sw * div), scale: 1 / (sw * div) };
}

/** log(sum_j exp(x[base + j])) over one row, shifted by the row max. */
function logSumExp(x: FloatArray, base: number, V: number): number {
  let m = -Infinity;
  for (let j = 0; j < V; j++) m = Math.max(m, x[base + j]);
  let s = 0;
  for (let j = 0; j < V; j++) s += Math.exp(x[base + j] - m);
  return m + Math.log(s);
}

/** Mean over labelled rows of lse(row) - row[label]; fills lse per row and scale = 1 / labelled rows. */
export function crossEntropyForward(
  x: FloatArray, labels: Int32Array, V: number, ignore: number,
  out: { loss: FloatArray; lse: FloatArray; scale: FloatArray },
) {
  const rows = labels.length;
  for (let r = 0; r < rows; r++) {
    const lab = labels[r];
    if (lab !== ignore && !(lab >= 0 && lab < V)) {
      throw new InvalidArgument(
        `cross_entropy: label ${lab} in row ${r} is outside [0, ${V}) and is not the ignore index ${ignore}; check the tokenizer's vocab size against the logits`,
      );
    }
  }
  let sum = 0;
  let count = 0;
  for (let r = 0; r < rows; r++) {
    const lse = logSumExp(x, r * V, V);
    out.lse[r] = lse;
    if (labels[r] === ignore) continue;
    sum += lse - x[r * V + labels[r]];
    count++;
  }
  out.loss[0] = count ? sum / count : 0;
  out.scale[0] = count ? 1 / count : 0;
}

/** dx = g * scale * (softmax(row) - onehot(label)) on labelled rows, 0 on ignored rows. */
export function crossEntropyBackward(
  x: FloatArray, labels: Int32Array, lse: FloatArray, scale: number, g: number, V: number, ignore: number, dx: FloatArray,
) {
  const k = g * scale;
  for (let r = 0; r < labels.length; r++) {
    const lab = labels[r];
    for (let j = 0; j < V; j++) {
      const i = r * V + j;
      dx[i] = lab === ignore ? 0 : (Math.exp(x[i] - lse[r]) - (j === lab ? 1 : 0)) * k;
    }
  }
}

/**
 * Per row: stats [dot, |a|^2, |b|^2] and rowLoss = 1 - dot / sqrt(max(|a|^2, eps^2) * max(|b|^2, eps^2)),
 * which is what torch 1.13's cosine_similarity computes (each squared norm clamped on its own).
 */
export function cosineRows(a: FloatArray, b: FloatArray, d: number, stats: FloatArray, rowLoss: FloatArray) {
  for (let r = 0; r < rowLoss.length; r++) {
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let j = 0; j < d; j++) {
      const x = a[r * d + j];
      const y = b[r * d + j];
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
    stats[3 * r] = dot;
    stats[3 * r + 1] = na;
    stats[3 * r + 2] = nb;
    rowLoss[r] = 1 - dot / Math.sqrt(Math.max(na, COS_EPS2) * Math.max(nb, COS_EPS2));
  }
}

/**
 * Gradient of the masked cosine loss w.r.t. x (a, or b with the roles swapped; `which` 1 for a, 2 for b):
 * dx = -g * scale * w * (y / D - cos * x / Sx), D = sqrt(Sx * Sy). Like torch 1.13, which clamps the
 * squared norms in place under no_grad, the clamp is treated as the identity in the derivative.
 */
export function cosineBackward(
  x: FloatArray, y: FloatArray, stats: FloatArray, w: FloatArray | null, scale: number, g: number, d: number, which: 1 | 2, dx: FloatArray,
) {
  const rows = stats.length / 3;
  for (let r = 0; r < rows; r++) {
    const wr = w ? w[r] : 1;
    const sx = Math.max(stats[3 * r + which], COS_EPS2);
    const sy = Math.max(stats[3 * r + 3 - which], COS_EPS2);
    const D = Math.sqrt(sx * sy);
    const cos = stats[3 * r] / D;
    const k = -g * scale * wr;
    for (let j = 0; j < d; j++) {
      const i = r * d + j;
      dx[i] = wr === 0 ? 0 : k * (y[i] / D - (cos * x[i]) / sx);
    }
  }
}

/** rowLoss[r] = sum_j (a - b)^2 (divided by d in the masked mean). */
export function mseRows(a: FloatArray, b: FloatArray, d: number, rowLoss: FloatArray) {
  for (let r = 0; r < rowLoss.length; r++) {
    let s = 0;
    for (let j = 0; j < d; j++) {
      const e = a[r * d + j] - b[r * d + j];
      s += e * e;
    }
    rowLoss[r] = s;
  }
}

/** dx = sign * 2 g scale w (a - b); sign +1 for a, -1 for b. */
export function mseBackward(
  a: FloatArray,
  b: FloatArray,
  w: FloatArray | null,
  scale: number,
  g: number,
  d: number,
  sign: number,
  dx: FloatArray,
) {
  for (let i = 0; i < dx.length; i++) {
    const wr = w ? w[Math.floor(i / d)] : 1;
    dx[i] = wr === 0 ? 0 : sign * 2 * g * scale * wr * (a[i] - b[i]);
  }
}
