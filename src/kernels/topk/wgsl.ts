/**
 * Top-k on the GPU, one workgroup per row, in two phases.
 *
 * Scan: invocation t reads elements t, t + wg, t + 2wg, ... and keeps the k best it has seen in a
 * sorted private list. Elements are compared through an order-preserving u32 key of the f32 bits
 * (NaN -> 0, below -Inf; -0 folded onto +0) and then by index, the order cpu.ts states. Most
 * elements fail one comparison against the list's last entry, so the scan runs at read speed.
 *
 * Merge: k rounds of "take the best head". Each round every invocation offers the head of its list,
 * 16 invocations each pick the best of 16 heads, every invocation picks the best of those 16, and
 * the owner of the winner (index mod wg, by the strided scan) advances its head. Two barriers a round,
 * one loop level: lavapipe compiles nested barrier loops very slowly (see sample/wgsl.ts).
 */
import { mainSignature } from '../wgsl';

/** Largest k a pipeline serves: the private lists are this long. */
export const TOPK_MAX = 32;
/** Heads are reduced in groups of this many, then the group winners by every invocation. */
const GROUP = 16;

export function topkWgsl(wg: number): string {
  if (wg % GROUP || wg / GROUP > GROUP)
    throw new Error(`topkWgsl: workgroup size ${wg} must be a multiple of ${GROUP} up to ${GROUP * GROUP}`);
  const groups = wg / GROUP;
  return `struct P { rows: u32, V: u32, k: u32, inOff: u32, outOff: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
@group(0) @binding(3) var<storage, read_write> indices: array<i32>;
var<workgroup> hk: array<u32, ${wg}>;
var<workgroup> hi: array<u32, ${wg}>;
var<workgroup> gk: array<u32, ${groups}>;
var<workgroup> gi: array<u32, ${groups}>;
const NONE = 0xffffffffu;

fn key(v: f32) -> u32 {
  var b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return 0u; }
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
// (ka, ia) comes before (kb, ib); an empty slot (index NONE, key 0) comes after everything
fn before(ka: u32, ia: u32, kb: u32, ib: u32) -> bool { return ka > kb || (ka == kb && ia < ib); }

${mainSignature(wg)} {
  let row = wid.x + wid.y * nwg.x;
  if (row >= u.rows) { return; }
  let t = lid.x;
  let k = u.k;
  let base = u.inOff + row * u.V;

  var lk: array<u32, ${TOPK_MAX}>;
  var li: array<u32, ${TOPK_MAX}>;
  for (var j = 0u; j < k; j++) { lk[j] = 0u; li[j] = NONE; }
  var lastK = 0u;
  var lastI = NONE;
  for (var i = t; i < u.V; i += ${wg}u) {
    let c = key(x[base + i]);
    if (!before(c, i, lastK, lastI)) { continue; }
    var j = k - 1u;
    while (j > 0u && before(c, i, lk[j - 1u], li[j - 1u])) {
      lk[j] = lk[j - 1u];
      li[j] = li[j - 1u];
      j--;
    }
    lk[j] = c;
    li[j] = i;
    lastK = lk[k - 1u];
    lastI = li[k - 1u];
  }

  var head = 0u;
  let out = u.outOff + row * k;
  for (var r = 0u; r < k; r++) {
    let h = min(head, ${TOPK_MAX - 1}u);
    hk[t] = select(0u, lk[h], head < k);
    hi[t] = select(NONE, li[h], head < k);
    workgroupBarrier();
    if (t < ${groups}u) {
      var wk = 0u;
      var wi = NONE;
      for (var j = t * ${GROUP}u; j < (t + 1u) * ${GROUP}u; j++) {
        if (before(hk[j], hi[j], wk, wi)) { wk = hk[j]; wi = hi[j]; }
      }
      gk[t] = wk;
      gi[t] = wi;
    }
    workgroupBarrier();
    var bk = 0u;
    var bi = NONE;
    for (var j = 0u; j < ${groups}u; j++) {
      if (before(gk[j], gi[j], bk, bi)) { bk = gk[j]; bi = gi[j]; }
    }
    if (bi != NONE && bi % ${wg}u == t) {
      head++;
      values[out + r] = x[base + bi];
      indices[out + r] = i32(bi);
    }
  }
}`;
}
