import { flatIndex, mainSignature } from '../wgsl';

/** One AdamW step in place; every per-step scalar comes from the uniforms (see cpu.ts). */
export function adamwWgsl(wg: number): string {
  return `struct P { n: u32, hasMask: u32, lrWd: f32, b1: f32, omb1: f32, b2: f32, omb2: f32, stepSize: f32, bc2sqrt: f32, eps: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read_write> p: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> m: array<f32>;
@group(0) @binding(4) var<storage, read_write> v: array<f32>;
@group(0) @binding(5) var<storage, read> mask: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  var decay = u.lrWd;
  if (u.hasMask != 0u) { decay = decay * mask[i]; }
  let x = p[i] * (1.0 - decay);
  let gi = g[i];
  let mi = u.b1 * m[i] + u.omb1 * gi;
  let vi = u.b2 * v[i] + u.omb2 * gi * gi;
  m[i] = mi;
  v[i] = vi;
  p[i] = x - u.stepSize * mi / (sqrt(vi) / u.bc2sqrt + u.eps);
}`;
}

/** dst[i] += src[i] (plain copies use copyBufferToBuffer). */
export function addIntoWgsl(wg: number): string {
  return `struct P { n: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
@group(0) @binding(2) var<storage, read> src: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  dst[i] = dst[i] + src[i];
}`;
}

/** dst[i] = value. */
export function fillWgsl(wg: number): string {
  return `struct P { n: u32, value: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  dst[i] = u.value;
}`;
}
