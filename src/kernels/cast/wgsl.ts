/**
 * WGSL for cast. Values travel as f32 bit patterns (u32), and the f16/bf16 conversions are done on bits with
 * round-to-nearest-even, so the GPU matches formats/dtype.ts exactly (WGSL leaves f32→f16 rounding and
 * overflow to the implementation). 16-bit outputs are written one u32 word (two values) per invocation.
 */
import type { DType } from '../../formats/dtype';
import { rowColLoader } from '../matmul/wgsl';
import { flatIndex, mainSignature } from '../wgsl';

export const CAST_BITS = `fn f32_to_f16(x: u32) -> u32 {
  let sign = (x >> 16u) & 0x8000u;
  let ex = (x >> 23u) & 0xffu;
  var mant = x & 0x7fffffu;
  if (ex == 0xffu) { return sign | 0x7c00u | select(0u, 0x200u, mant != 0u); }
  let e = i32(ex) - 112;
  if (e >= 31) { return sign | 0x7c00u; }
  if (e <= 0) {
    if (e < -10) { return sign; }
    mant |= 0x800000u;
    let shift = u32(14 - e);
    var half = mant >> shift;
    let rem = mant & ((1u << shift) - 1u);
    let mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u) != 0u)) { half += 1u; }
    return sign | half;
  }
  var half = (u32(e) << 10u) | (mant >> 13u);
  let rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u) != 0u)) { half += 1u; }
  return sign | half;
}
fn f16_to_f32(h: u32) -> u32 {
  let sign = (h & 0x8000u) << 16u;
  let ex = (h >> 10u) & 0x1fu;
  var mant = h & 0x3ffu;
  if (ex == 0x1fu) { return sign | 0x7f800000u | (mant << 13u); }
  if (ex != 0u) { return sign | ((ex + 112u) << 23u) | (mant << 13u); }
  if (mant == 0u) { return sign; }
  var e = 113u; // subnormal f16: shift the leading one up to the implicit bit
  loop {
    mant <<= 1u;
    e -= 1u;
    if ((mant & 0x400u) != 0u) { break; }
  }
  return sign | (e << 23u) | ((mant & 0x3ffu) << 13u);
}
fn f32_to_bf16(x: u32) -> u32 {
  if ((x & 0x7fffffffu) > 0x7f800000u) { return ((x >> 16u) | 0x40u) & 0xffffu; }
  return ((x + 0x7fffu + ((x >> 16u) & 1u)) >> 16u) & 0xffffu;
}`;

function readBits(from: DType): string {
  switch (from) {
    case 'f32':
    case 'i32':
      return `@group(0) @binding(1) var<storage, read> x: array<u32>;
fn bits(i: u32) -> u32 { return x[i]; }`;
    case 'f16':
    case 'bf16':
      return `@group(0) @binding(1) var<storage, read> x: array<u32>;
fn bits(i: u32) -> u32 {
  let h = (x[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu;
  return ${from === 'f16' ? 'f16_to_f32(h)' : 'h << 16u'};
}`;
    default:
      return `${rowColLoader('x', 1, from, false, 'u.ld', 'u.cols')}
fn bits(i: u32) -> u32 { return bitcast<u32>(load_x_rc(i / u.cols, i % u.cols)); }`;
  }
}

export function castWgsl(from: DType, to: 'f32' | 'f16' | 'bf16', wg: number): string {
  const head = `struct P { len: u32, in_off: u32, out_off: u32, cols: u32, ld: u32, w0: u32, words: u32, chunk_len: u32 }
@group(0) @binding(0) var<uniform> u: P;
${CAST_BITS}
${readBits(from)}
@group(0) @binding(2) var<storage, read_write> out: array<u32>;`;
  if (to === 'f32') {
    return `${head}
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.len) { return; }
  out[u.out_off + i] = bits(u.in_off + i);
}`;
  }
  // a word at a dispatch's edge keeps the half another dispatch writes; padding past the chunk is zeroed
  return `${head}
fn half_at(le: u32, old: u32) -> u32 {
  if (le >= u.out_off && le < u.out_off + u.len) { return ${to === 'f16' ? 'f32_to_f16' : 'f32_to_bf16'}(bits(u.in_off + le - u.out_off)); }
  if (le >= u.chunk_len) { return 0u; }
  return old;
}
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.words) { return; }
  let w = u.w0 + i;
  let lo = 2u * w;
  let edge = lo < u.out_off || lo + 2u > u.out_off + u.len;
  var old = 0u;
  if (edge) { old = out[w]; }
  out[w] = half_at(lo, old & 0xffffu) | (half_at(lo + 1u, old >> 16u) << 16u);
}`;
}
