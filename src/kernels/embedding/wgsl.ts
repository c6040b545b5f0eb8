/**
 * WGSL for embedding. Forward: one invocation per output element, table in any dtype (rowColLoader).
 * Backward without float atomics, deterministically: `links` finds for every position the previous and
 * next position with the same id; `scatter` lets the first position of each id in a segment walk that
 * chain and add the gradient rows in position order, so repeated ids sum exactly like the CPU loop.
 */
import type { DType } from '../../formats/dtype';
import { rowColLoader } from '../matmul/wgsl';
import { enableF16, flatIndex, flatWorkgroup, mainSignature } from '../wgsl';

export function gatherWgsl(dtype: DType, native: boolean, wg: number): string {
  return `${enableF16(native)}struct P { n: u32, d: u32, ids_off: u32, out_off: u32, r0: u32, rows: u32, V: u32, first: u32, ld: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
${rowColLoader('table', 2, dtype, native, 'u.ld', 'u.d')}
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n * u.d) { return; }
  let t = i / u.d;
  let id = ids[u.ids_off + t];
  let inRange = id >= 0 && u32(id) < u.V;
  if (inRange && u32(id) >= u.r0 && u32(id) < u.r0 + u.rows) {
    out[u.out_off + i] = load_table_rc(u32(id) - u.r0, i % u.d);
  } else if (!inRange && u.first != 0u) {
    out[u.out_off + i] = 0.0; // out-of-range id: a zero row (the CPU reference throws instead)
  }
}`;
}

/** links[i] = last j < i with ids[j] = ids[i] (or -1); links[n + i] = first j > i (or n). O(n²) compares, tiled. */
export function linksWgsl(wg: number): string {
  return `struct P { n: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> links: array<i32>;
var<workgroup> tile: array<i32, ${wg}>;
${mainSignature(wg)} {
  let i = ${flatWorkgroup} * ${wg}u + lid.x;
  var mine = 0;
  if (i < u.n) { mine = ids[i]; }
  var prev = -1;
  var next = i32(u.n);
  for (var t0 = 0u; t0 < u.n; t0 += ${wg}u) {
    if (t0 + lid.x < u.n) { tile[lid.x] = ids[t0 + lid.x]; }
    workgroupBarrier();
    let cnt = min(${wg}u, u.n - t0);
    for (var j = 0u; j < cnt; j++) {
      let p = t0 + j;
      if (tile[j] == mine) {
        if (p < i) { prev = i32(p); } else if (p > i && next == i32(u.n)) { next = i32(p); }
      }
    }
    workgroupBarrier();
  }
  if (i < u.n) {
    links[i] = prev;
    links[u.n + i] = next;
  }
}`;
}

/** One invocation per (position in [p0, p1), column); the owner of each id walks its chain. */
export function scatterWgsl(wg: number): string {
  return `struct P { n: u32, d: u32, p0: u32, p1: u32, g_off: u32, r0: u32, rows: u32, V: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> links: array<i32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
${mainSignature(wg)} {
  let idx = ${flatIndex(wg)};
  if (idx >= (u.p1 - u.p0) * u.d) { return; }
  let c = idx % u.d;
  let i = u.p0 + idx / u.d;
  let id = ids[i];
  if (id < 0 || u32(id) >= u.V || u32(id) < u.r0 || u32(id) >= u.r0 + u.rows) { return; }
  if (links[i] >= i32(u.p0)) { return; } // an earlier position of this segment owns the row
  let o = (u32(id) - u.r0) * u.d + c;
  var v = out[o];
  var j = i;
  loop {
    v += g[u.g_off + (j - u.p0) * u.d + c];
    j = u32(links[u.n + j]);
    if (j >= u.p1) { break; }
  }
  out[o] = v;
}`;
}
