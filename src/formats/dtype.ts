/**
 * Element types and their byte layouts, shared by every backend and file format.
 *
 * Quantized types keep GGUF's block semantics (32 elements, one f16 scale) but a GPU-friendly row
 * layout: each row of `cols` elements stores all its quant bytes first, then its f16 scales, padded to
 * 4 bytes. Rows stay contiguous, so a weight can be split across bindings at row boundaries.
 */
export type FloatDType = 'f32' | 'f16' | 'bf16';
export type QuantDType = 'q8_0' | 'q4_0';
export type DType = FloatDType | QuantDType | 'i32';

export const QK = 32; // elements per quantization block

export const isQuant = (d: DType): d is QuantDType => d === 'q8_0' || d === 'q4_0';

const align4 = (n: number) => (n + 3) & ~3;

/** Bytes of quant data (without scales) in one row of `cols` elements. */
export function quantBytesPerRow(d: QuantDType, cols: number): number {
  return d === 'q8_0' ? cols : cols / 2;
}

/** Bytes one row of `cols` elements takes, scales and padding included. */
export function rowBytes(d: DType, cols: number): number {
  switch (d) {
    case 'f32':
    case 'i32':
      return 4 * cols;
    case 'f16':
    case 'bf16':
      return 2 * cols;
    case 'q8_0':
    case 'q4_0':
      return quantBytesPerRow(d, cols) + align4((cols / QK) * 2);
  }
}

/** Bytes a tensor of `shape` takes (rows = all leading dims, cols = last dim). */
export function byteSize(d: DType, shape: readonly number[]): number {
  const cols = shape.length ? shape[shape.length - 1] : 1;
  const rows = shape.length ? numel(shape) / Math.max(cols, 1) : 1;
  return cols === 0 ? 0 : rows * rowBytes(d, cols);
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const s of shape) n *= s;
  return n;
}

// --- f16 / bf16 bit conversions (round to nearest even) ---
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function f32ToF16Bits(v: number): number {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf / nan
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow -> signed zero
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half++; // may carry into the exponent: correct
  return sign | half;
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

export function f32ToBf16Bits(v: number): number {
  f32[0] = v;
  const x = u32[0];
  if ((x & 0x7fffffff) > 0x7f800000) return ((x >>> 16) | 0x40) & 0xffff; // quiet nan
  return ((x + 0x7fff + ((x >>> 16) & 1)) >>> 16) & 0xffff;
}

export function bf16BitsToF32(h: number): number {
  u32[0] = (h & 0xffff) << 16;
  return f32[0];
}

/** Rounds through f16 and back (what storing a value as f16 does to it). */
export const roundF16 = (v: number) => f16BitsToF32(f32ToF16Bits(v));
export const roundBf16 = (v: number) => bf16BitsToF32(f32ToBf16Bits(v));
