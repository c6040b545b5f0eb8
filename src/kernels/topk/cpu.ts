/**
 * CPU reference for top-k over the last dim. The order both implementations follow:
 *
 *   a comes before b  iff  a > b, or a == b and a's index is lower;  NaN comes after every number
 *   (NaNs among themselves by index);  -0 and +0 are equal (so they tie and go by index).
 *
 * Each row keeps the k first elements of that order, first one first, with their indices.
 */
import type { FloatArray } from '../kernel';

/** Whether value a at index ia comes before value b at index ib in top-k order. */
export function comesBefore(a: number, ia: number, b: number, ib: number): boolean {
  const an = Number.isNaN(a);
  const bn = Number.isNaN(b);
  if (an || bn) return an && bn ? ia < ib : bn;
  return a > b || (a === b && ia < ib);
}

/** The k first elements of row x[off, off + n) in top-k order, written at values/indices[outOff, outOff + k). */
export function topkRow(x: FloatArray, off: number, n: number, k: number, values: FloatArray, indices: Int32Array, outOff: number) {
  const vs: number[] = [];
  const is: number[] = [];
  for (let i = 0; i < n; i++) {
    const v = x[off + i];
    // scanning in index order, an equal value never beats one already kept
    if (vs.length === k && !comesBefore(v, i, vs[k - 1], is[k - 1])) continue;
    let j = vs.length < k ? vs.length : k - 1;
    while (j > 0 && comesBefore(v, i, vs[j - 1], is[j - 1])) {
      vs[j] = vs[j - 1];
      is[j] = is[j - 1];
      j--;
    }
    vs[j] = v;
    is[j] = i;
  }
  for (let j = 0; j < k; j++) {
    values[outOff + j] = vs[j];
    indices[outOff + j] = is[j];
  }
}

/** values/indices [rows, k] for each of `rows` rows of `cols` values. */
export function topkForward(x: FloatArray, rows: number, cols: number, k: number, values: FloatArray, indices: Int32Array) {
  for (let r = 0; r < rows; r++) topkRow(x, r * cols, cols, k, values, indices, r * k);
}
