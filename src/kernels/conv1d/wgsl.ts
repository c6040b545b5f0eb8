/** The causal depthwise conv1d and its backward to x and to w (cpu.ts), one invocation per output element. */
import { flatIndex, mainSignature } from '../wgsl';

const HEADER = 'struct P { n: u32, t: u32, c: u32, k: u32 }\n@group(0) @binding(0) var<uniform> u: P;';

/** The state's binding (3) when there is one, then the start of the output's binding (3 or 4). */
const outBinding = (withState: boolean) =>
  withState ? '@group(0) @binding(3) var<storage, read> st: array<f32>;\n@group(0) @binding(4)' : '@group(0) @binding(3)';

export function causalConv1dWgsl(wg: number, withState: boolean): string {
  return `${HEADER}
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
${outBinding(withState)} var<storage, read_write> out: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let t = i / u.c;
  let ch = i % u.c;
  var s = 0.0;
  for (var j = 0u; j < u.k; j++) {
    // x's row t + j − (K − 1), or the state's row t + j when that is negative
    if (t + j >= u.k - 1u) {
      s += w[ch * u.k + j] * x[(t + j - (u.k - 1u)) * u.c + ch];
    }${
      withState
        ? ` else {
      s += w[ch * u.k + j] * st[(t + j) * u.c + ch];
    }`
        : ''
    }
  }
  out[i] = s;
}`;
}

export function causalConv1dBackwardWgsl(wg: number): string {
  return `${HEADER}
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let r = i / u.c;
  let ch = i % u.c;
  var s = 0.0;
  for (var j = 0u; j < u.k; j++) {
    let t = r + u.k - 1u - j;
    if (t < u.t) { s += w[ch * u.k + j] * g[t * u.c + ch]; }
  }
  dx[i] = s;
}`;
}

/** dw [C, K]: one invocation per (c, j), summing over the positions. */
export function causalConv1dBackwardWWgsl(wg: number, withState: boolean): string {
  return `${HEADER}
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
${outBinding(withState)} var<storage, read_write> dw: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let ch = i / u.k;
  let j = i % u.k;
  var s = 0.0;
  for (var t = 0u; t < u.t; t++) {
    if (t + j >= u.k - 1u) {
      s += g[t * u.c + ch] * x[(t + j - (u.k - 1u)) * u.c + ch];
    }${
      withState
        ? ` else {
      s += g[t * u.c + ch] * st[(t + j) * u.c + ch];
    }`
        : ''
    }
  }
  dw[i] = s;
}`;
}
