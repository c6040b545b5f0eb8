/**
 * CPU references for RMSNorm over the last dimension: y = x / sqrt(mean(x²) + eps) · (offset + w),
 * offset 0 for Llama/Qwen, 1 for Gemma. Exact under Float64Array (the f64 backend for gradcheck).
 */
import type { DType } from '../../formats/dtype';
import { bf16BitsToF32, f16BitsToF32 } from '../../formats/dtype';
import type { CpuArray, FloatArray } from '../kernel';

/** A float parameter as numbers: f32 storage as is, f16/bf16 bits widened (exactly) into a Float64Array. */
export function floatValues(a: CpuArray, dtype: DType): FloatArray {
  if (a instanceof Float32Array || a instanceof Float64Array) return a;
  const widen = dtype === 'f16' ? f16BitsToF32 : bf16BitsToF32;
  const out = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = widen(a[i]);
  return out;
}

export function rmsnormForward(x: FloatArray, w: FloatArray, cols: number, eps: number, offset: number, out: FloatArray) {
  for (let base = 0; base < x.length; base += cols) {
    let ss = 0;
    for (let c = 0; c < cols; c++) ss += x[base + c] * x[base + c];
    const r = 1 / Math.sqrt(ss / cols + eps);
    for (let c = 0; c < cols; c++) out[base + c] = x[base + c] * r * (offset + w[c]);
  }
}

/**
 * dx = r·g·w' − x·r³·Σ(g·w'·x)/C with w' = offset + w and r = 1/sqrt(mean(x²) + eps);
 * `dx` may be null (only the statistics are wanted). stats[2·row] = 0 (mean), stats[2·row + 1] = r:
 * the layout the shared parameter-gradient kernel reads (LayerNorm writes its real mean there).
 */
export function rmsnormBackward(
  x: FloatArray, w: FloatArray | null, g: FloatArray | null, cols: number, eps: number, offset: number,
  dx: FloatArray | null, stats: FloatArray,
) {
  for (let row = 0, base = 0; base < x.length; row++, base += cols) {
    let ss = 0;
    let dot = 0;
    for (let c = 0; c < cols; c++) {
      const v = x[base + c];
      ss += v * v;
      if (dx) dot += g![base + c] * (offset + w![c]) * v;
    }
    const r = 1 / Math.sqrt(ss / cols + eps);
    stats[2 * row] = 0;
    stats[2 * row + 1] = r;
    if (!dx) continue;
    const k = (r * r * r * dot) / cols;
    for (let c = 0; c < cols; c++) dx[base + c] = r * g![base + c] * (offset + w![c]) - x[base + c] * k;
  }
}
