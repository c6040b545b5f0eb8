/**
 * CPU reference of the causal depthwise conv1d of Qwen3.5's Gated DeltaNet (HF's nn.Conv1d with groups = channels,
 * padding K − 1 on the left, the first T outputs kept): for channel c and position t,
 *   out[t, c] = Σ_{j<K} w[c, j] · xs[t + j, c],   xs = state (K − 1 rows, or zeros) ⊕ x,
 * a cross-correlation: w[c, K − 1] multiplies the current position. No bias, no activation (SiLU follows).
 * x [T, C], w [C, K], state [K − 1, C]; the backward to x: dx[u, c] = Σ_j w[c, j] · g[u + K − 1 − j, c], and to w:
 * dw[c, j] = Σ_t g[t, c] · xs[t + j, c].
 */
import type { FloatArray } from '../kernel';

export function causalConv1dForward(
  x: FloatArray,
  w: FloatArray,
  state: FloatArray | null,
  out: FloatArray,
  T: number,
  C: number,
  K: number,
) {
  for (let t = 0; t < T; t++) {
    for (let c = 0; c < C; c++) {
      let s = 0;
      for (let j = 0; j < K; j++) {
        const u = t + j - (K - 1); // x's row, or the state's row u + K − 1 when u < 0
        const v = u >= 0 ? x[u * C + c] : state ? state[(u + K - 1) * C + c] : 0;
        s += w[c * K + j] * v;
      }
      out[t * C + c] = s;
    }
  }
}

export function causalConv1dBackward(g: FloatArray, w: FloatArray, dx: FloatArray, T: number, C: number, K: number) {
  for (let u = 0; u < T; u++) {
    for (let c = 0; c < C; c++) {
      let s = 0;
      for (let j = 0; j < K; j++) {
        const t = u + K - 1 - j;
        if (t < T) s += w[c * K + j] * g[t * C + c];
      }
      dx[u * C + c] = s;
    }
  }
}

export function causalConv1dBackwardW(
  g: FloatArray,
  x: FloatArray,
  state: FloatArray | null,
  dw: FloatArray,
  T: number,
  C: number,
  K: number,
) {
  for (let c = 0; c < C; c++) {
    for (let j = 0; j < K; j++) {
      let s = 0;
      for (let t = 0; t < T; t++) {
        const u = t + j - (K - 1);
        const v = u >= 0 ? x[u * C + c] : state ? state[(u + K - 1) * C + c] : 0;
        s += g[t * C + c] * v;
      }
      dw[c * K + j] = s;
    }
  }
}
