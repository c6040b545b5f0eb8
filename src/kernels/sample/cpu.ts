/**
 * CPU reference for token selection. The GPU kernel implements the same definition, so for the same
 * inputs both pick the same token (up to f32 rounding at near-ties, see sample.cases.ts):
 *
 *   z = logits / T                                   (T = 0: argmax, lowest index among equal maxima)
 *   K1 = { i : z_i >= t_k }, t_k the k-th largest z (with multiplicity)   (top-k; 0 = all)
 *   w_i = exp(z_i - max z) on K1, S = sum of w over K1
 *   t_p = the largest value v of K1 with  sum{ w_i : z_i >= v } >= p * S   (top-p; 1 = off)
 *   K2 = { i in K1 : z_i >= t_p }
 *   pick the first index j (index order) whose running sum of w over K2 exceeds u * sum_K2 w
 *
 * This is Hugging Face's warper chain (temperature, then top-k on scores, then top-p on the softmax
 * of what top-k kept; at least one token kept). Ties: the kept sets are value thresholds, so every
 * token tied with the k-th value (HF does the same for top-k) or with the top-p boundary value (HF
 * keeps only as many as its sort order reaches) is kept. With real logits such ties are rare.
 *
 * u is a pure function of (seed, step, row): a PCG hash on u32 truncated to 24 bits, so it is the
 * same exact f32 on the CPU and the GPU.
 */
import type { FloatArray } from '../kernel';

export interface SampleAttrs {
  /** 0 selects argmax. */
  temperature: number;
  /** 0 = off; otherwise keep the topK highest logits (ties at the k-th value all kept). */
  topK: number;
  /** 1 = off; in (0, 1]. */
  topP: number;
  /** u32 seed of the run. */
  seed: number;
  /** Decode step (u32), so each step of a seeded run draws a fresh number. */
  step: number;
}

/** PCG-RXS-M-XS 32-bit output hash (Jarzynski & Olano, "Hash functions for GPU rendering", 2020). */
export function pcgHash(v: number): number {
  const state = (Math.imul(v >>> 0, 747796405) + 2891336453) >>> 0;
  const word = Math.imul(((state >>> ((state >>> 28) + 4)) ^ state) >>> 0, 277803737) >>> 0;
  return ((word >>> 22) ^ word) >>> 0;
}

/** The uniform number in [0, 1) that batch row `row` draws at decode step `step` of run `seed`. */
export function uniformFor(seed: number, step: number, row: number): number {
  const h = pcgHash((pcgHash((pcgHash(seed) + step) >>> 0) + row) >>> 0);
  return (h >>> 8) / 16777216; // 24 bits: exact in f32, so the GPU computes the same value
}

/** Index of the largest value of x[off, off + n); the lowest index among equal maxima; -1 if none. */
export function argmaxRow(x: FloatArray, off: number, n: number): number {
  let best = -1;
  let bv = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = x[off + i];
    if (v > bv || (best < 0 && v === -Infinity)) {
      bv = v;
      best = i;
    }
  }
  return best;
}

/**
 * Per-token weights after temperature, top-k and top-p (0 for dropped tokens), unnormalised
 * (the kept maximum has weight 1). Tests normalise them to get the distribution being sampled.
 */
export function keptWeights(x: FloatArray, off: number, n: number, a: SampleAttrs): Float64Array {
  const z = new Float64Array(n);
  let m = -Infinity;
  for (let i = 0; i < n; i++) {
    z[i] = x[off + i] / a.temperature;
    if (z[i] > m) m = z[i];
  }
  let tk = -Infinity;
  if (a.topK > 0 && a.topK < n) tk = Float64Array.from(z).sort()[n - a.topK];
  const w = new Float64Array(n);
  let s = 0;
  for (let i = 0; i < n; i++) {
    w[i] = z[i] >= tk ? Math.exp(z[i] - m) : 0;
    if (!(w[i] > 0)) w[i] = 0; // NaN (all -inf row) counts as dropped
    s += w[i];
  }
  if (a.topP < 1) {
    const target = a.topP * s;
    const order = Array.from({ length: n }, (_, i) => i).filter((i) => z[i] >= tk);
    order.sort((i, j) => z[j] - z[i]);
    let cum = 0;
    let tp = -Infinity;
    for (const i of order) {
      cum += w[i];
      if (cum >= target) {
        tp = z[i];
        break;
      }
    }
    for (let i = 0; i < n; i++) if (!(z[i] >= tp)) w[i] = 0;
  }
  return w;
}

/** The token for row x[off, off + n) and uniform u in [0, 1); -1 when no token has positive weight. */
export function sampleRow(x: FloatArray, off: number, n: number, a: SampleAttrs, u: number): number {
  if (a.temperature === 0) return argmaxRow(x, off, n);
  const w = keptWeights(x, off, n, a);
  let total = 0;
  for (let i = 0; i < n; i++) total += w[i];
  const target = u * total;
  let cum = 0;
  let last = -1;
  for (let i = 0; i < n; i++) {
    if (w[i] > 0) {
      cum += w[i];
      last = i;
      if (cum > target) return i;
    }
  }
  return last; // only reachable through rounding
}

/** ids[r] for each of `rows` rows of `cols` logits. */
export function sampleForward(x: FloatArray, rows: number, cols: number, a: SampleAttrs, ids: Int32Array) {
  for (let r = 0; r < rows; r++) ids[r] = sampleRow(x, r * cols, cols, a, uniformFor(a.seed, a.step, r));
}
