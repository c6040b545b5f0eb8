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

/** C = op(A)·op(B) (+ bias) over the plan; `b` holds B's values in storage order. */
export function matmulForward(p: MatmulPlan, a: FloatArray, b: FloatArray, bias: FloatArray | null, out: FloatArray) {
  const { batch, M, N, K } = p;
  for (let bi = 0; bi < batch; bi++) {
    for (let m = 0; m < M; m++) {
      const aRow = bi * p.a.sb + m * p.a.sm;
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let k = 0; k < K; k++) {
          const row = bi * p.b.sbr + (p.b.transB ? n : k);
          const col = p.b.transB ? k : n;
          s += a[aRow + k * p.a.sk] * b[row * p.b.cols + col];
        }
        out[bi * p.c.sb + m * p.c.sm + n * p.c.sn] = bias ? s + bias[n] : s;
      }
    }
  }
}
