/**
 * WGSL for the losses: a per-row kernel (one workgroup per row, fixed stride and tree, so results are
 * deterministic) writes row losses and weights, one workgroup folds them into the masked mean, and
 * elementwise backward kernels read the saved row statistics.
 */
import { flatIndex, flatWorkgroup, mainSignature } from '../wgsl';

// NaN cannot be a WGSL constant (const-evaluation rejects it), so its bits arrive in a uniform
const NAN = 'bitcast<f32>(u.nanBits)';
/** Value of the `nanBits` uniform. */
export const NAN_BITS = 0x7fc00000;
/** Lowest finite f32: the running max starts here (WGSL has no infinity literal). */
const LOWEST = '-3.4028234e38';
const EPS2 = '1e-16';

/**
 * Cross-entropy rows: an online max/sum-exp per thread (one pass over the logits), merged pairwise
 * in a tree. Writes lse, the row loss and its weight (0 for the ignore index). A label outside
 * [0, V) cannot raise an error on the device, so it poisons the loss with NaN instead.
 */
export function ceRowsWgsl(wg: number): string {
  return `struct P { rows: u32, V: u32, rowBase: u32, ignore: i32, nanBits: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read_write> lse: array<f32>;
@group(0) @binding(4) var<storage, read_write> rowLoss: array<f32>;
@group(0) @binding(5) var<storage, read_write> weight: array<f32>;
var<workgroup> wm: array<f32, ${wg}>;
var<workgroup> ws: array<f32, ${wg}>;
${mainSignature(wg)} {
  let r = ${flatWorkgroup};
  if (r >= u.rows) { return; }
  let base = r * u.V;
  var m = ${LOWEST};
  var s = 0.0;
  for (var j = lid.x; j < u.V; j += ${wg}u) {
    let v = x[base + j];
    if (v > m) { s = s * exp(m - v) + 1.0; m = v; } else { s += exp(v - m); }
  }
  wm[lid.x] = m;
  ws[lid.x] = s;
  workgroupBarrier();
  for (var k = ${wg / 2}u; k > 0u; k = k >> 1u) {
    if (lid.x < k) {
      let m1 = wm[lid.x];
      let m2 = wm[lid.x + k];
      let mm = max(m1, m2);
      ws[lid.x] = ws[lid.x] * exp(m1 - mm) + ws[lid.x + k] * exp(m2 - mm);
      wm[lid.x] = mm;
    }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    let R = u.rowBase + r;
    let l = wm[0] + log(ws[0]);
    lse[R] = l;
    let lab = labels[R];
    if (lab == u.ignore) {
      rowLoss[R] = 0.0;
      weight[R] = 0.0;
    } else if (lab < 0 || u32(lab) >= u.V) {
      rowLoss[R] = ${NAN};
      weight[R] = 1.0;
    } else {
      rowLoss[R] = l - x[base + u32(lab)];
      weight[R] = 1.0;
    }
  }
}`;
}

/** dx = g * scale * (exp(x - lse) - onehot) for one chunk of logits; 0 on ignored rows. */
export function ceBackwardWgsl(wg: number): string {
  return `struct P { n: u32, V: u32, rowBase: u32, ignore: i32, nanBits: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> labels: array<i32>;
@group(0) @binding(3) var<storage, read> lse: array<f32>;
@group(0) @binding(4) var<storage, read> scale: array<f32>;
@group(0) @binding(5) var<storage, read> g: array<f32>;
@group(0) @binding(6) var<storage, read_write> dx: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let R = u.rowBase + i / u.V;
  let lab = labels[R];
  if (lab == u.ignore) { dx[i] = 0.0; return; }
  if (lab < 0 || u32(lab) >= u.V) { dx[i] = ${NAN}; return; }
  var p = exp(x[i] - lse[R]);
  if (u32(lab) == i % u.V) { p -= 1.0; }
  dx[i] = p * scale[0] * g[0];
}`;
}

