/**
 * WGSL for C = A·Bᵀ against an [N, K] weight (every linear layer at T > 1: prefill, training forwards), register-tiled.
 *
 * Each invocation owns a 4×4 block of C: rows r0 + i·WY and columns n0 + j·WX (i, j < 4), so that neighbouring
 * invocations take neighbouring rows of A and of the weight. K is walked four values at a time: four vec4s of A, four
 * of B (a weight's four values come from one word for q8_0/q4_0 and two for f16/bf16), sixteen dot products. Tails
 * need no padding: rows and columns past M and N are clamped for loading and skipped for storing, and the last K % 4
 * values are summed one by one.
 *
 * Two ways to feed it (GemmGeometry.shared):
 * - `direct`: each invocation loads its operands from storage itself. No workgroup memory and no barrier; on CPU
 *   rasterisers (lavapipe, SwiftShader) a barrier suspends and resumes every invocation, and the caches are what
 *   workgroup memory would be.
 * - `shared`: the workgroup stages a TM × 16 tile of A and a TN × 16 tile of B in workgroup memory (vec4s along K,
 *   every invocation loading its share), two barriers per 16 values of K: the layout meant for GPUs, which keep the
 *   64×64 kernel by default until one measures this (RMAS_GEMM=shared; matmul/index.ts).
 * The workgroup is up to 64 invocations, WX × WY (gemmGeometry); its tile's rows follow M, so that a short prompt does not
 * pay for a tile of empty rows (the 64×64 kernel computed 64 rows for a 14-token prompt).
 */
import type { DType } from '../../formats/dtype';
import { enableF16, mainSignature } from '../wgsl';
import { FLAG_ACCUMULATE, FLAG_BIAS, MATMUL_UNIFORMS, type MatmulVariant, rowColLoader } from './wgsl';

export interface GemmGeometry {
  /** Invocations along N and M; the workgroup's tile of C is (4·wy) × (4·wx). */
  wx: number;
  wy: number;
  shared: boolean;
}

/** Invocations per workgroup at most (the shared cut always; the direct one where N ≥ 256). */
export const GEMM_INVOCATIONS = 64;
const TK = 16; // K values per staged tile (shared)

/**
 * The workgroup's shape for an M × N product. Direct: one row of invocations (a 4 × 4·wx tile), so that A's rows are
 * the same for the whole workgroup and a CPU rasteriser loads them once for all its lanes instead of gathering them
 * per lane; wx is 64, or fewer (down to 8) where N is narrow, so that a tiny model's 48 columns do not leave 208 of
 * 256 lanes idle. Shared: 64 invocations, 4·wy ≥ M where M is small (wy a power of two, 2 to 8), so that a short
 * prompt does not stage a tile of empty rows; wy ≥ 2 because a 4 × 256 tile pair would pass the 16 KiB of workgroup
 * memory every WebGPU device allows.
 */
export function gemmGeometry(M: number, N: number, shared: boolean): GemmGeometry {
  if (!shared) {
    let wx = 8;
    while (wx < GEMM_INVOCATIONS && 4 * wx < N) wx *= 2;
    return { wx, wy: 1, shared };
  }
  let wy = 2;
  while (wy < 8 && 4 * wy < M) wy *= 2;
  return { wx: GEMM_INVOCATIONS / wy, wy, shared };
}

/** Invocations per workgroup. */
export const gemmInvocations = (g: GemmGeometry) => g.wx * g.wy;

/** Rows and columns of C one workgroup covers. */
export const gemmTile = (g: GemmGeometry) => ({ tm: 4 * g.wy, tn: 4 * g.wx });

/** Bytes of workgroup memory the geometry uses (0 for direct). */
export const gemmWorkgroupBytes = (g: GemmGeometry) => (g.shared ? (4 * g.wy + 4 * g.wx) * (TK / 4 + 1) * 16 : 0);

/**
 * Whether the kernel reads this B: f16/bf16 as u32 pairs need an even row stride and an even first column (the
 * pairs must not straddle words), q8_0/q4_0 a first column on a 4-value boundary. Others always.
 */
export function gemmReadsB(dtype: DType, native: boolean, ldbElems: number, col0: number): boolean {
  if (dtype === 'q8_0' || dtype === 'q4_0') return col0 % 4 === 0;
  if ((dtype === 'f16' && !native) || dtype === 'bf16') return ldbElems % 2 === 0 && col0 % 2 === 0;
  return true;
}

