/**
 * WGSL for matmul: a register-blocked tiled kernel (64×64 tile, 4×4 outputs per thread) for prefill and
 * training shapes, and a GEMV for small M against an [N, K] weight (decode: memory-bound, 8 output
 * columns per workgroup, 32 lanes each reducing over K in workgroup memory). B in f32/f16/bf16 is read
 * through loadFn, q8_0/q4_0 are dequantized in the kernel from u32 words (fused).
 */
import type { DType } from '../../formats/dtype';
import { enableF16, flatWorkgroup, loadFn, mainSignature } from '../wgsl';

/** The uniform block of every matmul dispatch (field order = Uniforms order in index.ts). */
export const MATMUL_UNIFORMS = `struct P {
  M: u32, N: u32, K: u32, flags: u32,
  a_off: u32, a_sb: u32, a_sm: u32, a_sk: u32,
  b_row0: u32, b_col0: u32, b_sbr: u32, ldb: u32,
  c_off: u32, c_sb: u32, c_sm: u32, c_sn: u32,
  bias_off: u32, b_cols: u32,
}
@group(0) @binding(0) var<uniform> u: P;`;

export const FLAG_ACCUMULATE = 1;
export const FLAG_BIAS = 2;
export const FLAG_TRANS_A = 4;
export const FLAG_TRANS_B = 8;

/**
 * Declares `name` at `binding` and `fn load_<name>_rc(row, col) -> f32` reading storage row `row`, column
 * `col` of a 2-D tensor in any dtype. `ld` is the row stride (elements for f32/f16/bf16, u32 words for
 * quantized rows) and `cols` the number of columns, both WGSL expressions.
 */
export function rowColLoader(name: string, binding: number, dtype: DType, native: boolean, ld: string, cols: string): string {
  const fn = `fn load_${name}_rc(row: u32, col: u32) -> f32`;
  switch (dtype) {
    case 'q8_0':
      return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<u32>;
${fn} {
  let base = row * ${ld};
  let q = ${name}[base + (col >> 2u)];
  let v = bitcast<i32>(q << (24u - 8u * (col & 3u))) >> 24u;
  let s = unpack2x16float(${name}[base + (${cols} >> 2u) + (col >> 6u)])[(col >> 5u) & 1u];
  return f32(v) * s;
}`;
    case 'q4_0':
      // GGUF nibble order: byte j of a block holds element j (low) and element j + 16 (high)
      return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<u32>;
${fn} {
  let base = row * ${ld};
  let blk = col >> 5u;
  let p = col & 31u;
  let byte = blk * 16u + (p & 15u);
  let nib = (${name}[base + (byte >> 2u)] >> ((byte & 3u) * 8u + (p >> 4u) * 4u)) & 15u;
  let s = unpack2x16float(${name}[base + (${cols} >> 3u) + (blk >> 1u)])[blk & 1u];
  return (f32(nib) - 8.0) * s;
}`;
    default:
      return `${loadFn(name, binding, dtype, native)}
${fn} { return load_${name}(row * ${ld} + col); }`;
  }
}

/**
 * Transposes, bias and accumulation are uniform flags rather than variants: one pipeline per weight dtype
 * and path keeps compile time down (SwiftShader needs seconds per pipeline) at the cost of a few selects.
 */
export interface MatmulVariant {
  dtype: DType;
  /** f16 B through array<f16> (shader-f16 devices only). */
  native: boolean;
}

// bias is always bound (A's binding stands in when there is none, with FLAG_BIAS off)
const TAIL = `@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;
fn store(idx: u32, n: u32, acc: f32) {
  var v = acc;
  if ((u.flags & ${FLAG_BIAS}u) != 0u) { v += bias[u.bias_off + n]; }
  if ((u.flags & ${FLAG_ACCUMULATE}u) != 0u) { v += c[idx]; }
  c[idx] = v;
}`;

function loadBFn(v: MatmulVariant): string {
  return `${rowColLoader('b', 2, v.dtype, v.native, 'u.ldb', 'u.b_cols')}
fn loadB(bi: u32, k: u32, n: u32) -> f32 {
  let tb = (u.flags & ${FLAG_TRANS_B}u) != 0u;
  return load_b_rc(u.b_row0 + bi * u.b_sbr + select(k, n, tb), u.b_col0 + select(n, k, tb));
}`;
}

const TILE = 64;
const TK = 16;
const LDV = TILE / 4 + 1; // vec4s per row of a workgroup tile; the extra one staggers the k-strided stores across banks

