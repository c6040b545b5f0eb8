/**
 * Attention shaders. Tiled, flash-attention style: a workgroup owns a block of query rows of one kv
 * head and streams key blocks, keeping a running max and sum per row, so [Hq, T, S] never exists in
 * global memory. Query rows are (t, g) pairs, g running over the query heads that share the kv head:
 * a decode step (T = 1) still fills a workgroup with the group's heads, and K/V rows loaded for one
 * head serve the others from cache.
 *
 * Thread layout: BR rows × L lanes. Lane l owns dims l, l + L, l + 2L, ... (DPT = ceil(D / L) of
 * them, the only shape-derived constant in the text: it sizes the register arrays, one pipeline per
 * head-dim bucket). A score q·k is summed by its L lanes through shared memory: each lane writes its
 * partial dot for the L keys of the block, then lane j adds up key j's partials.
 *
 * Loops over the L keys of a block run to `u.lanes` (always L) rather than the constant: a constant
 * bound gets them unrolled around the unrolled DPT loops, and lavapipe then needs 10-60 s to compile
 * each pipeline instead of under one. The DPT loops keep constant bounds, so on a GPU the register
 * arrays stay in registers.
 */
import { flatIndex, mainSignature } from '../wgsl';

/** Lanes per row and keys per block (equal: lane j finalises key j of the block). */
export const LANES = 16;
/** Query rows per workgroup in the forward, key rows per workgroup in the dK/dV backward. */
export const FWD_ROWS = 8;
export const BWD_ROWS = 4;
export const dimsPerLane = (d: number) => Math.max(1, Math.ceil(d / LANES));

const NEG = '-3.4028234e38';

/** Uniform layout shared by the forward and backward row kernels (see index.ts attnUniforms). */
const STRUCT = `struct P { t: u32, hq: u32, hkv: u32, d: u32, group: u32, past: u32, kvlen: u32, window: u32,
  scale: f32, split_len: u32, s: u32, nsplit: u32, split_base: u32, lanes: u32 }
@group(0) @binding(0) var<uniform> u: P;
// First key visible from absolute position pos (sliding window; window 0 = none).
fn key_lo(pos: u32) -> u32 {
  if (u.window == 0u || pos + 1u <= u.window) { return 0u; }
  return pos + 1u - u.window;
}`;

const consts = (rows: number, dpt: number) => `const BR = ${rows}u;
const L = ${LANES}u;
const PAD = ${LANES + 1}u; // row stride of the partial-dot tiles: keeps lanes on distinct banks
const DPT = ${dpt}u;
const NEG = ${NEG};`;

/** Row block prologue: this thread's query row (t, head h) and the workgroup's key range [lo, hi). */
const ROWS = `
  let lane = lid.x % L;
  let rl = lid.x / L;
  let kvh = wid.y;
  let nrows = u.t * u.group;
  let r0 = wid.x * BR;
  let r = r0 + rl;
  let rr = min(r, nrows - 1u); // rows past the end compute on a valid row and write nothing
  let t = rr / u.group;
  let h = kvh * u.group + rr % u.group;
  let pos = u.past + t;
  let lo_row = key_lo(pos);
  let qb = (t * u.hq + h) * u.d;
  let kstr = u.hkv * u.d;
  let dmax = u.d - 1u;
  let t_first = r0 / u.group;
  let t_last = (min(r0 + BR, nrows) - 1u) / u.group;`;

/**
 * The online-softmax loop over keys [lo, hi) in blocks of L, shared by the forward and the decode attention over
 * stacked caches: scores of q·k summed by the L lanes through workgroup memory, the running max m and sum l, acc the
 * weighted v. `row0` is added to every key index (the first row of the sequence's cache); `visible` is the WGSL
 * condition under which key `key` counts. Declares m and l; reads qr, lane, rl, kstr, kvh, dmax, lo, hi, and k and v
 * through ldk / ldv (kvBindings).
 */
