import { flatIndex, mainSignature } from '../wgsl';
import type { BinaryOp } from './cpu';

const EXPR: Record<BinaryOp, string> = { add: 'x + y', sub: 'x - y', mul: 'x * y' };

export function binaryWgsl(op: BinaryOp, wg: number): string {
  return `struct P { n: u32, bn: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let x = a[i];
  let y = b[i % u.bn];
  out[i] = ${EXPR[op]};
}`;
}

export function scaleWgsl(wg: number): string {
  return `struct P { n: u32, alpha: f32, beta: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  out[i] = u.alpha * a[i] + u.beta;
}`;
}

/** One invocation per column; rows are summed in order (deterministic). */
export function sumRowsWgsl(wg: number): string {
  return `struct P { rows: u32, cols: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
${mainSignature(wg)} {
  let c = ${flatIndex(wg)};
  if (c >= u.cols) { return; }
  var s = 0.0;
  for (var r = 0u; r < u.rows; r++) { s += a[r * u.cols + c]; }
  out[c] = s;
}`;
}
