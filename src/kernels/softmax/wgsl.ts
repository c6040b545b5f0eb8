/**
 * Softmax shaders: one workgroup per row looping over the columns (a vocabulary row is 151,936 wide),
 * with a shared-memory tree reduction. Each thread keeps an online (max, sum) pair so the forward
 * reads the row twice (reduce, write) instead of three times. log-softmax is (x − max) − log(sum):
 * x − max is exact for logits near each other, which x − (max + log sum) is not for logits ~1e4.
 */
import { flatWorkgroup, mainSignature } from '../wgsl';

// The most negative finite f32: WGSL has no -inf literal, and exp(-inf - NEG) is still 0.
const NEG = '-3.4028234e38';

const header = (wg: number) => `struct P { rows: u32, cols: u32 }
@group(0) @binding(0) var<uniform> u: P;
var<workgroup> red_a: array<f32, ${wg}>;
var<workgroup> red_b: array<f32, ${wg}>;`;

export function softmaxWgsl(log: boolean, wg: number): string {
  return `${header(wg)}
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
${mainSignature(wg)} {
  let row = ${flatWorkgroup};
  if (row >= u.rows) { return; }
  let base = row * u.cols;
  var m = ${NEG};
  var s = 0.0;
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    let xv = x[base + c];
    if (xv > m) { s = s * exp(m - xv) + 1.0; m = xv; } else { s += exp(xv - m); }
  }
  red_a[lid.x] = m;
  red_b[lid.x] = s;
  workgroupBarrier();
  for (var stride = ${wg / 2}u; stride > 0u; stride >>= 1u) {
    if (lid.x < stride) {
      let m1 = red_a[lid.x];
      let m2 = red_a[lid.x + stride];
      let mm = max(m1, m2);
      red_b[lid.x] = red_b[lid.x] * exp(m1 - mm) + red_b[lid.x + stride] * exp(m2 - mm);
      red_a[lid.x] = mm;
    }
    workgroupBarrier();
  }
  let mx = red_a[0];
  let sum = red_b[0];
  ${log ? 'let ls = log(sum);' : 'let inv = 1.0 / sum;'}
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    ${log ? 'y[base + c] = (x[base + c] - mx) - ls;' : 'y[base + c] = exp(x[base + c] - mx) * inv;'}
  }
}`;
}

/** dx from the forward output y and dy: softmax y·(dy − Σdy·y), log-softmax dy − exp(y)·Σdy. */
export function softmaxBackwardWgsl(log: boolean, wg: number): string {
  return `${header(wg)}
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
${mainSignature(wg)} {
  let row = ${flatWorkgroup};
  if (row >= u.rows) { return; }
  let base = row * u.cols;
  var s = 0.0;
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    s += ${log ? 'dy[base + c]' : 'dy[base + c] * y[base + c]'};
  }
  red_a[lid.x] = s;
  workgroupBarrier();
  for (var stride = ${wg / 2}u; stride > 0u; stride >>= 1u) {
    if (lid.x < stride) { red_a[lid.x] += red_a[lid.x + stride]; }
    workgroupBarrier();
  }
  let sum = red_a[0];
  for (var c = lid.x; c < u.cols; c += ${wg}u) {
    ${log ? 'dx[base + c] = dy[base + c] - exp(y[base + c]) * sum;' : 'dx[base + c] = y[base + c] * (dy[base + c] - sum);'}
  }
}`;
}
