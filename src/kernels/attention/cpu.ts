/**
 * CPU reference for causal grouped-query attention, forward and backward.
 * q [T, Hq, D], k/v [S, Hkv, D] of which the first kvLen rows are valid; query t sits at absolute
 * position past + t with past = kvLen − T. Key j is visible to it iff j ≤ past + t and, with a
 * sliding window W > 0, past + t − j < W. Query head h reads kv head floor(h / (Hq / Hkv)).
 */
import type { FloatArray } from '../kernel';

export interface AttnDims {
  t: number;
  s: number;
  hq: number;
  hkv: number;
  d: number;
  /** valid rows of k and v (≤ s) */
  kvLen: number;
  scale: number;
  /** sliding window; 0 = none */
  window: number;
}

/** Visible key range [lo, hi) of query t. */
export function keyRange(dims: AttnDims, t: number): [number, number] {
  const pos = dims.kvLen - dims.t + t;
  const lo = dims.window > 0 ? Math.max(0, pos - dims.window + 1) : 0;
  return [lo, pos + 1];
}

/** o [T, Hq, D] and the row logsumexp of the scaled scores, lse [Hq, T] (kept for the backward). */
export function attentionForward(q: FloatArray, k: FloatArray, v: FloatArray, dims: AttnDims, o: FloatArray, lse: FloatArray | null) {
  const { t: T, hq, hkv, d: D, scale } = dims;
  const group = hq / hkv;
  const s = new Array<number>(dims.kvLen);
  for (let h = 0; h < hq; h++) {
    const kh = Math.floor(h / group);
    for (let t = 0; t < T; t++) {
      const [lo, hi] = keyRange(dims, t);
      const qo = (t * hq + h) * D;
      let m = -Infinity;
      for (let j = lo; j < hi; j++) {
        const ko = (j * hkv + kh) * D;
        let dot = 0;
        for (let i = 0; i < D; i++) dot += q[qo + i] * k[ko + i];
        s[j] = dot * scale;
        m = Math.max(m, s[j]);
      }
      let sum = 0;
      for (let j = lo; j < hi; j++) sum += (s[j] = Math.exp(s[j] - m));
      for (let i = 0; i < D; i++) o[qo + i] = 0;
      for (let j = lo; j < hi; j++) {
        const p = s[j] / sum;
        const vo = (j * hkv + kh) * D;
        for (let i = 0; i < D; i++) o[qo + i] += p * v[vo + i];
      }
      if (lse) lse[h * T + t] = m + Math.log(sum);
    }
  }
}

/** di[h, t] = Σ_d dO·O over each query row (the D_i term of the backward). */
export function attentionRowDot(o: FloatArray, dO: FloatArray, T: number, hq: number, D: number, di: FloatArray) {
  for (let h = 0; h < hq; h++) {
    for (let t = 0; t < T; t++) {
      const qo = (t * hq + h) * D;
      let s = 0;
      for (let i = 0; i < D; i++) s += dO[qo + i] * o[qo + i];
      di[h * T + t] = s;
    }
  }
}

/**
 * Flash-attention backward from the saved logsumexp: P = exp(S − lse), dP = dO·Vᵀ,
 * dS = P ∘ (dP − di), dQ = scale·dS·K, dK = scale·dSᵀ·Q, dV = Pᵀ·dO, with K/V gradients summed over
 * the query heads of each kv head. Rows of dk/dv at or beyond kvLen are zero. Null outputs are skipped.
 */
export function attentionBackward(
  q: FloatArray, k: FloatArray, v: FloatArray, lse: FloatArray, di: FloatArray, dO: FloatArray, dims: AttnDims,
  dq: FloatArray | null, dk: FloatArray | null, dv: FloatArray | null,
) {
  const { t: T, hq, hkv, d: D, scale } = dims;
  const group = hq / hkv;
  dq?.fill(0);
  dk?.fill(0);
  dv?.fill(0);
  for (let h = 0; h < hq; h++) {
    const kh = Math.floor(h / group);
    for (let t = 0; t < T; t++) {
      const [lo, hi] = keyRange(dims, t);
      const qo = (t * hq + h) * D;
      const l = lse[h * T + t];
      for (let j = lo; j < hi; j++) {
        const ko = (j * hkv + kh) * D;
        let dot = 0;
        let dp = 0;
        for (let i = 0; i < D; i++) {
          dot += q[qo + i] * k[ko + i];
          dp += dO[qo + i] * v[ko + i];
        }
        const p = Math.exp(dot * scale - l);
        const ds = p * (dp - di[h * T + t]) * scale;
        for (let i = 0; i < D; i++) {
          if (dq) dq[qo + i] += ds * k[ko + i];
          if (dk) dk[ko + i] += ds * q[qo + i];
          if (dv) dv[ko + i] += p * dO[qo + i];
        }
      }
    }
  }
}
