/**
 * Values <-> storage bytes for every dtype (see dtype.ts for the quantized row layout).
 * q8_0 and q4_0 quantize as ggml does: q8_0 d = max|x| / 127, q = round(x / d);
 * q4_0 d = m / -8 where m is the value of largest magnitude, q = clamp(trunc(x / d + 8.5), 0, 15).
 */
import { InvalidArgument } from '../errors';
import {
  type DType, type QuantDType, QK, bf16BitsToF32, byteSize, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits,
  quantBytesPerRow, rowBytes,
} from './dtype';

function rowsCols(shape: readonly number[]): [number, number] {
  const cols = shape.length ? shape[shape.length - 1] : 1;
  let rows = 1;
  for (let i = 0; i < shape.length - 1; i++) rows *= shape[i];
  return [rows, cols];
}

function checkQuantCols(d: QuantDType, cols: number) {
  if (cols % QK !== 0) {
    throw new InvalidArgument(`${d} needs the last dimension to be a multiple of ${QK}, got ${cols}; keep this tensor in f16/bf16/f32`);
  }
}

/** Encodes float values into the storage bytes of `dtype` (length byteSize(dtype, shape)). */
export function encode(dtype: DType, values: ArrayLike<number>, shape: readonly number[]): Uint8Array {
  const out = new Uint8Array(byteSize(dtype, shape));
  const n = values.length;
  switch (dtype) {
    case 'f32':
      new Float32Array(out.buffer).set(values);
      return out;
    case 'i32': {
      const o = new Int32Array(out.buffer);
      for (let i = 0; i < n; i++) o[i] = values[i];
      return out;
    }
    case 'f16':
    case 'bf16': {
      const o = new Uint16Array(out.buffer);
      const conv = dtype === 'f16' ? f32ToF16Bits : f32ToBf16Bits;
      for (let i = 0; i < n; i++) o[i] = conv(values[i]);
      return out;
    }
    case 'q8_0':
    case 'q4_0':
      return quantize(dtype, values, shape, out);
  }
}

function quantize(d: QuantDType, x: ArrayLike<number>, shape: readonly number[], out: Uint8Array): Uint8Array {
  const [rows, cols] = rowsCols(shape);
  checkQuantCols(d, cols);
  const stride = rowBytes(d, cols);
  const qBytes = quantBytesPerRow(d, cols);
  const view = new DataView(out.buffer);
  // an Int8Array store converts as setInt8 does (modulo 2⁸, NaN to 0)
  const q8 = new Int8Array(out.buffer, out.byteOffset, out.length);
  for (let r = 0; r < rows; r++) {
    const base = r * stride;
    for (let b = 0; b < cols / QK; b++) {
      const src = r * cols + b * QK;
      let amax = 0;
      let vmax = 0;
      for (let j = 0; j < QK; j++) {
        const v = x[src + j];
        if (Math.abs(v) > amax) { amax = Math.abs(v); vmax = v; }
      }
      if (d === 'q8_0') {
        const scale = amax / 127;
        const inv = scale ? 1 / scale : 0;
        for (let j = 0; j < QK; j++) {
          // Math.round(y) (ties up) without its branch, which mispredicts on every other value (13 ns a value against
          // 4): floor(y + 0.5) differs only where y + 0.5 rounds up to 1, at y = 0.5 − 2⁻⁵⁴
          const y = x[src + j] * inv;
          q8[base + b * QK + j] = y === 0.49999999999999994 ? 0 : Math.floor(y + 0.5);
        }
        view.setUint16(base + qBytes + 2 * b, f32ToF16Bits(scale), true);
      } else {
        const scale = vmax / -8;
        const inv = scale ? 1 / scale : 0;
        for (let j = 0; j < QK / 2; j++) {
          const lo = Math.min(15, Math.trunc(x[src + j] * inv + 8.5));
          const hi = Math.min(15, Math.trunc(x[src + j + QK / 2] * inv + 8.5));
          out[base + b * (QK / 2) + j] = lo | (hi << 4);
        }
        view.setUint16(base + qBytes + 2 * b, f32ToF16Bits(scale), true);
      }
    }
  }
  return out;
}

/** Decodes storage bytes of `dtype` back into f32 values (dequantizing blocks). */
export function decode(dtype: DType, bytes: Uint8Array, shape: readonly number[]): Float32Array {
  const [rows, cols] = rowsCols(shape);
  const n = rows * cols;
  const out = new Float32Array(n);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (dtype) {
    case 'f32':
      for (let i = 0; i < n; i++) out[i] = view.getFloat32(4 * i, true);
      return out;
    case 'i32':
      for (let i = 0; i < n; i++) out[i] = view.getInt32(4 * i, true);
      return out;
    case 'f16':
    case 'bf16': {
      if (dtype === 'bf16' && bytes.byteOffset % 2 === 0) {
        // a bf16 value is the high half of its f32: one shift a value (little-endian, as every host running this is)
        const src = new Uint16Array(bytes.buffer, bytes.byteOffset, n);
        const bits = new Uint32Array(out.buffer);
        for (let i = 0; i < n; i++) bits[i] = src[i] << 16;
        return out;
      }
      const conv = dtype === 'f16' ? f16BitsToF32 : bf16BitsToF32;
      for (let i = 0; i < n; i++) out[i] = conv(view.getUint16(2 * i, true));
      return out;
    }
    case 'q8_0':
    case 'q4_0': {
      checkQuantCols(dtype, cols);
      const stride = rowBytes(dtype, cols);
      const qBytes = quantBytesPerRow(dtype, cols);
      for (let r = 0; r < rows; r++) {
        const base = r * stride;
        for (let b = 0; b < cols / QK; b++) {
          const scale = f16BitsToF32(view.getUint16(base + qBytes + 2 * b, true));
          const dst = r * cols + b * QK;
          if (dtype === 'q8_0') {
            for (let j = 0; j < QK; j++) out[dst + j] = view.getInt8(base + b * QK + j) * scale;
          } else {
            for (let j = 0; j < QK / 2; j++) {
              const byte = bytes[base + b * (QK / 2) + j];
              out[dst + j] = ((byte & 15) - 8) * scale;
              out[dst + j + QK / 2] = ((byte >> 4) - 8) * scale;
            }
          }
        }
      }
      return out;
    }
  }
}
