/**
 * Attention of one-token steps over caches stacked in one tensor: row b of q attends to the cache rows
 * [base_b + lo_b, slot_b] of k and v (its own sequence, up to the row it just wrote; lo_b from the sliding window),
 * with rows = StepRows [3, M] (position, slot, base). One sequence is M = 1; a batch of sequences is one row each.
 *
 * The work of a row never depends on the other rows: its keys are cut into splits of SPLIT_KEYS from its first visible
 * key, each split a workgroup per kv head (flash-decoding), and the splits are merged in a second dispatch when any
 * row has more than one. Merging one real split with empty ones (lse = −∞, o = 0) reproduces it exactly, so a row gives
 * the same bits alone or in any batch (batched decoding is token-identical to single runs).
 *
 * The thread layout follows kernels/attention: a workgroup holds the query heads that share a kv head, L lanes per
 * head, each lane owning dims lane, lane + L, ...; scores are summed through workgroup memory.
 */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { GpuContext, Uniforms } from '../../gpu/context';
import { FWD_ROWS as BR, LANES as L, dimsPerLane, flashLoop, kvBindings } from '../attention/wgsl';
import { floatValues } from '../rmsnorm/cpu';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectRank } from '../kernel';
import { flatIndex, mainSignature } from '../wgsl';

export interface DecodeAttentionAttrs {
  /** Multiplies q·k (default 1/√D). */
  scale?: number;
  /** Sliding window (a query sees the last `window` positions, its own included); 0/undefined = none. */
  window?: number;
  /** The most keys any row sees (the host knows the lengths): how many splits the grid needs. */
  maxKeys: number;
}

/** Keys per split. A constant, so that a row's splits do not depend on the batch around it. */
export const SPLIT_KEYS = 256;

const NEG = '-3.4028234e38';

function dims([q, k, v, rows]: readonly Meta[], a: DecodeAttentionAttrs) {
  const op = 'decode_attention';
  for (const [n, m] of [['q', q], ['k', k], ['v', v]] as const) {
    if (n === 'q') expectDType(op, n, m, 'f32');
    else expectDType(op, n, m, 'f32', 'f16');
    expectRank(op, n, m, 3);
  }
  if (k.shape.join() !== v.shape.join() || k.dtype !== v.dtype)
    throw new ShapeMismatch(`${op}: k ${k.dtype} [${k.shape}] and v ${v.dtype} [${v.shape}] differ`);
  const [M, hq, d] = q.shape;
  const [R, hkv, dk] = k.shape;
  if (dk !== d || hq % hkv !== 0)
    throw new ShapeMismatch(`${op}: q [${q.shape}] does not fit caches [${k.shape}] (D equal, Hq a multiple of Hkv)`);
  expectDType(op, 'rows', rows, 'i32');
  if (rows.shape.join() !== `3,${M}`) throw new ShapeMismatch(`${op}: rows [${rows.shape}], expected [3, ${M}]`);
  if (!Number.isInteger(a.maxKeys) || a.maxKeys < 1 || a.maxKeys > R)
    throw new InvalidArgument(`${op}: maxKeys ${a.maxKeys} must be in [1, ${R}]`);
  const window = a.window ?? 0;
  const scale = a.scale ?? 1 / Math.sqrt(d);
  return { M, hq, hkv, d, R, window, scale, group: hq / hkv, nsplit: Math.ceil(a.maxKeys / SPLIT_KEYS) };
}