/** `fn loadB4(row, col) -> vec4<f32>`: weight row `row`, values col..col+3 (col as gemmReadsB allows). */
function loadB4(v: MatmulVariant): string {
  const head = 'fn loadB4(row: u32, col: u32) -> vec4<f32> {';
  switch (v.dtype) {
    case 'f32':
      return `${head}
  let i = row * u.ldb + col;
  return vec4<f32>(b[i], b[i + 1u], b[i + 2u], b[i + 3u]);
}`;
    case 'f16':
      if (v.native) {
        return `${head}
  let i = row * u.ldb + col;
  return vec4<f32>(f32(b[i]), f32(b[i + 1u]), f32(b[i + 2u]), f32(b[i + 3u]));
}`;
      }
      return `${head}
  let w = (row * u.ldb + col) >> 1u;
  return vec4<f32>(unpack2x16float(b[w]), unpack2x16float(b[w + 1u]));
}`;
    case 'bf16':
      return `${head}
  let w = (row * u.ldb + col) >> 1u;
  let p = b[w];
  let q = b[w + 1u];
  return vec4<f32>(bitcast<f32>(p << 16u), bitcast<f32>(p & 0xffff0000u), bitcast<f32>(q << 16u), bitcast<f32>(q & 0xffff0000u));
}`;
    case 'q8_0':
      return `${head}
  let base = row * u.ldb;
  let q = b[base + (col >> 2u)];
  let s = unpack2x16float(b[base + (u.b_cols >> 2u) + (col >> 6u)])[(col >> 5u) & 1u];
  let x = vec4<i32>(bitcast<i32>(q << 24u), bitcast<i32>(q << 16u), bitcast<i32>(q << 8u), bitcast<i32>(q)) >> vec4<u32>(24u);
  return vec4<f32>(x) * s;
}`;
    case 'q4_0':
      // byte j of a 16-byte block holds element j (low nibble) and j + 16 (high): four values at p = col % 32 are
      // the low nibbles (p < 16) or the high ones of the block's word (p % 16) / 4
      return `${head}
  let base = row * u.ldb;
  let blk = col >> 5u;
  let p = col & 31u;
  let q = b[base + blk * 4u + ((p & 15u) >> 2u)] >> ((p >> 4u) * 4u);
  let s = unpack2x16float(b[base + (u.b_cols >> 3u) + (blk >> 1u)])[blk & 1u];
  let x = (vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(15u));
  return (vec4<f32>(x) - 8.0) * s;
}`;
    default:
      throw new Error(`gemm: no reader for ${v.dtype}`);
  }
}

/** The bindings and helpers both cuts share: A, B (as rowColLoader declares it, for the K tail), bias, C. */
function common(v: MatmulVariant): string {
  return `${enableF16(v.native)}${MATMUL_UNIFORMS}
@group(0) @binding(1) var<storage, read> a: array<f32>;
${rowColLoader('b', 2, v.dtype, v.native, 'u.ldb', 'u.b_cols')}
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> c: array<f32>;
${loadB4(v)}
fn loadA4(i: u32) -> vec4<f32> {
  return vec4<f32>(a[i], a[i + u.a_sk], a[i + 2u * u.a_sk], a[i + 3u * u.a_sk]);
}
fn dotRows(x: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>) -> vec4<f32> {
  return vec4<f32>(dot(x, b0), dot(x, b1), dot(x, b2), dot(x, b3));
}`;
}

/** Stores the 4×4 block (acc[i][j] = C row r0 + i·WY, column n0 + j·WX) with bias and accumulation, skipping tails. */
function storeBlock(g: GemmGeometry): string {
  return `let cBase = u.c_off + bz * u.c_sb;
  let accum = (u.flags & ${FLAG_ACCUMULATE}u) != 0u;
  for (var i = 0u; i < 4u; i++) {
    let r = r0 + i * ${g.wy}u;
    if (r >= u.M) { break; }
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + j * ${g.wx}u;
      if (n >= u.N) { break; }
      var x = acc[i][j];
      if ((u.flags & ${FLAG_BIAS}u) != 0u) { x += bias[u.bias_off + n]; }
      let idx = cBase + r * u.c_sm + n * u.c_sn;
      if (accum) { x += c[idx]; }
      c[idx] = x;
    }
  }`;
}

/** Per-invocation rows of A and of B, clamped into range: loads past M or N read a real row, whose sums are dropped. */
function prologue(g: GemmGeometry): string {
  // one row of invocations: A's rows are the same for the whole workgroup (uniform loads on CPU rasterisers)
  return `let lx = ${g.wy === 1 ? 'lid.x' : `lid.x % ${g.wx}u`};
  let ly = ${g.wy === 1 ? '0u' : `lid.x / ${g.wx}u`};
  let bz = wid.z;
  let r0 = wid.y * ${4 * g.wy}u + ly;
  let n0 = wid.x * ${4 * g.wx}u + lx;
  let aBase = u.a_off + bz * u.a_sb;
  let bRow = u.b_row0 + bz * u.b_sbr;
  var ar: array<u32, 4>;
  var br: array<u32, 4>;
  for (var i = 0u; i < 4u; i++) {
    ar[i] = aBase + min(r0 + i * ${g.wy}u, u.M - 1u) * u.a_sm;
    br[i] = bRow + min(n0 + i * ${g.wx}u, u.N - 1u);
  }
  var acc: array<vec4<f32>, 4>;`;
}

