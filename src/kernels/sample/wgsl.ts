/**
 * Token selection on the GPU without a sort: one workgroup per row.
 *
 * Values are compared through an order-preserving u32 key of the f32 bits (with -0 folded onto +0),
 * so the max and the top-k threshold are exact. Thresholds come from an MSD radix select over the
 * keys, 4 bits a pass (8 passes): every thread adds the weight of its elements into 16 private bins
 * (weight 1 to count for top-k, exp(z - max) for top-p mass), the bins are tree-reduced in
 * workgroup memory and thread 0 descends into the highest bin where the running total reaches the
 * goal. The pick walks contiguous per-thread chunks, so the running sum is in index order like
 * the CPU reference (cpu.ts states the definition both implement).
 */
import { mainSignature } from '../wgsl';

const NB = 16; // radix bins (4 bits a pass)

const KEY_FNS = `
fn key(x: f32) -> u32 {
  var b = bitcast<u32>(x);
  if (b == 0x80000000u) { b = 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
fn unkey(k: u32) -> f32 { return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u)); }`;

/** Greedy pick: largest key, lowest index on ties. One workgroup per row; one barrier (see sampleWgsl). */
export function argmaxWgsl(wg: number): string {
  return `struct P { rows: u32, V: u32, rowOffset: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<i32>;
var<workgroup> rk: array<u32, ${wg}>;
var<workgroup> ri: array<u32, ${wg}>;
${KEY_FNS}
${mainSignature(wg)} {
  let row = wid.x + wid.y * nwg.x;
  if (row >= u.rows) { return; }
  let t = lid.x;
  let base = row * u.V;
  var bk = 0u;
  var bi = 0xffffffffu;
  for (var i = t; i < u.V; i += ${wg}u) {
    let k = key(logits[base + i]);
    if (k > bk || bi == 0xffffffffu) { bk = k; bi = i; }
  }
  rk[t] = bk;
  ri[t] = bi;
  workgroupBarrier();
  if (t == 0u) {
    for (var j = 1u; j < ${wg}u; j++) {
      let ok = rk[j];
      let oi = ri[j];
      if (oi != 0xffffffffu && (ok > bk || (ok == bk && oi < bi) || bi == 0xffffffffu)) { bk = ok; bi = oi; }
    }
    ids[u.rowOffset + row] = select(i32(bi), -1, bi == 0xffffffffu);
  }
}`;
}

/**
 * Temperature + top-k + top-p + seeded inverse-CDF pick. One workgroup of `wg` (≤ 256) per row.
 * Barriers are kept to four call sites: lavapipe compiles each into a coroutine suspend point, and
 * nested barrier loops took its compiler from under a second to a minute. So reductions are read by
 * every thread (or by 16) instead of tree-reduced, and all radix passes run in one flat loop.
 * Compile times measured: lavapipe 0.4 s, SwiftShader 3-4 s (once per process).
 * Cost: one workgroup streams the row once per pass: 2 passes with temperature only, 10 with top-k
 * or top-p, 18 with both. A multi-workgroup first stage that filters candidates per slice of the
 * vocabulary would cut that on big GPUs; not done yet.
 */
