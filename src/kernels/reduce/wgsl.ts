/**
 * WGSL for deterministic two-stage reductions. Stage 1: one workgroup per (row, segment) sums a
 * contiguous segment with a fixed thread stride and a fixed tree, writing one partial. Stage 2: one
 * workgroup per row sums its partials the same way. The partition depends only on sizes, so results
 * are bitwise reproducible run to run.
 */
import { flatIndex, flatWorkgroup, mainSignature } from '../wgsl';

/** Sums acc[0..wg) into acc[0]; every invocation of the workgroup must reach it. */
export const treeSum = (acc: string, wg: number) => `workgroupBarrier();
  for (var k = ${wg / 2}u; k > 0u; k = k >> 1u) {
    if (lid.x < k) { ${acc}[lid.x] += ${acc}[lid.x + k]; }
    workgroupBarrier();
  }`;

/** Stage 1: out[outBase + w] = alpha * sum over segment w of x (squared when `square`). */
export function reducePartialWgsl(square: boolean, wg: number): string {
  return `struct P { rows: u32, cols: u32, splits: u32, seg: u32, outBase: u32, alpha: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
var<workgroup> acc: array<f32, ${wg}>;
${mainSignature(wg)} {
  let w = ${flatWorkgroup};
  if (w >= u.rows * u.splits) { return; }
  let base = (w / u.splits) * u.cols;
  let start = (w % u.splits) * u.seg;
  let end = min(u.cols, start + u.seg);
  var s = 0.0;
  for (var j = start + lid.x; j < end; j += ${wg}u) {
    let v = x[base + j];
    s += ${square ? 'v * v' : 'v'};
  }
  acc[lid.x] = s;
  ${treeSum('acc', wg)}
  if (lid.x == 0u) { out[u.outBase + w] = acc[0] * u.alpha; }
}`;
}

/** Stage 2: out[r] = alpha * sum of partials[r * splits .. +splits], square-rooted when `root`. */
export function reduceFinalWgsl(wg: number): string {
  return `struct P { rows: u32, splits: u32, alpha: f32, root: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
var<workgroup> acc: array<f32, ${wg}>;
${mainSignature(wg)} {
  let r = ${flatWorkgroup};
  if (r >= u.rows) { return; }
  var s = 0.0;
  for (var j = lid.x; j < u.splits; j += ${wg}u) { s += partials[r * u.splits + j]; }
  acc[lid.x] = s;
  ${treeSum('acc', wg)}
  if (lid.x == 0u) {
    var v = acc[0] * u.alpha;
    if (u.root != 0u) { v = sqrt(v); }
    out[r] = v;
  }
}`;
}

/** dx[i] = alpha * g[(start + i) / cols] * (square ? 2 x[i] : 1) over one chunk of dx. */
export function reduceBackwardWgsl(square: boolean, wg: number): string {
  return `struct P { n: u32, cols: u32, start: u32, alpha: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> g: array<f32>;
${square ? '@group(0) @binding(2) var<storage, read> x: array<f32>;' : ''}
@group(0) @binding(${square ? 3 : 2}) var<storage, read_write> dx: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let gi = u.alpha * g[(u.start + i) / u.cols];
  dx[i] = ${square ? 'gi * 2.0 * x[i]' : 'gi'};
}`;
}

/** x[i] *= min(1, maxNorm / (total + 1e-6)), total read from the device (clip_grad_norm_). */
export function clipScaleWgsl(wg: number): string {
  return `struct P { n: u32, maxNorm: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> total: array<f32>;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  x[i] = x[i] * min(1.0, u.maxNorm / (total[0] + 1e-6));
}`;
}