/**
 * 256 threads as 16×16; thread (tx, ty) owns rows 4ty..4ty+3 and columns 4tx..4tx+3 of a 64×64 tile of C.
 * Tiles live in workgroup memory as vec4s along m (A) and n (B), so each k step is two vec4 loads for 16 FMAs.
 * Each thread fills whole vec4s of the tiles (one of As, one of Bs per k step): a store to one component
 * of a workgroup vec4 is a read-modify-write of the whole vector on some backends (Tint's FXC HLSL
 * output), which would race with the invocations storing the other three components.
 */
/** tiledWgsl's vec4 loads: four rows of A's tile at column gk, four columns of B's tile at row gkb. */
const TILE_A4 = 'vec4<f32>(tileA(aBase, gm, gk), tileA(aBase, gm + 1u, gk), tileA(aBase, gm + 2u, gk), tileA(aBase, gm + 3u, gk))';
const TILE_B4 = 'vec4<f32>(tileB(bz, gkb, gn), tileB(bz, gkb, gn + 1u), tileB(bz, gkb, gn + 2u), tileB(bz, gkb, gn + 3u))';

export function tiledWgsl(v: MatmulVariant): string {
  return `${enableF16(v.native)}${MATMUL_UNIFORMS}
@group(0) @binding(1) var<storage, read> a: array<f32>;
${loadBFn(v)}
${TAIL}
var<workgroup> As: array<vec4<f32>, ${TK * LDV}>;
var<workgroup> Bs: array<vec4<f32>, ${TK * LDV}>;
fn tileA(aBase: u32, gm: u32, gk: u32) -> f32 {
  if (gm < u.M && gk < u.K) { return a[aBase + gm * u.a_sm + gk * u.a_sk]; }
  return 0.0;
}
fn tileB(bz: u32, gk: u32, gn: u32) -> f32 {
  if (gn < u.N && gk < u.K) { return loadB(bz, gk, gn); }
  return 0.0;
}
${mainSignature(256)} {
  let tx = lid.x % 16u;
  let ty = lid.x / 16u;
  let bz = wid.z;
  let m0 = wid.y * ${TILE}u;
  let n0 = wid.x * ${TILE}u;
  let aBase = u.a_off + bz * u.a_sb;
  let ta = (u.flags & ${FLAG_TRANS_A}u) != 0u;
  let tb = (u.flags & ${FLAG_TRANS_B}u) != 0u;
  // the vec4 this thread fills: consecutive threads walk the operand's contiguous dim (k when A is
  // row-major or B is [N, K], else m or n), so each of the four loads is coalesced
  let ka = select(tx, ty, ta);
  let ma = 4u * select(ty, tx, ta);
  let kb = select(ty, tx, tb);
  let nb = 4u * select(tx, ty, tb);
  var acc: array<vec4<f32>, 4>;
  for (var k0 = 0u; k0 < u.K; k0 += ${TK}u) {
    let gm = m0 + ma;
    let gk = k0 + ka;
    As[ka * ${LDV}u + ma / 4u] = ${TILE_A4};
    let gn = n0 + nb;
    let gkb = k0 + kb;
    Bs[kb * ${LDV}u + nb / 4u] = ${TILE_B4};
    workgroupBarrier();
    for (var kk = 0u; kk < ${TK}u; kk++) {
      let a4 = As[kk * ${LDV}u + ty];
      let b4 = Bs[kk * ${LDV}u + tx];
      acc[0] = fma(vec4<f32>(a4.x), b4, acc[0]);
      acc[1] = fma(vec4<f32>(a4.y), b4, acc[1]);
      acc[2] = fma(vec4<f32>(a4.z), b4, acc[2]);
      acc[3] = fma(vec4<f32>(a4.w), b4, acc[3]);
    }
    workgroupBarrier();
  }
  let cBase = u.c_off + bz * u.c_sb;
  for (var i = 0u; i < 4u; i++) {
    let gm = m0 + 4u * ty + i;
    if (gm >= u.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let gn = n0 + 4u * tx + j;
      if (gn >= u.N) { break; }
      store(cBase + gm * u.c_sm + gn * u.c_sn, gn, acc[i][j]);
    }
  }
}`;
}

/** How GEMV walks one weight row: element by element, or word by word (q8_0: 4, q4_0: 8, f16/bf16 pairs: 2). */
export type GemvMode = 'elem' | 'word';

export const GEMV_ROWS = 8; // output columns (weight rows) per workgroup
export const GEMV_MR = 4; // rows of A per workgroup (z), so a weight word is loaded once for 4 rows

