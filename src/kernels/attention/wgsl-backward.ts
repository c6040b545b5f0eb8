/**
 * Attention backward shaders (flash-attention 2): probabilities are recomputed from q, k and the
 * saved logsumexp, never stored. dQ streams key blocks per block of query rows (like the forward);
 * dK/dV stream query rows per block of key rows and sum over every query head of the kv head in a
 * fixed order, so the result is deterministic without float atomics. Loop shapes follow wgsl.ts
 * (branch-free inner loops, block loops bounded by u.lanes).
 */
import { ATTN_ROWS, ATTN_STRUCT, BWD_ROWS, LANES, attnConsts } from './wgsl';
import { mainSignature } from '../wgsl';

const TILES = (rows: number) => `var<workgroup> part_s: array<f32, ${rows * LANES * (LANES + 1)}>;
var<workgroup> part_p: array<f32, ${rows * LANES * (LANES + 1)}>;`;

const INPUTS = `@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> lse: array<f32>;
@group(0) @binding(5) var<storage, read> di: array<f32>;
@group(0) @binding(6) var<storage, read> dout: array<f32>;`;

/** Lane j adds up the partial dots of item j (a key or a query row) written by the L lanes. */
const REDUCE = `    var s = 0.0;
    var dp = 0.0;
    for (var x = 0u; x < u.lanes; x++) {
      s += part_s[(rl * L + lane) * PAD + x];
      dp += part_p[(rl * L + lane) * PAD + x];
    }`;

/** dQ = scale · Σ_j P_ij (dP_ij − D_i) K_j over the visible keys of each query row. */
export function attentionBackwardQWgsl(dpt: number): string {
  return `${ATTN_STRUCT}
${attnConsts(BWD_ROWS, dpt)}
${INPUTS}
@group(0) @binding(7) var<storage, read_write> dq: array<f32>;
${TILES(BWD_ROWS)}
var<workgroup> dsv: array<f32, ${BWD_ROWS * LANES}>;
${mainSignature(BWD_ROWS * LANES)} {
  ${ATTN_ROWS}
  let lo = key_lo(u.past + t_first);
  let hi = u.past + t_last + 1u;
  let lrow = h * u.t + t;
  let lse_r = lse[lrow];
  let di_r = di[lrow];
  var qr: array<f32, DPT>;
  var dor: array<f32, DPT>;
  var acc: array<f32, DPT>;
  for (var i = 0u; i < DPT; i++) {
    let d = lane + i * L;
    if (d < u.d) { qr[i] = q[qb + d] * u.scale; dor[i] = dout[qb + d]; }
  }
  for (var kb = lo; kb < hi; kb += L) {
    for (var j = 0u; j < u.lanes; j++) {
      let kbase = min(kb + j, hi - 1u) * kstr + kvh * u.d;
      var s = 0.0;
      var dp = 0.0;
      for (var i = 0u; i < DPT; i++) {
        let d = kbase + min(lane + i * L, dmax);
        s += qr[i] * k[d];
        dp += dor[i] * v[d];
      }
      part_s[(rl * L + j) * PAD + lane] = s;
      part_p[(rl * L + j) * PAD + lane] = dp;
    }
    workgroupBarrier();
${REDUCE}
    let key = kb + lane;
    let p = select(0.0, exp(s - lse_r), key >= lo_row && key <= pos && key < hi);
    dsv[rl * L + lane] = p * (dp - di_r);
    workgroupBarrier();
    for (var j = 0u; j < u.lanes; j++) {
      let ds = dsv[rl * L + j];
      let kbase = min(kb + j, hi - 1u) * kstr + kvh * u.d;
      for (var i = 0u; i < DPT; i++) { acc[i] += ds * k[kbase + min(lane + i * L, dmax)]; }
    }
  }
  if (r < nrows) {
    for (var i = 0u; i < DPT; i++) {
      let d = lane + i * L;
      if (d < u.d) { dq[qb + d] = acc[i] * u.scale; }
    }
  }
}`;
}

