/**
 * CPU reference for matmul: dequantize B, then plain loops over the canonical plan. Sums run in JS
 * numbers (f64), so the f64 backend is exact and the f32 backend is at least as accurate as any GPU order.
 */
import type { DType } from '../../formats/dtype';
import { decode } from '../../formats/encode';
import { type CpuArray, type FloatArray, isFloatArray } from '../kernel';
import type { MatmulPlan } from './plan';

/**
 * Values of a weight in any storage dtype. f16/bf16/q8_0/q4_0 values are exact in f32, so the
 * Float32Array from decode() loses nothing even on the f64 backend.
 */
export function dequantize(data: CpuArray, dtype: DType, shape: readonly number[]): FloatArray {
  if (isFloatArray(data)) return data;
  return decode(dtype, new Uint8Array(data.buffer, data.byteOffset, data.byteLength), shape);
}

/**
 * C = op(A)·op(B) (+ bias) over the plan; `b` holds B's values in storage order. Every output is the
 * f64 sum over k in increasing order, then + bias, then one rounding on store. Outputs are computed four
 * columns at a time, each with its own accumulator: four independent add chains keep the FPU busy where
 * one chain would wait on each add, and every sum still runs in k order.
 */
export function matmulForward(p: MatmulPlan, a: FloatArray, b: FloatArray, bias: FloatArray | null, out: FloatArray) {
  const { batch, M, N, K } = p;
  const { sb: asb, sm: asm, sk: ask } = p.a;
  const { sbr, cols, transB } = p.b;
  const { sb: csb, sm: csm, sn: csn } = p.c;
  // B(k, n) = b[bBase + n*ns + k*ks]
  const ns = transB ? cols : 1;
  const ks = transB ? 1 : cols;
  const N4 = N - (N % 4);
  for (let bi = 0; bi < batch; bi++) {
    const bBase = bi * sbr * cols;
    for (let m = 0; m < M; m++) {
      const aRow = bi * asb + m * asm;
      const cRow = bi * csb + m * csm;
      for (let n = 0; n < N4; n += 4) {
        const b0 = bBase + n * ns;
        const b1 = b0 + ns;
        const b2 = b1 + ns;
        const b3 = b2 + ns;
        let s0 = 0;
        let s1 = 0;
        let s2 = 0;
        let s3 = 0;
        for (let k = 0; k < K; k++) {
          const av = a[aRow + k * ask];
          const o = k * ks;
          s0 += av * b[b0 + o];
          s1 += av * b[b1 + o];
          s2 += av * b[b2 + o];
          s3 += av * b[b3 + o];
        }
        const c = cRow + n * csn;
        if (bias) {
          out[c] = s0 + bias[n];
          out[c + csn] = s1 + bias[n + 1];
          out[c + 2 * csn] = s2 + bias[n + 2];
          out[c + 3 * csn] = s3 + bias[n + 3];
        } else {
          out[c] = s0;
          out[c + csn] = s1;
          out[c + 2 * csn] = s2;
          out[c + 3 * csn] = s3;
        }
      }
      for (let n = N4; n < N; n++) {
        const b0 = bBase + n * ns;
        let s = 0;
        for (let k = 0; k < K; k++) s += a[aRow + k * ask] * b[b0 + k * ks];
        out[cRow + n * csn] = bias ? s + bias[n] : s;
      }
    }
  }
}
