/**
 * CPU reference for one AdamW step in place (torch.optim.AdamW, single-tensor path of torch 1.13,
 * operation for operation), and the in-place copies a flat parameter buffer needs.
 */
import type { FloatArray } from '../kernel';

export interface AdamWHyper {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  /** Step number, from 1: bias corrections 1 - beta^t. */
  t: number;
}

/** The per-step scalars, computed once in f64 (torch computes them in Python floats too). */
export function adamwScalars({ lr, beta1, beta2, weightDecay, t }: AdamWHyper) {
  return { lrWd: lr * weightDecay, stepSize: lr / (1 - beta1 ** t), bc2sqrt: Math.sqrt(1 - beta2 ** t) };
}

/**
 * p <- p (1 - lr wd mask); m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
 * p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). `mask` scales the decay per element.
 */
export function adamwUpdate(p: FloatArray, g: FloatArray, m: FloatArray, v: FloatArray, mask: FloatArray | null, h: AdamWHyper) {
  const { lrWd, stepSize, bc2sqrt } = adamwScalars(h);
  for (let i = 0; i < p.length; i++) {
    const x = p[i] * (1 - lrWd * (mask ? mask[i] : 1));
    const gi = g[i];
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * gi;
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * gi * gi;
    p[i] = x - (stepSize * m[i]) / (Math.sqrt(v[i]) / bc2sqrt + h.eps);
  }
}

/** dst <- src, or dst += src when `add`. */
export function assignInto(dst: FloatArray, src: FloatArray, add: boolean) {
  if (!add) dst.set(src);
  else for (let i = 0; i < dst.length; i++) dst[i] += src[i];
}