/** The inner loop over one weight row `row` for lane `lane`, accumulating into vec4 `acc` (one lane per A row). */
function gemvBody(v: MatmulVariant, mode: GemvMode): string {
  if (mode === 'elem') {
    return `for (var k = lane; k < u.K; k += 32u) { acc += load_b_rc(row, k) * aCol(k); }`;
  }
  switch (v.dtype) {
    case 'q8_0':
      return `let base = row * u.ldb;
    let qw = u.K >> 2u;
    for (var w = lane; w < qw; w += 32u) {
      let q = b[base + w];
      let s = unpack2x16float(b[base + qw + (w >> 4u)])[(w >> 3u) & 1u];
      let k = 4u * w;
      acc += (f32(bitcast<i32>(q << 24u) >> 24u) * s) * aCol(k) + (f32(bitcast<i32>(q << 16u) >> 24u) * s) * aCol(k + 1u)
           + (f32(bitcast<i32>(q << 8u) >> 24u) * s) * aCol(k + 2u) + (f32(bitcast<i32>(q) >> 24u) * s) * aCol(k + 3u);
    }`;
    case 'q4_0':
      return `let base = row * u.ldb;
    let qw = u.K >> 3u;
    for (var w = lane; w < qw; w += 32u) {
      let q = b[base + w];
      let blk = w >> 2u;
      let s = unpack2x16float(b[base + qw + (blk >> 1u)])[blk & 1u];
      let k = blk * 32u + (w & 3u) * 4u;
      for (var i = 0u; i < 4u; i++) {
        let lo = f32((q >> (8u * i)) & 15u) - 8.0;
        let hi = f32((q >> (8u * i + 4u)) & 15u) - 8.0;
        acc += (lo * s) * aCol(k + i) + (hi * s) * aCol(k + 16u + i);
      }
    }`;
    case 'f16':
    case 'bf16': {
      const unpack = v.dtype === 'f16'
        ? 'let x = unpack2x16float(q);'
        : 'let x = vec2<f32>(bitcast<f32>(q << 16u), bitcast<f32>(q & 0xffff0000u));';
      return `let base = row * u.ldb;
    for (var w = lane; w < (u.K >> 1u); w += 32u) {
      let q = b[base + w];
      ${unpack}
      acc += x.x * aCol(2u * w) + x.y * aCol(2u * w + 1u);
    }`;
    }
    default:
      throw new Error(`gemv: no word mode for ${v.dtype}`);
  }
}

/**
 * GEMV: workgroup = 8 weight rows (output columns) × 32 lanes; each lane strides over K and keeps one
 * partial sum per A row (up to 4), then the 32 partials are tree-reduced in workgroup memory.
 * Needs transB with the whole K in one dispatch (b_col0 = 0) and batch 1.
 */
export function gemvWgsl(v: MatmulVariant, mode: GemvMode): string {
  const bDecl = mode === 'word'
    ? '@group(0) @binding(2) var<storage, read> b: array<u32>;'
    : rowColLoader('b', 2, v.dtype, v.native, 'u.ldb', 'u.b_cols');
  return `${enableF16(v.native)}${MATMUL_UNIFORMS}
@group(0) @binding(1) var<storage, read> a: array<f32>;
${bDecl}
${TAIL}
var<workgroup> red: array<vec4<f32>, 256>;
var<private> m0: u32;
var<private> mr: u32;
fn aCol(k: u32) -> vec4<f32> {
  var x = vec4<f32>(0.0);
  for (var i = 0u; i < mr; i++) { x[i] = a[u.a_off + (m0 + i) * u.a_sm + k * u.a_sk]; }
  return x;
}
${mainSignature(256)} {
  let lane = lid.x % 32u;
  let n = ${flatWorkgroup} * ${GEMV_ROWS}u + lid.x / 32u;
  m0 = wid.z * ${GEMV_MR}u;
  mr = min(${GEMV_MR}u, u.M - m0);
  var acc = vec4<f32>(0.0);
  if (n < u.N) {
    let row = u.b_row0 + n;
    ${gemvBody(v, mode)}
  }
  red[lid.x] = acc;
  workgroupBarrier();
  for (var s = 16u; s > 0u; s >>= 1u) {
    if (lane < s) { red[lid.x] += red[lid.x + s]; }
    workgroupBarrier();
  }
  if (lane == 0u && n < u.N) {
    let r = red[lid.x];
    for (var i = 0u; i < mr; i++) { store(u.c_off + (m0 + i) * u.c_sm + n * u.c_sn, n, r[i]); }
  }
}`;
}
