/**
 * CPU reference for rotary embeddings in the half-split (GPT-NeoX / Hugging Face rotate_half) layout.
 * x is [T, H, D]; the first R = 2·freq.length dims of each head rotate in pairs (i, i + R/2) by
 * pos[t]·freq[i]; dims R..D pass through (HF's partial rotary). Output = scale · R(sign·θ) · x.
 */
import type { FloatArray } from '../kernel';

/**
 * The angle is the f32 product pos·freq, rounded as PyTorch's f32 `inv_freq @ position_ids` and the GPU
 * kernel round it: the CPU fallback then rotates exactly like the model was run, and parity needs no
 * allowance for angle rounding at large positions. (Only constants are rounded: x stays exact in f64.)
 */
export const ropeAngle = (pos: number, freq: number) => Math.fround(pos * freq);

export function ropeForward(
  x: FloatArray, pos: Int32Array, freq: FloatArray, heads: number, dim: number, sign: number, scale: number, out: FloatArray,
) {
  const half = freq.length;
  const T = pos.length;
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < half; i++) {
      const a = ropeAngle(pos[t], freq[i]);
      const c = Math.cos(a) * scale;
      const s = sign * Math.sin(a) * scale;
      for (let h = 0; h < heads; h++) {
        const base = (t * heads + h) * dim;
        const x0 = x[base + i];
        const x1 = x[base + i + half];
        out[base + i] = x0 * c - x1 * s;
        out[base + i + half] = x1 * c + x0 * s;
      }
    }
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * dim;
      for (let d = 2 * half; d < dim; d++) out[base + d] = x[base + d];
    }
  }
}