/** loss = sum w l / (div sum w) over rows with w != 0, scale = 1 / (div sum w); both 0 when sum w = 0. */
export function maskedMeanWgsl(wg: number): string {
  return `struct P { n: u32, div: f32, hasW: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> rowLoss: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> loss: array<f32>;
@group(0) @binding(4) var<storage, read_write> scale: array<f32>;
var<workgroup> al: array<f32, ${wg}>;
var<workgroup> aw: array<f32, ${wg}>;
${mainSignature(wg)} {
  var sl = 0.0;
  var sw = 0.0;
  for (var j = lid.x; j < u.n; j += ${wg}u) {
    var w = 1.0;
    if (u.hasW != 0u) { w = weight[j]; }
    if (w != 0.0) { sl += w * rowLoss[j]; sw += w; }
  }
  al[lid.x] = sl;
  aw[lid.x] = sw;
  workgroupBarrier();
  for (var k = ${wg / 2}u; k > 0u; k = k >> 1u) {
    if (lid.x < k) { al[lid.x] += al[lid.x + k]; aw[lid.x] += aw[lid.x + k]; }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    if (aw[0] == 0.0) {
      loss[0] = 0.0;
      scale[0] = 0.0;
    } else {
      let den = aw[0] * u.div;
      loss[0] = al[0] / den;
      scale[0] = 1.0 / den;
    }
  }
}`;
}

/** Per row of a, b [rows, d]: cosine stats [dot, |a|^2, |b|^2] and 1 - cos, or sum (a - b)^2 for MSE. */
export function pairRowsWgsl(kind: 'cos' | 'mse', wg: number): string {
  const cos = kind === 'cos';
  return `struct P { rows: u32, d: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> rowLoss: array<f32>;
${cos ? '@group(0) @binding(4) var<storage, read_write> stats: array<f32>;' : ''}
var<workgroup> s0: array<f32, ${wg}>;
${cos ? `var<workgroup> s1: array<f32, ${wg}>;\nvar<workgroup> s2: array<f32, ${wg}>;` : ''}
${mainSignature(wg)} {
  let r = ${flatWorkgroup};
  if (r >= u.rows) { return; }
  var t0 = 0.0;
  var t1 = 0.0;
  var t2 = 0.0;
  for (var j = lid.x; j < u.d; j += ${wg}u) {
    let x = a[r * u.d + j];
    let y = b[r * u.d + j];
    ${cos ? 't0 += x * y; t1 += x * x; t2 += y * y;' : 'let e = x - y; t0 += e * e;'}
  }
  s0[lid.x] = t0;
  ${cos ? 's1[lid.x] = t1;\n  s2[lid.x] = t2;' : ''}
  workgroupBarrier();
  for (var k = ${wg / 2}u; k > 0u; k = k >> 1u) {
    if (lid.x < k) { s0[lid.x] += s0[lid.x + k];${cos ? ' s1[lid.x] += s1[lid.x + k]; s2[lid.x] += s2[lid.x + k];' : ''} }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
${cos
    ? `    stats[3u * r] = s0[0];
    stats[3u * r + 1u] = s1[0];
    stats[3u * r + 2u] = s2[0];
    rowLoss[r] = 1.0 - s0[0] / sqrt(max(s1[0], ${EPS2}) * max(s2[0], ${EPS2}));`
    : '    rowLoss[r] = s0[0];'}
  }
}`;
}

/** Cosine-loss gradient w.r.t. x (y is the other operand; `which` picks |x|^2 in the stats). */
export function cosBackwardWgsl(wg: number): string {
  return `struct P { n: u32, d: u32, which: u32, hasW: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read> weight: array<f32>;
@group(0) @binding(5) var<storage, read> scale: array<f32>;
@group(0) @binding(6) var<storage, read> g: array<f32>;
@group(0) @binding(7) var<storage, read_write> dx: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let r = i / u.d;
  var w = 1.0;
  if (u.hasW != 0u) { w = weight[r]; }
  if (w == 0.0) { dx[i] = 0.0; return; }
  let sx = max(stats[3u * r + u.which], ${EPS2});
  let sy = max(stats[3u * r + 3u - u.which], ${EPS2});
  let D = sqrt(sx * sy);
  let c = stats[3u * r] / D;
  dx[i] = -g[0] * scale[0] * w * (y[i] / D - c * x[i] / sx);
}`;
}

/** MSE gradient: dx = sign * 2 g scale w (a - b). */
export function mseBackwardWgsl(wg: number): string {
  return `struct P { n: u32, d: u32, sign: f32, hasW: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> weight: array<f32>;
@group(0) @binding(4) var<storage, read> scale: array<f32>;
@group(0) @binding(5) var<storage, read> g: array<f32>;
@group(0) @binding(6) var<storage, read_write> dx: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  var w = 1.0;
  if (u.hasW != 0u) { w = weight[i / u.d]; }
  if (w == 0.0) { dx[i] = 0.0; return; }
  dx[i] = u.sign * 2.0 * g[0] * scale[0] * w * (a[i] - b[i]);
}`;
}
