/**
 * The fused GEMV of the inference path: y = epilogue(prologue(x) · [W₀; W₁; …]ᵀ) for a few rows of x (decode and
 * latent steps), one dispatch. The prologue normalises x on the fly (RMSNorm with (offset + w), or LayerNorm; Gemma's
 * sandwich adds a normalised o to x first and writes that sum out), or gates it by sigmoid(gate); the weights are up
 * to four [Nₛ, K] matrices whose rows the output concatenates (q|k|v), or a gate/up pair whose products meet in
 * SwiGLU/GeGLU; the epilogue adds a bias, applies GELU, or adds a residual.
 *
 * Weights are read as whole words, each once: q4_0 and q8_0 one block per lane step (its scale loaded once), f16/bf16
 * eight values per vec4 word, f32 four; rows whose words are not 16-byte aligned fall back to scalar words, and
 * shapes no word walk fits to one element per load. Every workgroup recomputes the row statistics it needs (x is a few
 * KB and cached); nothing is written between the norm and the product, so the norm costs no dispatch.
 */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { type DType, isQuant, rowBytes } from '../../formats/dtype';
import { Uniforms } from '../../gpu/context';
import { ACT, type Activation } from '../activation/cpu';
import { ACT_WGSL, MATH } from '../activation/wgsl';
import { type CpuArray, type FloatArray, type GpuRef, type KernelDef, type Meta, binding, expectDType, expectRank } from '../kernel';
import { dequantize } from '../matmul/cpu';
import { rowColLoader } from '../matmul/wgsl';
import { floatValues } from '../rmsnorm/cpu';
import { SUBGROUP_BUILTINS, blockSumWgsl, flatWorkgroup, loadFn, mainSignature } from '../wgsl';

export interface FusedGemvAttrs {
  /** Normalisation of the (pre-added) input: RMSNorm x·rsqrt(mean x² + eps)·(offset + γ), or LayerNorm with γ, β. */
  norm?: { kind: 'rms'; eps: number; offset: number } | { kind: 'layer'; eps: number };
  /** Gemma's sandwich: x + rmsNorm(o)·(offset + w) is the input (o and w are inputs), and a second output holds it. */
  preAdd?: { eps: number; offset: number };
  /**
   * x[i, k]·sigmoid(g) with g = gate[i·ld + ⌊k / head⌋·headStride + offset + k mod head]: Qwen3.5's attention output
   * gate, read where q_proj wrote it.
   */
  inputGate?: { ld: number; head: number; headStride: number; offset: number };
  /** Number of weights (1–4); their rows concatenate along N. With `glu` exactly 2, gate and up. */
  weights: number;
  /** act(x·W₀ᵀ + b₀)·(x·W₁ᵀ + b₁): the gated MLP unit. */
  glu?: Activation;
  /** Applied to each output after its bias (not with glu). */
  act?: Activation;
  /** An f32 bias over the N outputs (glu: 2N, gate's then up's). */
  bias?: boolean;
  /** Adds an [M, N] f32 residual. */
  residual?: boolean;
}

