import { describe, expect, it } from 'vitest';
import { bf16BitsToF32, byteSize, f16BitsToF32, f32ToBf16Bits, f32ToF16Bits, rowBytes } from './dtype';
import { decode, encode } from './encode';
import { InvalidArgument } from '../errors';

describe('f16 and bf16 conversions', () => {
  it('converts exact values and specials to the IEEE bit patterns', () => {
    const cases: [number, number][] = [
      [0, 0x0000], [-0, 0x8000], [1, 0x3c00], [-2, 0xc000], [0.5, 0x3800], [65504, 0x7bff],
      [65520, 0x7c00] /* rounds up to inf */, [Infinity, 0x7c00], [-Infinity, 0xfc00],
      [2 ** -14, 0x0400] /* smallest normal */, [2 ** -24, 0x0001] /* smallest subnormal */, [2 ** -26, 0x0000],
      [1 + 2 ** -11, 0x3c00] /* tie to even (down) */, [1 + 3 * 2 ** -11, 0x3c02] /* tie to even (up) */,
      [0.1, 0x2e66],
    ];
    for (const [v, bits] of cases) expect(f32ToF16Bits(v), `f16(${v})`).toBe(bits);
    expect(Number.isNaN(f16BitsToF32(f32ToF16Bits(NaN)))).toBe(true);
    for (const [v, bits] of cases.slice(0, 6)) expect(f16BitsToF32(bits)).toBe(v);
    expect(f16BitsToF32(0x0001)).toBe(2 ** -24);
    expect(f16BitsToF32(0x2e66)).toBeCloseTo(0.0999755859375, 15);
  });

  it('rounds bf16 to nearest even and keeps NaN quiet', () => {
    expect(f32ToBf16Bits(1)).toBe(0x3f80);
    expect(f32ToBf16Bits(-1.5)).toBe(0xbfc0);
    expect(f32ToBf16Bits(1 + 2 ** -8)).toBe(0x3f80); // tie, even stays
    expect(f32ToBf16Bits(1 + 3 * 2 ** -8)).toBe(0x3f82); // tie, rounds up to even
    expect(f32ToBf16Bits(1 + 2 ** -8 + 2 ** -20)).toBe(0x3f81); // above the tie
    expect(bf16BitsToF32(0x4049)).toBe(3.140625);
    expect(Number.isNaN(bf16BitsToF32(f32ToBf16Bits(NaN)))).toBe(true);
  });
});

describe('quantized row layout', () => {
  it('has the documented sizes', () => {
    expect(rowBytes('q8_0', 64)).toBe(64 + 4);
    expect(rowBytes('q4_0', 64)).toBe(32 + 4);
    expect(rowBytes('q4_0', 32)).toBe(16 + 4); // one f16 scale padded to 4 bytes
    expect(byteSize('q8_0', [3, 64])).toBe(3 * 68);
    expect(byteSize('f16', [3, 5])).toBe(30);
  });

  it('quantizes a hand-made q8_0 block as ggml does', () => {
    const x = Array.from({ length: 32 }, (_, i) => (i - 16) / 4); // max |x| = 4 at i = 0
    const bytes = encode('q8_0', x, [32]);
    const view = new DataView(bytes.buffer);
    const d = f16BitsToF32(view.getUint16(32, true));
    expect(d).toBeCloseTo(4 / 127, 4);
    expect(view.getInt8(0)).toBe(-127);
    expect(view.getInt8(16)).toBe(0);
    expect(view.getInt8(20)).toBe(Math.round(1 / (4 / 127))); // x = 1 -> 31.75 -> 32
    const back = decode('q8_0', bytes, [32]);
    for (let i = 0; i < 32; i++) expect(Math.abs(back[i] - x[i])).toBeLessThanOrEqual(d / 2 + 1e-3);
  });

  it('quantizes a hand-made q4_0 block with GGUF nibble order', () => {
    const x = Array.from({ length: 32 }, (_, i) => (i === 5 ? -8 : (i % 8) - 4));
    const bytes = encode('q4_0', x, [32]);
    const d = f16BitsToF32(new DataView(bytes.buffer).getUint16(16, true));
    expect(d).toBe(1); // max-magnitude value -8 -> d = -8 / -8
    // element j in the low nibble of byte j, element j + 16 in the high nibble; q = x / d + 8
    expect(bytes[5] & 15).toBe(0);
    expect(bytes[0] & 15).toBe(4);
    expect(bytes[0] >> 4).toBe(((16 % 8) - 4) + 8);
    expect([...decode('q4_0', bytes, [32])]).toEqual(x);
  });

  it('bounds the round-trip error of random rows and refuses bad shapes', () => {
    const x = Array.from({ length: 4 * 64 }, (_, i) => Math.sin(i * 1.7) * (1 + (i % 5)));
    for (const [dt, levels] of [['q8_0', 127], ['q4_0', 8]] as const) {
      const back = decode(dt, encode(dt, x, [4, 64]), [4, 64]);
      for (let b = 0; b < 8; b++) {
        const blk = x.slice(b * 32, b * 32 + 32);
        const step = Math.max(...blk.map(Math.abs)) / levels;
        for (let j = 0; j < 32; j++) expect(Math.abs(back[b * 32 + j] - blk[j])).toBeLessThanOrEqual(step * 1.01);
      }
    }
    expect(() => encode('q4_0', new Float32Array(48), [48])).toThrow(InvalidArgument);
  });
});