export function sampleWgsl(wg: number): string {
  return `struct P { rows: u32, V: u32, rowOffset: u32, topK: u32, topP: f32, temp: f32, seed: u32, step: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> ids: array<i32>;
var<workgroup> redU: array<u32, ${wg}>;
var<workgroup> redF: array<f32, ${wg}>;
var<workgroup> hist: array<f32, ${NB * wg}>;
var<workgroup> bins: array<f32, ${NB}>;
${KEY_FNS}
fn pcg(v: u32) -> u32 {
  let s = v * 747796405u + 2891336453u;
  let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
  return (w >> 22u) ^ w;
}
fn zAt(base: u32, i: u32) -> f32 { return logits[base + i] / u.temp; }

${mainSignature(wg)} {
  let row = wid.x + wid.y * nwg.x;
  if (row >= u.rows) { return; }
  let t = lid.x;
  let base = row * u.V;

  var mk = 0u;
  for (var i = t; i < u.V; i += ${wg}u) { mk = max(mk, key(zAt(base, i))); }
  redU[t] = mk;
  workgroupBarrier();
  for (var j = 0u; j < ${wg}u; j++) { mk = max(mk, redU[j]); }
  let m = unkey(mk);

  // Radix select, passes 0-7 for top-k (weight 1, goal k), 8-15 for top-p (weight exp(z - m) over
  // the top-k set, goal p * S): finds the largest key v whose weight at or above v reaches the goal;
  // when rounding leaves the total short of the goal it descends into the lowest non-empty bin.
  var floorKey = 0u; // the top-k threshold key, once passes 0-7 have run
  var prefix = 0u;
  var acc = 0.0;
  var goal = f32(u.topK);
  let first = select(0u, 8u, u.topK == 0u);
  let last = select(16u, 8u, u.topP >= 1.0);
  for (var it = first; it < last; it++) {
    let ps = it & 7u;
    let mass = it >= 8u;
    if (it == 8u) { floorKey = prefix; prefix = 0u; acc = 0.0; }
    let shift = 28u - 4u * ps;
    let hiMask = ~(((1u << shift) << 4u) - 1u);
    for (var d = 0u; d < ${NB}u; d++) { hist[d * ${wg}u + t] = 0.0; }
    for (var i = t; i < u.V; i += ${wg}u) {
      let z = zAt(base, i);
      let k = key(z);
      if (k >= floorKey && (k & hiMask) == prefix) {
        let d = (k >> shift) & ${NB - 1}u;
        hist[d * ${wg}u + t] += select(1.0, exp(z - m), mass);
      }
    }
    workgroupBarrier();
    if (t < ${NB}u) {
      var b = 0.0;
      for (var j = 0u; j < ${wg}u; j++) { b += hist[t * ${wg}u + j]; }
      bins[t] = b;
    }
    workgroupBarrier();
    if (it == 8u) {
      var sk = 0.0;
      for (var d = 0u; d < ${NB}u; d++) { sk += bins[d]; }
      goal = u.topP * sk;
    }
    // every thread runs this selection on the same 16 sums, so all reach the same prefix
    var run = acc;
    var chosen = ${NB}u;
    var chosenAcc = acc;
    var low = 0u;
    var lowAcc = acc;
    for (var j = 0u; j < ${NB}u; j++) {
      let d = ${NB - 1}u - j;
      let b = bins[d];
      let open = chosen == ${NB}u && b > 0.0;
      let hit = open && run + b >= goal;
      chosen = select(chosen, d, hit);
      chosenAcc = select(chosenAcc, run, hit);
      low = select(low, d, open && !hit);
      lowAcc = select(lowAcc, run, open && !hit);
      run = select(run, run + b, open && !hit);
    }
    if (chosen == ${NB}u) { chosen = low; chosenAcc = lowAcc; }
    acc = chosenAcc;
    prefix = prefix | (chosen << shift);
  }
  let keepKey = select(0u, prefix, first < last);

  // inverse CDF in index order: per-thread contiguous chunks; each thread reads the chunk masses
  // before its own, and the one whose interval holds the goal walks its chunk
  let chunk = (u.V + ${wg - 1}u) / ${wg}u;
  let lo = min(t * chunk, u.V);
  let hi = min(lo + chunk, u.V);
  var c = 0.0;
  for (var i = lo; i < hi; i++) {
    let z = zAt(base, i);
    if (key(z) >= keepKey) { c += exp(z - m); }
  }
  redF[t] = c;
  workgroupBarrier();
  var before = 0.0;
  var total = 0.0;
  var lastT = 0u;
  for (var j = 0u; j < ${wg}u; j++) {
    if (j == t) { before = total; }
    total += redF[j];
    if (redF[j] > 0.0) { lastT = j; }
  }
  let after = before + c;
  let r = u.rowOffset + row;
  let uni = f32(pcg(pcg(pcg(u.seed) + u.step) + r) >> 8u) * (1.0 / 16777216.0);
  let g = uni * total;
  var mine = (before <= g && g < after) || (t == lastT && g >= after);
  if (!(total > 0.0)) { mine = t == 0u; }
  if (mine) {
    var run = before;
    var pick = -1;
    var lastKept = -1;
    for (var i = lo; i < hi; i++) {
      let z = zAt(base, i);
      if (key(z) >= keepKey) {
        let w = exp(z - m);
        if (w > 0.0) {
          run += w;
          lastKept = i32(i);
          if (run > g) { pick = i32(i); break; }
        }
      }
    }
    if (pick < 0) { pick = lastKept; }
    ids[r] = pick;
  }
}`;
}