export const decodeAttentionKernel: KernelDef<DecodeAttentionAttrs> = {
  name: 'decode_attention',
  outputs(inputs, a) {
    const { M, hq, d } = dims(inputs, a);
    return [{ shape: [M, hq, d], dtype: 'f32' }];
  },
  cpu([q, k, v, rows], [o], a, { inputs }) {
    decodeAttentionCpu(
      q as FloatArray,
      floatValues(k, inputs[1].dtype),
      floatValues(v, inputs[2].dtype),
      rows as Int32Array,
      o as FloatArray,
      dims(inputs, a),
    );
  },
  webgpu(ctx, [q, k, v, rows], [o], a) {
    const op = 'decode_attention';
    const g = dims([q, k, v, rows].map((r) => r.meta), a);
    if (g.M === 0) return;
    const dpt = dimsPerLane(g.d);
    const f16 = k.meta.dtype === 'f16';
    if (f16) ctx.requireFeature('shader-f16', 'an f16 KV cache');
    const bpr = Math.ceil(g.group / BR);
    const max = ctx.report.limits.maxComputeWorkgroupsPerDimension;
    if (g.M * bpr > max || g.nsplit > max)
      throw new InvalidArgument(`${op}: ${g.M} rows or ${g.nsplit} splits exceed ${max} workgroups per dimension`);
    const u = new Uniforms()
      .u32(g.M)
      .u32(g.hq)
      .u32(g.hkv)
      .u32(g.d)
      .u32(g.group)
      .u32(g.window)
      .f32(g.scale)
      .u32(SPLIT_KEYS)
      .u32(g.nsplit)
      .u32(bpr)
      .u32(L);
    const ins = [binding(q, op), binding(k, op), binding(v, op), binding(rows, op)];
    const grid: [number, number, number] = [g.M * bpr, g.hkv, g.nsplit];
    if (g.nsplit === 1) {
      ctx.dispatch({
        key: `decode_attention_${f16 ? 'f16kv' : 'f32'}_dpt${dpt}_direct`,
        wgsl: () => decodeAttentionWgsl(dpt, false, f16),
        uniforms: u,
        bindings: [...ins, binding(o, op)],
        workgroups: grid,
      });
      return;
    }
    const n = g.M * g.hq * g.d;
    const po = ctx.createBuffer(g.nsplit * n * 4, GpuContext.STORAGE, 'decode-attention-o');
    const pl = ctx.createBuffer(g.nsplit * g.M * g.hq * 4, GpuContext.STORAGE, 'decode-attention-lse');
    const bo = { buffer: po, offset: 0, size: g.nsplit * n * 4 };
    const bl = { buffer: pl, offset: 0, size: g.nsplit * g.M * g.hq * 4 };
    ctx.dispatch({
      key: `decode_attention_${f16 ? 'f16kv' : 'f32'}_dpt${dpt}_split`,
      wgsl: () => decodeAttentionWgsl(dpt, true, f16),
      uniforms: u,
      bindings: [...ins, bo, bl],
      workgroups: grid,
    });
    const WG = 256;
    ctx.dispatch({
      key: `decode_attention_merge_wg${WG}`,
      wgsl: () => mergeWgsl(WG),
      uniforms: new Uniforms().u32(n).u32(g.d).u32(g.nsplit),
      bindings: [bo, bl, binding(o, op)],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
    ctx.releaseBuffer(po);
    ctx.releaseBuffer(pl);
  },
};

/** decodeAttentionWgsl's uniform block. */
const PARAMS =
  'struct P { m: u32, hq: u32, hkv: u32, d: u32, group: u32, window: u32, scale: f32, split_len: u32, nsplit: u32, bpr: u32, lanes: u32 }';

function decodeAttentionWgsl(dpt: number, split: boolean, f16: boolean): string {
  return `${f16 ? 'enable f16;\n' : ''}${PARAMS}
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> q: array<f32>;
${kvBindings(2, f16)}
@group(0) @binding(4) var<storage, read> rows: array<i32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
${split ? '@group(0) @binding(6) var<storage, read_write> lse: array<f32>;' : ''}
const BR = ${BR}u;
const L = ${L}u;
const PAD = ${L + 1}u;
const DPT = ${dpt}u;
const NEG = ${NEG};
var<workgroup> part: array<f32, ${BR * L * (L + 1)}>;
var<workgroup> sc: array<f32, ${BR * L}>;
${mainSignature(BR * L)} {
  let lane = lid.x % L;
  let rl = lid.x / L;
  let kvh = wid.y;
  let b = wid.x / u.bpr;
  let r = (wid.x % u.bpr) * BR + rl;
  let rr = min(r, u.group - 1u); // rows past the group compute on a valid head and write nothing
  let h = kvh * u.group + rr;
  let qi = u32(rows[u.m + b] - rows[2u * u.m + b]);
  let cache0 = u32(rows[2u * u.m + b]);
  // this row's visible keys [first, qi] of its own cache (qi: the query's own cache index)
  var first = 0u;
  if (u.window != 0u && qi + 1u > u.window) { first = qi + 1u - u.window; }
  let s = wid.z;
  let lo = first + s * u.split_len;
  let hi = min(qi + 1u, lo + u.split_len);
  let qb = (b * u.hq + h) * u.d;
  let kstr = u.hkv * u.d;
  let dmax = u.d - 1u;
  var qr: array<f32, DPT>;
  var acc: array<f32, DPT>;
  for (var i = 0u; i < DPT; i++) {
    let d = lane + i * L;
    if (d < u.d) { qr[i] = q[qb + d] * u.scale; }
  }
  ${flashLoop('cache0', 'key < hi')}
  if (r < u.group) {
    // an empty split (past the row's keys) leaves o = 0 and lse = −∞, which weigh nothing in the merge
    let inv = select(0.0, 1.0 / l, l > 0.0);
    let ob = ${split ? 's * u.m * u.hq * u.d + ' : ''}qb;
    for (var i = 0u; i < DPT; i++) {
      let d = lane + i * L;
      if (d < u.d) { o[ob + d] = acc[i] * inv; }
    }
    ${split ? 'if (lane == 0u) { lse[s * u.m * u.hq + b * u.hq + h] = select(NEG, m + log(l), l > 0.0); }' : ''}
  }
}`;
}

/** o = Σ exp(lse_s − max) o_s / Σ exp(lse_s − max) over every split (empty ones add exact zeros). */
function mergeWgsl(wg: number): string {
  return `struct C { n: u32, d: u32, nsplit: u32 }
@group(0) @binding(0) var<uniform> u: C;
@group(0) @binding(1) var<storage, read> op: array<f32>;
@group(0) @binding(2) var<storage, read> lp: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
${mainSignature(wg)} {
  let idx = ${flatIndex(wg)};
  if (idx >= u.n) { return; }
  let row = idx / u.d;
  let rows = u.n / u.d;
  var mx = ${NEG};
  for (var s = 0u; s < u.nsplit; s++) { mx = max(mx, lp[s * rows + row]); }
  var den = 0.0;
  var num = 0.0;
  for (var s = 0u; s < u.nsplit; s++) {
    let w = exp(lp[s * rows + row] - mx);
    den += w;
    num += w * op[s * u.n + idx];
  }
  o[idx] = num / den;
}`;
}

function decodeAttentionCpu(q: FloatArray, k: FloatArray, v: FloatArray, rows: Int32Array, o: FloatArray, g: ReturnType<typeof dims>) {
  const { M, hq, hkv, d, R, window, scale, group } = g;
  for (let b = 0; b < M; b++) {
    const cache0 = rows[2 * M + b];
    const self = rows[M + b] - cache0;
    if (!(cache0 >= 0 && self >= 0 && cache0 + self < R))
      throw new InvalidArgument(`decode_attention: row ${b} reads cache rows ${cache0}..${cache0 + self} of ${R}`);
    const first = window && self + 1 > window ? self + 1 - window : 0;
    for (let h = 0; h < hq; h++) {
      const kvh = Math.floor(h / group);
      const qb = (b * hq + h) * d;
      const scores: number[] = [];
      for (let j = first; j <= self; j++) {
        let s = 0;
        for (let x = 0; x < d; x++) s += q[qb + x] * k[((cache0 + j) * hkv + kvh) * d + x];
        scores.push(s * scale);
      }
      const mx = Math.max(...scores);
      const w = scores.map((s) => Math.exp(s - mx));
      const den = w.reduce((a, c) => a + c, 0);
      for (let x = 0; x < d; x++) {
        let acc = 0;
        for (let j = first; j <= self; j++) acc += w[j - first] * v[((cache0 + j) * hkv + kvh) * d + x];
        o[qb + x] = acc / den;
      }
    }
  }
}
