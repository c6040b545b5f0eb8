/** CPU reference for cast: storage conversions with the rounding of formats/dtype.ts (nearest even). */
import { type DType, f32ToBf16Bits, f32ToF16Bits } from '../../formats/dtype';
import { decode } from '../../formats/encode';
import { type CpuArray, isFloatArray } from '../kernel';

/** Converts `x` (dtype `from`) into `out` (dtype `to`); same dtype copies the storage. */
export function castForward(x: CpuArray, from: DType, to: DType, shape: readonly number[], out: CpuArray) {
  if (from === to) {
    out.set(x as never);
    return;
  }
  // f16/bf16/q8_0/q4_0 values are exact in f32, so decoding first loses nothing
  const values = isFloatArray(x) ? x : decode(from, new Uint8Array(x.buffer, x.byteOffset, x.byteLength), shape);
  if (to === 'f32') {
    out.set(values);
    return;
  }
  const conv = to === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
  for (let i = 0; i < values.length; i++) out[i] = conv(values[i]);
}