export function flashLoop(row0: string, visible: string): string {
  const row = (k: string) => (row0 ? `(${row0} + ${k})` : k);
  return `var m = NEG;
  var l = 0.0;
  // Inner loops are branch-free (clamped indices, zero weights instead of ifs) so lanes stay converged.
  for (var kb = lo; kb < hi; kb += L) {
    for (var j = 0u; j < u.lanes; j++) {
      let kbase = ${row('min(kb + j, hi - 1u)')} * kstr + kvh * u.d;
      var s = 0.0;
      for (var i = 0u; i < DPT; i++) { s += qr[i] * ldk(kbase + min(lane + i * L, dmax)); }
      part[(rl * L + j) * PAD + lane] = s;
    }
    workgroupBarrier();
    var s = 0.0;
    for (var x = 0u; x < u.lanes; x++) { s += part[(rl * L + lane) * PAD + x]; }
    let key = kb + lane;
    sc[rl * L + lane] = select(NEG, s, ${visible});
    workgroupBarrier();
    var bm = NEG;
    for (var j = 0u; j < u.lanes; j++) { bm = max(bm, sc[rl * L + j]); }
    // with nothing visible yet, m = mn = NEG, alpha = 1 and every p is 0: no branch needed
    let mn = max(m, bm);
    let alpha = exp(m - mn);
    l *= alpha;
    for (var i = 0u; i < DPT; i++) { acc[i] *= alpha; }
    for (var j = 0u; j < u.lanes; j++) {
      let sj = sc[rl * L + j];
      let p = select(0.0, exp(sj - mn), sj > NEG);
      l += p;
      let vbase = ${row('min(kb + j, hi - 1u)')} * kstr + kvh * u.d;
      for (var i = 0u; i < DPT; i++) { acc[i] += p * ldv(vbase + min(lane + i * L, dmax)); }
    }
    m = mn;
  }`;
}

/**
 * Forward: o and lse of each query row over the key range of split wid.z (keys from
 * split_base + z·split_len, split_len of them); with several splits o and lse are partials that combineWgsl merges.
 */
/** k and v at bindings `first` and `first + 1` with their loaders ldk / ldv: f32, or an f16 cache (shader-f16). */
export function kvBindings(first: number, f16: boolean): string {
  const t = f16 ? 'f16' : 'f32';
  return `@group(0) @binding(${first}) var<storage, read> k: array<${t}>;
@group(0) @binding(${first + 1}) var<storage, read> v: array<${t}>;
fn ldk(i: u32) -> f32 { return f32(k[i]); }
fn ldv(i: u32) -> f32 { return f32(v[i]); }`;
}

export function attentionForwardWgsl(dpt: number, f16 = false): string {
  return `${f16 ? 'enable f16;\n' : ''}${STRUCT}
${consts(FWD_ROWS, dpt)}
@group(0) @binding(1) var<storage, read> q: array<f32>;
${kvBindings(2, f16)}
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
var<workgroup> part: array<f32, ${FWD_ROWS * LANES * (LANES + 1)}>;
var<workgroup> sc: array<f32, ${FWD_ROWS * LANES}>;
${mainSignature(FWD_ROWS * LANES)} {
  ${ROWS}
  let split = wid.z;
  let lo = max(key_lo(u.past + t_first), u.split_base + split * u.split_len);
  let hi = min(u.past + t_last + 1u, u.split_base + (split + 1u) * u.split_len);
  var qr: array<f32, DPT>;
  var acc: array<f32, DPT>;
  for (var i = 0u; i < DPT; i++) {
    let d = lane + i * L;
    if (d < u.d) { qr[i] = q[qb + d] * u.scale; }
  }
  ${flashLoop('', 'key >= lo_row && key <= pos && key < hi')}
  if (r < nrows) {
    let inv = select(0.0, 1.0 / l, l > 0.0);
    let ob = split * u.t * u.hq * u.d + qb;
    for (var i = 0u; i < DPT; i++) {
      let d = lane + i * L;
      if (d < u.d) { o[ob + d] = acc[i] * inv; }
    }
    // an empty split (no visible key in its range) reports lse = NEG, which weighs 0 in the combine
    if (lane == 0u) { lse[split * u.hq * u.t + h * u.t + t] = select(NEG, m + log(l), l > 0.0); }
  }
}`;
}

/** Query rows per workgroup of the rows cut (attentionRowsWgsl). */
export const ROWS_WG = 64;

/**
 * The forward's rows cut (kernels/row-cut.ts), for CPU rasterisers: one invocation per query row (t, h), no
 * workgroup memory and no barrier. It walks its visible keys one at a time with a running max and sum, its q and
 * output in D4 = ⌈D/4⌉ vec4s (the only shape-derived constant; a GPU would spill them, and keeps the lanes cut).
 * Same bindings, uniforms and split semantics as attentionForwardWgsl (split wid.z: keys split_base + z·split_len,
 * split_len of them).
 */