/** Inputs in binding order: x, [o, wpost], [γ], [β], [gate], W₀ … Wₙ₋₁, [bias], [residual]. */
function roles(a: FusedGemvAttrs): string[] {
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

const MAX_STORAGE = 8;

interface Dims {
  M: number;
  K: number;
  N: number;
  /** Rows of each weight. */
  rows: number[];
}

function check(inputs: readonly Meta[], a: FusedGemvAttrs): Dims {
  const op = 'fused_gemv';
  const names = roles(a);
  if (!Number.isInteger(a.weights) || a.weights < 1 || a.weights > 4) throw new InvalidArgument(`${op}: 1 to 4 weights, got ${a.weights}`);
  if (a.glu && a.weights !== 2) throw new InvalidArgument(`${op}: a gated unit takes exactly 2 weights (gate, up), got ${a.weights}`);
  if (a.glu && a.act) throw new InvalidArgument(`${op}: act applies without glu only`);
  if (inputs.length !== names.length)
    throw new InvalidArgument(`${op}: expected ${names.length} inputs (${names.join(', ')}), got ${inputs.length}`);
  const outs = 1 + (a.preAdd ? 1 : 0);
  if (names.length + outs > MAX_STORAGE) {
    throw new InvalidArgument(
      `${op}: ${names.length + outs} storage bindings exceed the ${MAX_STORAGE} every WebGPU device allows; fuse less`,
    );
  }
  const at = (n: string) => inputs[names.indexOf(n)];
  const x = at('x');
  expectDType(op, 'x', x, 'f32');
  expectRank(op, 'x', x, 2);
  const [M, K] = x.shape;
  const rows: number[] = [];
  for (let s = 0; s < a.weights; s++) {
    const w = at(`w${s}`);
    expectRank(op, `weight ${s}`, w, 2);
    if (w.shape[1] !== K) throw new ShapeMismatch(`${op}: weight ${s} is [${w.shape}] but x has ${K} columns; weights are [N, K]`);
    if (isQuant(w.dtype) && K % 32 !== 0) throw new ShapeMismatch(`${op}: a ${w.dtype} weight needs K a multiple of 32, got ${K}`);
    rows.push(w.shape[0]);
  }
  if (a.glu && rows[0] !== rows[1]) throw new ShapeMismatch(`${op}: gate has ${rows[0]} rows but up has ${rows[1]}`);
  const N = a.glu ? rows[0] : rows.reduce((s, n) => s + n, 0);
  const vec = (n: string, len: number, ...dt: DType[]) => {
    const m = at(n);
    expectDType(op, n, m, ...dt);
    if (m.shape.reduce((p, d) => p * d, 1) !== len) throw new ShapeMismatch(`${op}: ${n} has shape [${m.shape}], expected ${len} values`);
  };
  for (const n of ['gamma', 'beta', 'wpost']) if (names.includes(n)) vec(n, K, 'f32', 'f16', 'bf16');
  if (a.preAdd) vec('o', M * K, 'f32');
  if (a.bias) vec('bias', a.glu ? 2 * N : N, 'f32');
  if (a.residual) vec('res', M * N, 'f32');
  if (a.inputGate) {
    const g = a.inputGate;
    const gm = at('gate');
    expectDType(op, 'gate', gm, 'f32');
    const last = (M - 1) * g.ld + Math.floor((K - 1) / g.head) * g.headStride + g.offset + ((K - 1) % g.head);
    if (last >= gm.shape.reduce((p, d) => p * d, 1)) throw new ShapeMismatch(`${op}: the gate's layout reads past its ${gm.shape} values`);
  }
  return { M, K, N, rows };
}

export const fusedGemvKernel: KernelDef<FusedGemvAttrs> = {
  name: 'fused_gemv',
  outputs(inputs, attrs) {
    const { M, K, N } = check(inputs, attrs);
    return attrs.preAdd ? [{ shape: [M, N], dtype: 'f32' }, { shape: [M, K], dtype: 'f32' }] : [{ shape: [M, N], dtype: 'f32' }];
  },
  cpu(inputs, outputs, attrs, { inputs: metas }) {
    fusedGemvCpu(inputs, outputs, attrs, metas);
  },
  webgpu(ctx, inputs, outputs, attrs) {
    const d = check(inputs.map((r) => r.meta), attrs);
    if (d.M === 0 || d.N === 0) return;
    const names = roles(attrs);
    const dtypes = (n: string) => inputs[names.indexOf(n)].meta.dtype;
    const walks = Array.from({ length: attrs.weights }, (_, s) => walkOf(dtypes(`w${s}`), d.K));
    // the pipeline depends on the structure and dtypes only; sizes, eps and offsets are uniforms
    // a transformed input (norm, gate, pre-add) small enough is staged in workgroup memory once instead of being
    // recomputed for each of the workgroup's 8 weight rows
    const stage = !!(attrs.norm || attrs.preAdd || attrs.inputGate) && Math.min(d.M, MR) * d.K <= STAGE;
    const subgroups = ctx.subgroupReduce;
    const v: Variant = {
      attrs,
      walks,
      stage,
      subgroups,
      paramDtypes: ['wpost', 'gamma', 'beta'].filter((n) => names.includes(n)).map(dtypes),
    };
    const key = `fused_gemv_${JSON.stringify([
      walks.map((w) => `${w.dtype}:${w.mode}`),
      stage,
      subgroups,
      v.paramDtypes,
      attrs.norm?.kind ?? '',
      !!attrs.preAdd,
      !!attrs.inputGate,
      attrs.weights,
      attrs.glu ?? '',
      attrs.act ?? '',
      !!attrs.bias,
      !!attrs.residual,
    ])}`;
    const starts = [0];
    for (const n of d.rows) starts.push(starts[starts.length - 1] + n);
    const g = attrs.inputGate ?? { ld: 0, head: 1, headStride: 0, offset: 0 };
    const norm = attrs.norm;
    const u = new Uniforms().u32(d.M).u32(d.K).u32(d.N)
      .f32(norm?.eps ?? 0).f32(norm?.kind === 'rms' ? norm.offset : 0).f32(attrs.preAdd?.eps ?? 0).f32(attrs.preAdd?.offset ?? 0)
      .u32(g.ld).u32(g.head).u32(g.headStride).u32(g.offset)
      .u32(starts[1] ?? 0).u32(starts[2] ?? 0).u32(starts[3] ?? 0);
    for (let s = 0; s < 4; s++) u.u32(s < attrs.weights ? walks[s].ld : 0);
    const groups = Math.ceil(d.N / ROWS);
    const max = ctx.report.limits.maxComputeWorkgroupsPerDimension;
    const [gx, gy] = groups <= max ? [groups, 1] : [max, Math.ceil(groups / max)];
    ctx.dispatch({
      key,
      wgsl: () => fusedGemvWgsl(v),
      uniforms: u,
      bindings: [...inputs, ...outputs].map((r: GpuRef, i) => binding(r, `fused_gemv ${[...names, 'out', 'x1'][i]}`)),
      workgroups: [gx, gy, Math.ceil(d.M / MR)],
    });
  },
};

// --- the WGSL ---

const ROWS = 8; // weight rows (outputs) per workgroup, 32 lanes each
const MR = 4; // rows of x per workgroup (one vec4 accumulator)
const WG = ROWS * 32;
/** Floats of staged input: with the 4 KB reduction array, 16 KB of workgroup memory (every device's minimum). */
const STAGE = 3072;

/** How one weight row is walked: whole vec4 words, scalar words, or one element per load; `ld` in those units' words. */
interface Walk {
  dtype: DType;
  mode: 'vec4' | 'word' | 'elem';
  /** Row stride: u32 words for quantized rows and vec4/word walks of halves, elements for f32 and elem walks. */
  ld: number;
}

function walkOf(dtype: DType, K: number): Walk {
  if (isQuant(dtype)) {
    const ld = rowBytes(dtype, K) / 4;
    return { dtype, mode: ld % 4 === 0 ? 'vec4' : 'word', ld };
  }
  if (dtype === 'f32') return K % 4 === 0 ? { dtype, mode: 'vec4', ld: K } : { dtype, mode: 'elem', ld: K };
  // f16/bf16: eight values per vec4 of words
  return K % 8 === 0 ? { dtype, mode: 'vec4', ld: K / 2 } : { dtype, mode: 'elem', ld: K };
}

interface Variant {
  attrs: FusedGemvAttrs;
  walks: Walk[];
  /** The transformed input rows live in workgroup memory (sa[i·K + k]). */
  stage: boolean;
  /** Reduce through subgroups (GpuContext.subgroupReduce): one barrier per sum instead of a tree of them. */
  subgroups: boolean;
  paramDtypes: DType[];
}

/** `fn dot_s(row: u32, lane: u32) -> vec4<f32>`: weight s's row against x's rows (aCol). */
function dotFn(s: number, w: Walk, binding: number): string {
  const name = `w${s}`;
  const ld = `u.ld${s}`;
  if (w.mode === 'elem') {
    return `${rowColLoader(name, binding, w.dtype, false, ld, 'u.K')}
fn dot_${s}(row: u32, lane: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  for (var k = lane; k < u.K; k += 32u) { acc += load_${name}_rc(row, k) * aCol(k); }
  return acc;
}`;
  }
  if (w.dtype === 'f32') {
    return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<vec4<f32>>;
fn dot_${s}(row: u32, lane: u32) -> vec4<f32> {
  var acc = vec4<f32>(0.0);
  let base = row * (${ld} >> 2u);
  for (var g = lane; g < (u.K >> 2u); g += 32u) {
    let q = ${name}[base + g];
    let k = 4u * g;
    acc += q.x * aCol(k) + q.y * aCol(k + 1u) + q.z * aCol(k + 2u) + q.w * aCol(k + 3u);
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
  for (var blk = lane; blk < nb; blk += 32u) {
    let q = ${name}_w4(base + 4u * blk);
    let s = unpack2x16float(${name}_w1(base + (u.K >> 3u) + (blk >> 1u)))[blk & 1u];
    let k = 32u * blk;
    var part = vec4<f32>(0.0);
    for (var j = 0u; j < 4u; j++) {
      let wd = q[j];
      for (var b = 0u; b < 4u; b++) {
        let e = 4u * j + b;
        part += (f32((wd >> (8u * b)) & 15u) - 8.0) * aCol(k + e) + (f32((wd >> (8u * b + 4u)) & 15u) - 8.0) * aCol(k + 16u + e);
      }
    }
    acc += s * part;
  }`;
      break;
    case 'q8_0':
      loop = `let nb = u.K >> 5u;
  for (var blk = lane; blk < nb; blk += 32u) {
    let s = unpack2x16float(${name}_w1(base + (u.K >> 2u) + (blk >> 1u)))[blk & 1u];
    let k = 32u * blk;
    var part = vec4<f32>(0.0);
    for (var h = 0u; h < 2u; h++) {
      let q = ${name}_w4(base + 8u * blk + 4u * h);
      for (var j = 0u; j < 4u; j++) {
        let wd = q[j];
        let e = k + 16u * h + 4u * j;
        part += f32(bitcast<i32>(wd << 24u) >> 24u) * aCol(e) + f32(bitcast<i32>(wd << 16u) >> 24u) * aCol(e + 1u)
              + f32(bitcast<i32>(wd << 8u) >> 24u) * aCol(e + 2u) + f32(bitcast<i32>(wd) >> 24u) * aCol(e + 3u);
      }
    }
    acc += s * part;
  }`;
      break;
    case 'f16':
    case 'bf16': {
      const unpack = w.dtype === 'f16'
        ? 'unpack2x16float(wd)'
        : 'vec2<f32>(bitcast<f32>(wd << 16u), bitcast<f32>(wd & 0xffff0000u))';
      loop = `for (var g = lane; g < (u.K >> 3u); g += 32u) {
    let q = ${name}_w4(base + 4u * g);
    let k = 8u * g;
    for (var j = 0u; j < 4u; j++) {
      let wd = q[j];
      let p = ${unpack};
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
  const names = roles(a);
  const b = (n: string) => names.indexOf(n) + 1;
  const pd = [...v.paramDtypes];
  const param = (n: string) => (names.includes(n) ? loadFn(n, b(n), pd.shift()!) : '');
  const decls = [
    `@group(0) @binding(${b('x')}) var<storage, read> x: array<f32>;`,
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
    : 'x[(m0 + i) * u.K + k]';
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
  const segs = v.walks.map((w, s) => dotFn(s, w, b(`w${s}`))).join('\n');
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
  // the sums: over the workgroup (row statistics) and over a weight row's 32 lanes
  const sums = v.subgroups
    ? `var<private> sgs: u32;
${blockSumWgsl('wsum_sg', WG, 'red')}
${blockSumWgsl('rowsum', 32, 'red')}
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
fn rowsum(v: vec4<f32>, l: u32, first: bool) -> vec4<f32> {
  if (!first) { workgroupBarrier(); }
  red[l] = v;
  workgroupBarrier();
  for (var s = 16u; s > 0u; s >>= 1u) {
    if (l % 32u < s) { red[l] += red[l + s]; }
    workgroupBarrier();
  }
  return red[l - l % 32u];
}`;
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
${v.stage ? `var<workgroup> sa: array<f32, ${STAGE}>;
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
  m0 = wid.z * ${MR}u;
  mr = min(${MR}u, u.M - m0);
  ${stats}
  ${a.preAdd ? `if (${flatWorkgroup} == 0u) {
    for (var k = lid.x; k < u.K; k += ${WG}u) { for (var i = 0u; i < mr; i++) { x1[(m0 + i) * u.K + k] = xin(i, k); } }
  }` : ''}
  ${v.stage ? `for (var k = lid.x; k < u.K; k += ${WG}u) { for (var i = 0u; i < mr; i++) { sa[i * u.K + k] = aval(i, k); } }
  workgroupBarrier();` : ''}
  let lane = lid.x % 32u;
  let n = ${flatWorkgroup} * ${ROWS}u + lid.x / 32u;
  var acc = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  if (n < u.N) {
    ${main}
  }
  let r = ${rowsum('acc', false)};
  ${a.glu ? `let r2 = ${rowsum('acc2', true)};` : ''}
  if (lane == 0u && n < u.N) {
    for (var i = 0u; i < mr; i++) { out[(m0 + i) * u.N + n] = ${value}; }
  }
}`;
}

// --- the CPU reference: the unfused ops one after another ---

function fusedGemvCpu(inputs: CpuArray[], outputs: CpuArray[], a: FusedGemvAttrs, metas: readonly Meta[]) {
  const { M, K, N, rows } = check(metas, a);
  const names = roles(a);
  const get = (n: string) => inputs[names.indexOf(n)];
  const vals = (n: string) => floatValues(get(n), metas[names.indexOf(n)].dtype);
  const x = get('x') as FloatArray;
  const out = outputs[0] as FloatArray;
  const xin = new Float64Array(M * K);
  if (a.preAdd) {
    const o = get('o') as FloatArray;
    const w = vals('wpost');
    for (let i = 0; i < M; i++) {
      let ss = 0;
      for (let k = 0; k < K; k++) ss += o[i * K + k] ** 2;
      const r = 1 / Math.sqrt(ss / K + a.preAdd.eps);
      // the sum is stored as f32 (the unfused path's tensors are) before it is normalised again
      for (let k = 0; k < K; k++) xin[i * K + k] = Math.fround(x[i * K + k] + Math.fround(o[i * K + k] * r * (a.preAdd.offset + w[k])));
    }
    (outputs[1] as FloatArray).set(xin);
  } else xin.set(x);
  const av = new Float64Array(M * K);
  for (let i = 0; i < M; i++) {
    const row = xin.subarray(i * K, (i + 1) * K);
    const dst = av.subarray(i * K, (i + 1) * K);
    if (a.norm?.kind === 'rms') {
      const g = vals('gamma');
      let ss = 0;
      for (let k = 0; k < K; k++) ss += row[k] ** 2;
      const r = 1 / Math.sqrt(ss / K + a.norm.eps);
      for (let k = 0; k < K; k++) dst[k] = Math.fround(row[k] * r * (a.norm.offset + g[k]));
    } else if (a.norm?.kind === 'layer') {
      const [g, be] = [vals('gamma'), vals('beta')];
      let s = 0;
      for (let k = 0; k < K; k++) s += row[k];
      const mean = s / K;
      let v = 0;
      for (let k = 0; k < K; k++) v += (row[k] - mean) ** 2;
      const r = 1 / Math.sqrt(v / K + a.norm.eps);
      for (let k = 0; k < K; k++) dst[k] = Math.fround((row[k] - mean) * r * g[k] + be[k]);
    } else dst.set(row);
    if (a.inputGate) {
      const gt = get('gate') as FloatArray;
      const { ld, head, headStride, offset } = a.inputGate;
      for (let k = 0; k < K; k++)
        dst[k] = Math.fround(dst[k] * ACT.sigmoid.f(gt[i * ld + Math.floor(k / head) * headStride + offset + (k % head)]));
    }
  }
  const ws = rows.map((r, s) => dequantize(get(`w${s}`), metas[names.indexOf(`w${s}`)].dtype, [r, K]));
  const bias = a.bias ? (get('bias') as FloatArray) : null;
  const res = a.residual ? (get('res') as FloatArray) : null;
  const dot = (w: FloatArray, r: number, i: number) => {
    let s = 0;
    for (let k = 0; k < K; k++) s += w[r * K + k] * av[i * K + k];
    return s;
  };
  for (let i = 0; i < M; i++) {
    for (let n = 0, s = 0, base = 0; n < N; n++) {
      let y: number;
      if (a.glu) {
        const g = Math.fround(dot(ws[0], n, i) + (bias ? bias[n] : 0));
        const up = Math.fround(dot(ws[1], n, i) + (bias ? bias[N + n] : 0));
        y = ACT[a.glu].f(g) * up;
      } else {
        while (n - base >= rows[s]) base += rows[s++];
        y = Math.fround(dot(ws[s], n - base, i) + (bias ? bias[n] : 0));
        if (a.act) y = ACT[a.act].f(y);
      }
      out[i * N + n] = res ? Math.fround(y) + res[i * N + n] : y;
    }
  }
}