/** The last K % 4 values (direct) or the values past the last whole tile (shared), one at a time. */
const KTAIL = `for (var k = kEnd; k < u.K; k++) {
    var bk: vec4<f32>;
    for (var j = 0u; j < 4u; j++) { bk[j] = load_b_rc(br[j], u.b_col0 + k); }
    for (var i = 0u; i < 4u; i++) { acc[i] = fma(vec4<f32>(a[ar[i] + k * u.a_sk]), bk, acc[i]); }
  }`;

function directWgsl(v: MatmulVariant, g: GemmGeometry): string {
  return `${common(v)}
${mainSignature(gemmInvocations(g))} {
  ${prologue(g)}
  let kEnd = u.K & ~3u;
  for (var k = 0u; k < kEnd; k += 4u) {
    let col = u.b_col0 + k;
    let b0 = loadB4(br[0], col);
    let b1 = loadB4(br[1], col);
    let b2 = loadB4(br[2], col);
    let b3 = loadB4(br[3], col);
    let ak = k * u.a_sk;
    acc[0] += dotRows(loadA4(ar[0] + ak), b0, b1, b2, b3);
    acc[1] += dotRows(loadA4(ar[1] + ak), b0, b1, b2, b3);
    acc[2] += dotRows(loadA4(ar[2] + ak), b0, b1, b2, b3);
    acc[3] += dotRows(loadA4(ar[3] + ak), b0, b1, b2, b3);
  }
  ${KTAIL}
  ${storeBlock(g)}
}`;
}

/**
 * Shared cut: As holds the tile's 4·WY rows of A and Bs its 4·WX weight rows, TK / 4 vec4s each plus one of padding
 * (rows 4·(TK/4 + 1) words apart: neighbouring invocations read neighbouring rows without bank conflicts). Every
 * invocation stages its share of both (rows clamped like the direct cut's), then reads its rows of the tile.
 */
function sharedWgsl(v: MatmulVariant, g: GemmGeometry): string {
  const { tm, tn } = gemmTile(g);
  const ld = TK / 4 + 1;
  // staging: the 64 invocations fill A's tm·TK/4 vec4s, then B's tn·TK/4, consecutive invocations along K
  return `${common(v)}
var<workgroup> As: array<vec4<f32>, ${tm * ld}>;
var<workgroup> Bs: array<vec4<f32>, ${tn * ld}>;
${mainSignature(gemmInvocations(g))} {
  ${prologue(g)}
  let kEnd = u.K - u.K % ${TK}u;
  let rowA0 = wid.y * ${tm}u;
  let rowB0 = wid.x * ${tn}u;
  for (var k0 = 0u; k0 < kEnd; k0 += ${TK}u) {
    for (var e = lid.x; e < ${(tm * TK) / 4}u; e += ${GEMM_INVOCATIONS}u) {
      let row = e / ${TK / 4}u;
      let q = e % ${TK / 4}u;
      let ra = aBase + min(rowA0 + row, u.M - 1u) * u.a_sm;
      As[row * ${ld}u + q] = loadA4(ra + (k0 + 4u * q) * u.a_sk);
    }
    for (var e = lid.x; e < ${(tn * TK) / 4}u; e += ${GEMM_INVOCATIONS}u) {
      let row = e / ${TK / 4}u;
      let q = e % ${TK / 4}u;
      Bs[row * ${ld}u + q] = loadB4(bRow + min(rowB0 + row, u.N - 1u), u.b_col0 + k0 + 4u * q);
    }
    workgroupBarrier();
    for (var q = 0u; q < ${TK / 4}u; q++) {
      let b0 = Bs[lx * ${ld}u + q];
      let b1 = Bs[(lx + ${g.wx}u) * ${ld}u + q];
      let b2 = Bs[(lx + ${2 * g.wx}u) * ${ld}u + q];
      let b3 = Bs[(lx + ${3 * g.wx}u) * ${ld}u + q];
      acc[0] += dotRows(As[ly * ${ld}u + q], b0, b1, b2, b3);
      acc[1] += dotRows(As[(ly + ${g.wy}u) * ${ld}u + q], b0, b1, b2, b3);
      acc[2] += dotRows(As[(ly + ${2 * g.wy}u) * ${ld}u + q], b0, b1, b2, b3);
      acc[3] += dotRows(As[(ly + ${3 * g.wy}u) * ${ld}u + q], b0, b1, b2, b3);
    }
    workgroupBarrier();
  }
  ${KTAIL}
  ${storeBlock(g)}
}`;
}

/** The kernel for one variant and geometry (pipeline key: gemmKey). */
export function gemmWgsl(v: MatmulVariant, g: GemmGeometry): string {
  return g.shared ? sharedWgsl(v, g) : directWgsl(v, g);
}

export const gemmKey = (v: MatmulVariant, g: GemmGeometry) =>
  `matmul_${v.dtype}${v.native ? 'n' : ''}_gemm-${g.shared ? 'shared' : 'direct'}${g.wx}x${g.wy}_wg${gemmInvocations(g)}`;