export function attentionRowsWgsl(d4: number, f16 = false): string {
  return `${f16 ? 'enable f16;\n' : ''}${STRUCT}
const NEG = ${NEG};
const D4 = ${d4}u;
@group(0) @binding(1) var<storage, read> q: array<f32>;
${kvBindings(2, f16)}
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
@group(0) @binding(5) var<storage, read_write> lse: array<f32>;
// four values of row base from dimension 4i (past D: the row's last value, which a zero in q or no store ignores)
fn ld4k(base: u32, i: u32) -> vec4<f32> {
  let dmax = u.d - 1u;
  return vec4(ldk(base + min(4u * i, dmax)), ldk(base + min(4u * i + 1u, dmax)), ldk(base + min(4u * i + 2u, dmax)),
              ldk(base + min(4u * i + 3u, dmax)));
}
fn ld4v(base: u32, i: u32) -> vec4<f32> {
  let dmax = u.d - 1u;
  return vec4(ldv(base + min(4u * i, dmax)), ldv(base + min(4u * i + 1u, dmax)), ldv(base + min(4u * i + 2u, dmax)),
              ldv(base + min(4u * i + 3u, dmax)));
}
${mainSignature(ROWS_WG)} {
  let idx = ${flatIndex(ROWS_WG)};
  if (idx >= u.t * u.hq) { return; }
  let t = idx / u.hq;
  let h = idx % u.hq;
  let kvh = h / u.group;
  let pos = u.past + t;
  let split = wid.z;
  let lo = max(key_lo(pos), u.split_base + split * u.split_len);
  let hi = min(pos + 1u, u.split_base + (split + 1u) * u.split_len);
  let qb = idx * u.d;
  // runtime bounds: constant ones get the loops unrolled, and lavapipe then needs seconds to compile the pipeline
  let n4 = (u.d + 3u) / 4u;
  var qr: array<vec4<f32>, D4>;
  var acc: array<vec4<f32>, D4>;
  for (var i = 0u; i < n4; i++) {
    var x = vec4(0.0);
    for (var c = 0u; c < 4u; c++) {
      if (4u * i + c < u.d) { x[c] = q[qb + 4u * i + c] * u.scale; }
    }
    qr[i] = x;
    acc[i] = vec4(0.0);
  }
  var m = NEG;
  var l = 0.0;
  for (var key = lo; key < hi; key++) {
    let kb = key * u.hkv * u.d + kvh * u.d;
    var s = 0.0;
    for (var i = 0u; i < n4; i++) { s += dot(qr[i], ld4k(kb, i)); }
    // the first key: m = NEG, so alpha = 0 and l, acc start from p = 1
    let mn = max(m, s);
    let alpha = exp(m - mn);
    let p = exp(s - mn);
    l = l * alpha + p;
    for (var i = 0u; i < n4; i++) { acc[i] = acc[i] * alpha + p * ld4v(kb, i); }
    m = mn;
  }
  let inv = select(0.0, 1.0 / l, l > 0.0);
  let ob = split * u.t * u.hq * u.d + qb;
  for (var i = 0u; i < n4; i++) {
    for (var c = 0u; c < 4u; c++) {
      if (4u * i + c < u.d) { o[ob + 4u * i + c] = acc[i][c] * inv; }
    }
  }
  // an empty split (no visible key in its range) reports lse = NEG, which weighs 0 in the combine
  lse[split * u.hq * u.t + h * u.t + t] = select(NEG, m + log(l), l > 0.0);
}`;
}

/** Merges split partials: o = Σ exp(lse_s − lse) o_s with lse = logsumexp_s lse_s. */
export function combineWgsl(wg: number): string {
  return `struct C { n: u32, d: u32, t: u32, hq: u32, nsplit: u32 }
@group(0) @binding(0) var<uniform> u: C;
@group(0) @binding(1) var<storage, read> op: array<f32>;
@group(0) @binding(2) var<storage, read> lp: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<storage, read_write> lse: array<f32>;
${mainSignature(wg)} {
  let idx = ${flatIndex(wg)};
  if (idx >= u.n) { return; }
  let t = idx / (u.hq * u.d);
  let h = (idx / u.d) % u.hq;
  let lrow = h * u.t + t;
  let rows = u.hq * u.t;
  var mx = ${NEG};
  for (var s = 0u; s < u.nsplit; s++) { mx = max(mx, lp[s * rows + lrow]); }
  var den = 0.0;
  var num = 0.0;
  for (var s = 0u; s < u.nsplit; s++) {
    let w = exp(lp[s * rows + lrow] - mx);
    den += w;
    num += w * op[s * u.n + idx];
  }
  o[idx] = num / den;
  if (idx % u.d == 0u) { lse[lrow] = mx + log(den); }
}`;
}

/** di[h, t] = Σ_d dO·O over one query row: the D_i term of the flash-attention backward. */
export function rowDotWgsl(wg: number): string {
  return `struct R { t: u32, hq: u32, d: u32 }
@group(0) @binding(0) var<uniform> u: R;
@group(0) @binding(1) var<storage, read> o: array<f32>;
@group(0) @binding(2) var<storage, read> dout: array<f32>;
@group(0) @binding(3) var<storage, read_write> di: array<f32>;
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.t * u.hq) { return; }
  let h = i / u.t;
  let t = i % u.t;
  let base = (t * u.hq + h) * u.d;
  var s = 0.0;
  for (var x = 0u; x < u.d; x++) { s += dout[base + x] * o[base + x]; }
  di[i] = s;
}`;
}

export { STRUCT as ATTN_STRUCT, ROWS as ATTN_ROWS, consts as attnConsts, NEG as ATTN_NEG };
