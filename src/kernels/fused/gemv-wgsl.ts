/**
 * The WGSL of the fused GEMV (gemv.ts has what it computes): a workgroup holds `rows` weight rows of `lanes` lanes
 * each (gemvGeometry) and up to 4 rows of x, each weight word read once; the binding order of its inputs (`roles`).
 */
import { type DType, isQuant, rowBytes } from '../../formats/dtype';
import { ACT_WGSL, MATH } from '../activation/wgsl';
import { rowColLoader } from '../matmul/wgsl';
import { SUBGROUP_BUILTINS, blockSumWgsl, flatWorkgroup, loadFn, mainSignature } from '../wgsl';
import type { FusedGemvAttrs } from './gemv';

/** Inputs in binding order: x, [o, wpost], [γ], [β], [gate], W₀ … Wₙ₋₁, [bias], [residual]. */
export function roles(a: FusedGemvAttrs): string[] {
  const r = ['x'];
  if (a.preAdd) r.push('o', 'wpost');
  if (a.norm) r.push('gamma');
  if (a.norm?.kind === 'layer') r.push('beta');
  if (a.inputGate) r.push('gate');
  for (let s = 0; s < a.weights; s++) r.push(`w${s}`);
  if (a.bias) r.push('bias');
  if (a.residual) r.push('res');
  return r;
}

export const MR = 4; // rows of x per workgroup (one vec4 accumulator)
/** Floats of staged input: with the 4 KB reduction array, 16 KB of workgroup memory (every device's minimum). */
export const STAGE = 3072;

/**
 * How a GEMV is cut: `lanes` invocations sum each weight row, `rows` rows per workgroup. `shuffleOnly`: a row's lanes
 * always share one subgroup (lanes ≤ the device's narrowest subgroup), so a butterfly of shuffles is the whole row sum.
 */
export interface Geometry {
  lanes: number;
  rows: number;
  shuffleOnly: boolean;
}

/** The cut wide GPUs were tuned with: 32 lanes per row, 8 rows, 256 invocations. */
export const WIDE: Geometry = { lanes: 32, rows: 8, shuffleOnly: false };

/**
 * The GEMV's cut. Wide unless `narrow`; narrow: lanes the subgroup width (4 without subgroups), fewer when a row has
 * fewer words than that, so the row sum is shuffles alone; 16 rows (64 invocations at 4 lanes) per workgroup, fewer
 * where 16 rows would pass the device's `maxInvocations` per workgroup.
 * On CPU rasterisers a lane is a SIMD slot: the wide cut leaves most idle on rows of 6–20 words and pays workgroup
 * barriers for sums a subgroup makes alone.
 */
export function gemvGeometry(narrow: boolean, walks: readonly Walk[], K: number, subgroupMin: number, maxInvocations = 256): Geometry {
  if (!narrow) return WIDE;
  const words = Math.max(...walks.map((w) => lanesWork(w, K)));
  const width = subgroupMin >= 4 ? Math.min(subgroupMin, 32) : 4;
  let lanes = 4;
  while (lanes < width && lanes < words) lanes *= 2;
  return { lanes, rows: Math.min(16, maxInvocations / lanes), shuffleOnly: subgroupMin >= lanes };
}

/** Steps of a row's walk: its loop's trip count at one lane. */
function lanesWork(w: Walk, K: number): number {
  if (w.mode === 'elem') return K;
  if (isQuant(w.dtype)) return K / 32;
  return w.dtype === 'f32' ? K / 4 : K / 8;
}

/** How one weight row is walked: whole vec4 words, scalar words, or one element per load; `ld` in those units' words. */
interface Walk {
  dtype: DType;
  mode: 'vec4' | 'word' | 'elem';
  /** Row stride: u32 words for quantized rows and vec4/word walks of halves, elements for f32 and elem walks. */
  ld: number;
}

export function walkOf(dtype: DType, K: number): Walk {
  if (isQuant(dtype)) {
    const ld = rowBytes(dtype, K) / 4;
    return { dtype, mode: ld % 4 === 0 ? 'vec4' : 'word', ld };
  }
  if (dtype === 'f32') return K % 4 === 0 ? { dtype, mode: 'vec4', ld: K } : { dtype, mode: 'elem', ld: K };
  // f16/bf16: eight values per vec4 of words
  return K % 8 === 0 ? { dtype, mode: 'vec4', ld: K / 2 } : { dtype, mode: 'elem', ld: K };
}