/**
 * dK_j = scale · Σ_i dS_ij Q_i and dV_j = Σ_i P_ij dO_i, i over the (t, g) query rows that see key j.
 * Rows BR are key rows here; every row of k (also those at or past kvlen) gets written.
 */
export function attentionBackwardKVWgsl(dpt: number): string {
  return `${ATTN_STRUCT}
${attnConsts(BWD_ROWS, dpt)}
${INPUTS}
@group(0) @binding(7) var<storage, read_write> dk: array<f32>;
@group(0) @binding(8) var<storage, read_write> dv: array<f32>;
${TILES(BWD_ROWS)}
var<workgroup> pv: array<f32, ${BWD_ROWS * LANES}>;
var<workgroup> dsv: array<f32, ${BWD_ROWS * LANES}>;
// offset in q and dO of query row (t, g) of kv head kvh
fn qrow(row: u32, kvh: u32) -> u32 { return ((row / u.group) * u.hq + kvh * u.group + row % u.group) * u.d; }
${mainSignature(BWD_ROWS * LANES)} {
  let lane = lid.x % L;
  let rl = lid.x / L;
  let kvh = wid.y;
  let key0 = wid.x * BR;
  let key = key0 + rl;
  let kbase = (min(key, u.kvlen - 1u) * u.hkv + kvh) * u.d;
  let dmax = u.d - 1u;
  // query rows that can see some key of this block: t from kmin − past up to kmax + window − past
  var rlo = 0u;
  var rhi = 0u;
  if (key0 < u.kvlen) {
    let kmax = min(key0 + BR, u.kvlen) - 1u;
    let tlo = select(0u, key0 - u.past, key0 > u.past);
    var thi = u.t;
    if (u.window > 0u) { thi = select(0u, min(u.t, kmax + u.window - u.past), kmax + u.window > u.past); }
    if (tlo < thi) { rlo = tlo * u.group; rhi = thi * u.group; }
  }
  var kr: array<f32, DPT>;
  var vr: array<f32, DPT>;
  var dka: array<f32, DPT>;
  var dva: array<f32, DPT>;
  for (var i = 0u; i < DPT; i++) {
    let d = lane + i * L;
    if (d < u.d) { kr[i] = k[kbase + d] * u.scale; vr[i] = v[kbase + d]; }
  }
  for (var rb = rlo; rb < rhi; rb += L) {
    for (var j = 0u; j < u.lanes; j++) {
      let qb = qrow(min(rb + j, rhi - 1u), kvh);
      var s = 0.0;
      var dp = 0.0;
      for (var i = 0u; i < DPT; i++) {
        let d = qb + min(lane + i * L, dmax);
        s += kr[i] * q[d];
        dp += vr[i] * dout[d];
      }
      part_s[(rl * L + j) * PAD + lane] = s;
      part_p[(rl * L + j) * PAD + lane] = dp;
    }
    workgroupBarrier();
${REDUCE}
    let row = min(rb + lane, rhi - 1u);
    let t = row / u.group;
    let lrow = (kvh * u.group + row % u.group) * u.t + t;
    let pos = u.past + t;
    let vis = rb + lane < rhi && key < u.kvlen && key <= pos && key >= key_lo(pos);
    let p = select(0.0, exp(s - lse[lrow]), vis);
    pv[rl * L + lane] = p;
    dsv[rl * L + lane] = p * (dp - di[lrow]);
    workgroupBarrier();
    for (var j = 0u; j < u.lanes; j++) {
      let qb = qrow(min(rb + j, rhi - 1u), kvh);
      let pj = pv[rl * L + j];
      let dsj = dsv[rl * L + j];
      for (var i = 0u; i < DPT; i++) {
        let d = qb + min(lane + i * L, dmax);
        dva[i] += pj * dout[d];
        dka[i] += dsj * q[d];
      }
    }
  }
  if (key < u.s) {
    let ob = (key * u.hkv + kvh) * u.d;
    for (var i = 0u; i < DPT; i++) {
      let d = lane + i * L;
      if (d < u.d) { dk[ob + d] = dka[i] * u.scale; dv[ob + d] = dva[i]; }
    }
  }
}`;
}
