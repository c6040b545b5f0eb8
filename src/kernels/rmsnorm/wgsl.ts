/**
 * RMSNorm shaders: one workgroup per row, threads stride over the columns and a tree reduction in
 * workgroup memory combines their partial sums (rows may be 4096+ wide; per-head norms are 64-256).
 */
import type { DType } from '../../formats/dtype';
import { flatIndex, flatWorkgroup, loadFn, mainSignature } from '../wgsl';

/**
 * `wg_sum(v, lid.x)`: the sum of `v` over the workgroup, returned to every invocation. Two sums travel
 * together (vec2) because the backward passes need two per row. Call from uniform control flow only;
 * `wg` must be a power of two.
 */
export function wgSumWgsl(wg: number): string {
  return `var<workgroup> red: array<vec2<f32>, ${wg}>;
fn wg_sum(v: vec2<f32>, l: u32) -> vec2<f32> {
  red[l] = v;
  workgroupBarrier();
  for (var k = ${wg / 2}u; k > 0u; k = k >> 1u) {
    if (l < k) { red[l] = red[l] + red[l + k]; }
    workgroupBarrier();
  }
  let s = red[0];
  workgroupBarrier();
  return s;
}`;
}

/** Row loop header shared by the norm shaders: `row`, `base` and an early exit for spare workgroups. */
export const rowPrologue = `let row = ${flatWorkgroup};
  if (row >= u.rows) { return; }
  let base = row * u.cols;`;

export function rmsnormWgsl(wdtype: DType, wg: number): string {
  return `struct P { rows: u32, cols: u32, eps: f32, woff: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
${loadFn('w', 2, wdtype)}
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${wgSumWgsl(wg)}
${mainSignature(wg)} {
  ${rowPrologue}
  var ss = 0.0;
  for (var c = lid.x; c < u.cols; c += ${wg}u) { let v = x[base + c]; ss += v * v; }
  let r = inverseSqrt(wg_sum(vec2<f32>(ss, 0.0), lid.x).x / f32(u.cols) + u.eps);
  for (var c = lid.x; c < u.cols; c += ${wg}u) { out[base + c] = x[base + c] * r * (u.woff + load_w(c)); }
}`;
}

/** Rows per workgroup of rmsnormRowsWgsl. */
export const NORM_ROWS_WG = 64;

/**
 * The rows cut (kernels/row-cut.ts, CPU rasterisers): one invocation per row, its sum of squares a serial loop, no
 * workgroup memory and no barrier.
 */
export function rmsnormRowsWgsl(wdtype: DType): string {
  return `struct P { rows: u32, cols: u32, eps: f32, woff: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
${loadFn('w', 2, wdtype)}
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${mainSignature(NORM_ROWS_WG)} {
  let row = ${flatIndex(NORM_ROWS_WG)};
  if (row >= u.rows) { return; }
  let base = row * u.cols;
  var ss = 0.0;
  for (var c = 0u; c < u.cols; c++) { let v = x[base + c]; ss += v * v; }
  let r = inverseSqrt(ss / f32(u.cols) + u.eps);
  for (var c = 0u; c < u.cols; c++) { out[base + c] = x[base + c] * r * (u.woff + load_w(c)); }
}`;
}

/**
 * Backward: per row Σx² and Σ g·w'·x, then dx = r·g·w' − x·r³·Σ(g·w'·x)/C; writes stats (0, r) per
 * row for the weight gradient. With `withDx` false only the statistics are computed (frozen input).
 */
export function rmsnormBackwardWgsl(wdtype: DType, wg: number, withDx: boolean): string {
  const decl = withDx
    ? `@group(0) @binding(1) var<storage, read> x: array<f32>;
${loadFn('w', 2, wdtype)}
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;`
    : `@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> stats: array<f32>;`;
  return `struct P { rows: u32, cols: u32, eps: f32, woff: f32 }
@group(0) @binding(0) var<uniform> u: P;
${decl}
${wgSumWgsl(wg)}
${mainSignature(wg)} {
  ${rowPrologue}
  var acc = vec2<f32>(0.0, 0.0);
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    let v = x[base + c];
    acc.x += v * v;
    ${withDx ? 'acc.y += g[base + c] * (u.woff + load_w(c)) * v;' : ''}
  }
  let s = wg_sum(acc, lid.x);
  let r = inverseSqrt(s.x / f32(u.cols) + u.eps);
  if (lid.x == 0u) { stats[2u * row] = 0.0; stats[2u * row + 1u] = r; }
  ${withDx ? `let k = r * r * r * s.y / f32(u.cols);
  for (var c = lid.x; c < u.cols; c += ${wg}u) { dx[base + c] = r * g[base + c] * (u.woff + load_w(c)) - x[base + c] * k; }` : ''}
}`;
}