export interface Variant {
  attrs: FusedGemvAttrs;
  walks: Walk[];
  /** The transformed input rows live in workgroup memory (sa[i·K + k]). */
  stage: boolean;
  /** Reduce through subgroups (GpuContext.subgroupReduce): one barrier per sum instead of a tree of them. */
  subgroups: boolean;
  paramDtypes: DType[];
  geometry: Geometry;
  /**
   * The norm's prologue alone (the narrow cut): per row of x its statistics once, then the GEMV's input (normalised,
   * gated) written out, and Gemma's pre-added sum; attrs.weights is 0. One workgroup of `PROLOGUE_WG` per 4 rows.
   */
  prologue?: boolean;
  /**
   * One row of x per workgroup (the narrow cut; z counts rows): each lane's vec4 sums four consecutive k of that row
   * (xv) instead of one k of up to four rows (aCol), which left three quarters of every product idle at M = 1. A
   * batch's rows then take the same arithmetic as one prompt alone, bit for bit.
   */
  one?: boolean;
}

export const PROLOGUE_WG = 64;

/** `fn dot_s(row: u32, lane: u32) -> vec4<f32>`: weight s's row against x's rows (aCol). */
function dotFn(s: number, w: Walk, binding: number, lanes: number, one: boolean): string {
  const name = `w${s}`;
  const ld = `u.ld${s}`;
  if (w.mode === 'elem') {
    return `${rowColLoader(name, binding, w.dtype, false, ld, 'u.K')}
fn dot_${s}(row: u32, lane: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  for (var k = lane; k < u.K; k += ${lanes}u) { acc += load_${name}_rc(row, k) * aCol(k); }
  return acc;
}`;
  }
  if (w.dtype === 'f32') {
    return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<vec4<f32>>;
fn dot_${s}(row: u32, lane: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  let base = row * (${ld} >> 2u);
  for (var g = lane; g < (u.K >> 2u); g += ${lanes}u) {
    let q = ${name}[base + g];
    let k = 4u * g;
    ${one ? 'acc += q * xv(k);' : 'acc += q.x * aCol(k) + q.y * aCol(k + 1u) + q.z * aCol(k + 2u) + q.w * aCol(k + 3u);'}
  }
  return acc;
}`;
  }
  // words: vec4 loads where rows are 16-byte aligned, else four scalar loads
  const decl = w.mode === 'vec4'
    ? `@group(0) @binding(${binding}) var<storage, read> ${name}: array<vec4<u32>>;
fn ${name}_w4(i: u32) -> vec4<u32> { return ${name}[i >> 2u]; }
fn ${name}_w1(i: u32) -> u32 { return ${name}[i >> 2u][i & 3u]; }`
    : `@group(0) @binding(${binding}) var<storage, read> ${name}: array<u32>;
fn ${name}_w4(i: u32) -> vec4<u32> { return vec4<u32>(${name}[i], ${name}[i + 1u], ${name}[i + 2u], ${name}[i + 3u]); }
fn ${name}_w1(i: u32) -> u32 { return ${name}[i]; }`;
  let loop: string;
  switch (w.dtype) {
    case 'q4_0':
      // a block: 4 words of nibbles (byte j holds element j low, j + 16 high), then its f16 scale among the row's scales
      loop = `let nb = u.K >> 5u;
  for (var blk = lane; blk < nb; blk += ${lanes}u) {
    let q = ${name}_w4(base + 4u * blk);
    let s = unpack2x16float(${name}_w1(base + (u.K >> 3u) + (blk >> 1u)))[blk & 1u];
    let k = 32u * blk;
    var part = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
      let wd = q[j];
      ${one ? `let lo = vec4<f32>(vec4<u32>(wd, wd >> 8u, wd >> 16u, wd >> 24u) & vec4<u32>(15u)) - 8.0;
      let hi = vec4<f32>(vec4<u32>(wd >> 4u, wd >> 12u, wd >> 20u, wd >> 28u) & vec4<u32>(15u)) - 8.0;
      part += lo * xv(k + 4u * j) + hi * xv(k + 16u + 4u * j);` : `for (var b = 0u; b < 4u; b++) {
        let e = 4u * j + b;
        part += (f32((wd >> (8u * b)) & 15u) - 8.0) * aCol(k + e) + (f32((wd >> (8u * b + 4u)) & 15u) - 8.0) * aCol(k + 16u + e);
      }`}
    }
    acc += s * part;
  }`;
      break;
    case 'q8_0':
      loop = `let nb = u.K >> 5u;
  for (var blk = lane; blk < nb; blk += ${lanes}u) {
    let s = unpack2x16float(${name}_w1(base + (u.K >> 2u) + (blk >> 1u)))[blk & 1u];
    let k = 32u * blk;
    var part = vec4<f32>(0.0);
    for (var h = 0u; h < 2u; h++) {
      let q = ${name}_w4(base + 8u * blk + 4u * h);
      for (var j = 0u; j < 4u; j++) {
        let wd = q[j];
        let e = k + 16u * h + 4u * j;
        ${one ? `part += vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(wd << 24u, wd << 16u, wd << 8u, wd)) >> vec4<u32>(24u)) * xv(e);`
    : `part += f32(bitcast<i32>(wd << 24u) >> 24u) * aCol(e) + f32(bitcast<i32>(wd << 16u) >> 24u) * aCol(e + 1u)
              + f32(bitcast<i32>(wd << 8u) >> 24u) * aCol(e + 2u) + f32(bitcast<i32>(wd) >> 24u) * aCol(e + 3u);`}
      }
    }
    acc += s * part;
  }`;
      break;
    case 'f16':
    case 'bf16': {
      const unpack = (wd: string) => w.dtype === 'f16'
        ? `unpack2x16float(${wd})`
        : `vec2<f32>(bitcast<f32>(${wd} << 16u), bitcast<f32>(${wd} & 0xffff0000u))`;
      loop = one
        ? `for (var g = lane; g < (u.K >> 3u); g += ${lanes}u) {
    let q = ${name}_w4(base + 4u * g);
    let k = 8u * g;
    acc += vec4<f32>(${unpack('q.x')}, ${unpack('q.y')}) * xv(k) + vec4<f32>(${unpack('q.z')}, ${unpack('q.w')}) * xv(k + 4u);
  }`
        : `for (var g = lane; g < (u.K >> 3u); g += ${lanes}u) {
    let q = ${name}_w4(base + 4u * g);
    let k = 8u * g;
    for (var j = 0u; j < 4u; j++) {
      let wd = q[j];
      let p = ${unpack('wd')};
      acc += p.x * aCol(k + 2u * j) + p.y * aCol(k + 2u * j + 1u);
    }
  }`;
      break;
    }
    default:
      throw new Error(`fused_gemv: no word walk for ${w.dtype}`);
  }
  return `${decl}
fn dot_${s}(row: u32, lane: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  let base = row * ${ld};
  ${loop}
  return acc;
}`;
}

export function fusedGemvWgsl(v: Variant): string {
  const a = v.attrs;
  const { lanes, rows, shuffleOnly } = v.geometry;
  const WG = v.prologue ? PROLOGUE_WG : lanes * rows;
  const names = roles(a);
  const b = (n: string) => names.indexOf(n) + 1;
  const pd = [...v.paramDtypes];
  const param = (n: string) => (names.includes(n) ? loadFn(n, b(n), pd.shift()!) : '');
  const one = !!v.one;
  // one row of a plain input, every weight walked in whole words: x read as vec4s, four values per load
  const xVec = one && !v.stage && !a.preAdd && !a.inputGate && !a.norm && v.walks.every((w) => w.mode !== 'elem');
  const decls = [
    `@group(0) @binding(${b('x')}) var<storage, read> x: array<${xVec ? 'vec4<f32>' : 'f32'}>;`,
    a.preAdd ? `@group(0) @binding(${b('o')}) var<storage, read> o: array<f32>;` : '',
    param('wpost'),
    param('gamma'),
    param('beta'),
    a.inputGate ? `@group(0) @binding(${b('gate')}) var<storage, read> gate: array<f32>;` : '',
    a.bias ? `@group(0) @binding(${b('bias')}) var<storage, read> bias: array<f32>;` : '',
    a.residual ? `@group(0) @binding(${b('res')}) var<storage, read> res: array<f32>;` : '',
    `@group(0) @binding(${names.length + 1}) var<storage, read_write> out: array<f32>;`,
    a.preAdd ? `@group(0) @binding(${names.length + 2}) var<storage, read_write> x1: array<f32>;` : '',
  ].filter(Boolean).join('\n');
  const xin = a.preAdd
    ? 'x[(m0 + i) * u.K + k] + o[(m0 + i) * u.K + k] * ro[i] * (u.off2 + load_wpost(k))'
    : xVec ? 'x[(m0 * u.K + k) >> 2u][k & 3u]' : 'x[(m0 + i) * u.K + k]';
  let aval = 'xin(i, k)';
  if (a.norm?.kind === 'rms') aval = 'xin(i, k) * rr[i] * (u.off + load_gamma(k))';
  if (a.norm?.kind === 'layer') aval = '(xin(i, k) - mu[i]) * rr[i] * load_gamma(k) + load_beta(k)';
  if (a.inputGate) aval = `(${aval}) * sigmoid(gate[(m0 + i) * u.g_ld + (k / u.g_head) * u.g_hs + u.g_off + k % u.g_head])`;
  // per-row statistics, every thread striding over K; uniform control flow around wsum
  const stat = (expr: string, then: string) => `{
    var s = vec4<f32>(0.0);
    for (var k = lid.x; k < u.K; k += ${WG}u) { for (var i = 0u; i < mr; i++) { s[i] += ${expr}; } }
    let t = wsum(s, lid.x);
    ${then}
  }`;
  const stats = [
    a.preAdd ? stat('o[(m0 + i) * u.K + k] * o[(m0 + i) * u.K + k]', 'ro = inverseSqrt(t / f32(u.K) + u.eps2);') : '',
    a.norm?.kind === 'rms' ? stat('xin(i, k) * xin(i, k)', 'rr = inverseSqrt(t / f32(u.K) + u.eps);') : '',
    a.norm?.kind === 'layer' ? stat('xin(i, k)', 'mu = t / f32(u.K);') : '',
    a.norm?.kind === 'layer' ? stat('(xin(i, k) - mu[i]) * (xin(i, k) - mu[i])', 'rr = inverseSqrt(t / f32(u.K) + u.eps);') : '',
  ].filter(Boolean).join('\n  ');
  const segs = v.walks.map((w, s) => dotFn(s, w, b(`w${s}`), lanes, one)).join('\n');
  const starts = ['0u', 'u.s1', 'u.s2', 'u.s3'];
  const main = a.glu
    ? 'acc = dot_0(n, lane);\n    acc2 = dot_1(n, lane);'
    : v.walks.map((_, s) => {
      const cond = s === v.walks.length - 1 ? '' : `if (n < ${starts[s + 1]}) `;
      return `${s ? 'else ' : ''}${cond}{ acc = dot_${s}(n - ${starts[s]}, lane); }`;
    }).join('\n    ');
  let value = 'r[i]';
  if (a.bias) value = `(${value} + bias[n])`;
  if (a.act) value = `act_f(${value})`;
  if (a.glu) value = `act_f(${value}) * (r2[i]${a.bias ? ' + bias[u.N + n]' : ''})`;
  if (a.residual) value = `${value} + res[(m0 + i) * u.N + n]`;
  const act = a.glu ?? a.act;
  // the sums: over the workgroup (row statistics) and over a weight row's lanes
  const sums = v.subgroups
    ? `var<private> sgs: u32;
${blockSumWgsl('wsum_sg', WG, 'red')}
${v.prologue ? '' : shuffleOnly ? butterflyWgsl('rowsum', lanes) : blockSumWgsl('rowsum', lanes, 'red')}
fn wsum(v: vec4<f32>, l: u32) -> vec4<f32> {
  let s = wsum_sg(v, l, sgs, 0u);
  workgroupBarrier();
  return s;
}`
    : `fn wsum(v: vec4<f32>, l: u32) -> vec4<f32> {
  red[l] = v;
  workgroupBarrier();
  for (var k = ${WG / 2}u; k > 0u; k >>= 1u) {
    if (l < k) { red[l] += red[l + k]; }
    workgroupBarrier();
  }
  let s = red[0];
  workgroupBarrier();
  return s;
}
${v.prologue ? '' : `fn rowsum(v: vec4<f32>, l: u32, first: bool) -> vec4<f32> {
  if (!first) { workgroupBarrier(); }
  red[l] = v;
  workgroupBarrier();
  for (var s = ${lanes / 2}u; s > 0u; s >>= 1u) {
    if (l % ${lanes}u < s) { red[l] += red[l + s]; }
    workgroupBarrier();
  }
  return red[l - l % ${lanes}u];
}`}`;
  const rowsum = (acc: string, second: boolean) =>
    v.subgroups ? `rowsum(${acc}, lid.x, sgs, ${second ? WG / 2 : 0}u)` : `rowsum(${acc}, lid.x, ${!second})`;
  return `${v.subgroups ? 'enable subgroups;\n' : ''}struct P {
  M: u32, K: u32, N: u32, eps: f32, off: f32, eps2: f32, off2: f32,
  g_ld: u32, g_head: u32, g_hs: u32, g_off: u32, s1: u32, s2: u32, s3: u32,
  ld0: u32, ld1: u32, ld2: u32, ld3: u32,
}
@group(0) @binding(0) var<uniform> u: P;
${decls}
${MATH}
${act ? ACT_WGSL[act] : ''}
var<workgroup> red: array<vec4<f32>, ${WG}>;
var<private> m0: u32;
var<private> mr: u32;
var<private> rr: vec4<f32>;
var<private> mu: vec4<f32>;
var<private> ro: vec4<f32>;
${sums}
fn xin(i: u32, k: u32) -> f32 { return ${xin}; }
fn aval(i: u32, k: u32) -> f32 { return ${aval}; }
${v.prologue ? prologueMain(v, stats, WG) : `${one ? `${v.stage ? `var<workgroup> sa: array<f32, ${STAGE}>;
fn a1(k: u32) -> f32 { return sa[k]; }` : 'fn a1(k: u32) -> f32 { return aval(0u, k); }'}
fn aCol(k: u32) -> vec4<f32> { return vec4<f32>(a1(k), 0.0, 0.0, 0.0); }
fn xv(k: u32) -> vec4<f32> { return ${xVec ? 'x[(m0 * u.K + k) >> 2u]' : 'vec4<f32>(a1(k), a1(k + 1u), a1(k + 2u), a1(k + 3u))'}; }
fn fold(v: vec4<f32>) -> vec4<f32> {
  return vec4<f32>((v.x + v.y) + (v.z + v.w), 0.0, 0.0, 0.0);
}` : v.stage ? `var<workgroup> sa: array<f32, ${STAGE}>;
fn aCol(k: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  for (var i = 0u; i < mr; i++) { v[i] = sa[i * u.K + k]; }
  return v;
}` : `fn aCol(k: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  for (var i = 0u; i < mr; i++) { v[i] = aval(i, k); }
  return v;
}`}
${segs}
${mainSignature(WG, v.subgroups ? SUBGROUP_BUILTINS : '')} {
  ${v.subgroups ? 'sgs = sg;' : ''}
  m0 = wid.z${one ? '' : ` * ${MR}u`};
  mr = ${one ? '1u' : `min(${MR}u, u.M - m0)`};
  ${stats}
  ${a.preAdd ? `if (${flatWorkgroup} == 0u) {
    for (var k = lid.x; k < u.K; k += ${WG}u) { for (var i = 0u; i < mr; i++) { x1[(m0 + i) * u.K + k] = xin(i, k); } }
  }` : ''}
  ${v.stage ? `for (var k = lid.x; k < u.K; k += ${WG}u) { for (var i = 0u; i < mr; i++) { sa[i * u.K + k] = aval(i, k); } }
  workgroupBarrier();` : ''}
  let lane = lid.x % ${lanes}u;
  let n = ${flatWorkgroup} * ${rows}u + lid.x / ${lanes}u;
  var acc = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  if (n < u.N) {
    ${main}
  }
  let r = ${one ? `fold(${rowsum('acc', false)})` : rowsum('acc', false)};
  ${a.glu ? `let r2 = ${one ? `fold(${rowsum('acc2', true)})` : rowsum('acc2', true)};` : ''}
  if (lane == 0u && n < u.N) {
    for (var i = 0u; i < mr; i++) { out[(m0 + i) * u.N + n] = ${value}; }
  }
}`}`;
}

/** The prologue's entry point: the statistics, then x1 (pre-add) and the transformed input, element by element. */
function prologueMain(v: Variant, stats: string, WG: number): string {
  return `${mainSignature(WG, v.subgroups ? SUBGROUP_BUILTINS : '')} {
  ${v.subgroups ? 'sgs = sg;' : ''}
  m0 = wid.z * ${MR}u;
  mr = min(${MR}u, u.M - m0);
  ${stats}
  for (var k = lid.x; k < u.K; k += ${WG}u) {
    for (var i = 0u; i < mr; i++) {
      ${v.attrs.preAdd ? 'x1[(m0 + i) * u.K + k] = xin(i, k);' : ''}
      out[(m0 + i) * u.K + k] = aval(i, k);
    }
  }
}`;
}

/**
 * `fn <name>(v, l, sg, off) -> vec4<f32>` as blockSumWgsl's, for blocks of `lanes` that lie inside one subgroup: a
 * butterfly of shuffles gives every lane the block's sum, with no workgroup memory and no barrier.
 */
function butterflyWgsl(name: string, lanes: number): string {
  const masks: number[] = [];
  for (let m = lanes / 2; m >= 1; m /= 2) masks.push(m);
  return `fn ${name}(v: vec4<f32>, l: u32, sg: u32, off: u32) -> vec4<f32> {
  var r = v;
  ${masks.map((m) => `r += subgroupShuffleXor(r, ${m}u);`).join('\n  ')}
  return r;
}`;
}
