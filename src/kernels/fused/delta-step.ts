/**
 * One Gated DeltaNet token in one dispatch (decode and latent steps): from the projections q|k|v, z, b, a of the token
 * (one fused GEMV wrote them side by side), per value head h: the causal conv over the cached K − 1 rows and the new
 * one with SiLU, q and k L2-normalised (q also by 1/√dk), g = −exp(A_log)·softplus(a + dt_bias) and β = sigmoid(b),
 * the delta-rule update of the state in place (S' = e^g S; u = v − S'ᵀk; S = S' + k(βu)ᵀ; o = Sᵀq), then the head's
 * RMSNorm gated by SiLU(z). The conv's next state goes to its own output, so heads sharing q/k channels never race.
 */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { Uniforms } from '../../gpu/context';
import { ACT } from '../activation/cpu';
import { MATH } from '../activation/wgsl';
import { type CpuArray, type FloatArray, type KernelDef, type Meta, binding, expectDType } from '../kernel';
import { floatValues } from '../rmsnorm/cpu';
import { wgSumWgsl } from '../rmsnorm/wgsl';
import { loadFn, mainSignature } from '../wgsl';

export interface DeltaStepAttrs {
  /**
   * Stacked caches of a batch (decoder BatchCache): inputs proj [M, W], conv weight, conv rings [R·K, C] (position i of
   * cache row r in slot r·K + i mod K), states [R·nv, dk, dv], gates, norm, rows [3, M] (StepRows); the row's cache is
   * base / rowStride, its length slot − base; rings and states are updated in place and the only output is y.
   */
  rowStride?: number;
  keyHeads: number;
  valueHeads: number;
  keyDim: number;
  valueDim: number;
  convKernel: number;
  /** The gated output norm's eps. */
  eps: number;
}

const WG = 128;
/** Head sizes the workgroup arrays hold. */
export const DELTA_STEP_MAX_DIM = 256;

/** Inputs: proj [1, C + nv·dv + 2·nv], conv weight [C, K], conv state [K − 1, C], state [nv, dk, dv] (updated), gates [2, nv] (−exp A_log, dt_bias), norm [dv]; with rowStride see DeltaStepAttrs. */
function check(inputs: readonly Meta[], a: DeltaStepAttrs) {
  const op = 'delta_step';
  const ring = a.rowStride !== undefined;
  if (inputs.length !== (ring ? 7 : 6)) throw new InvalidArgument(`${op}: expected ${ring ? 7 : 6} inputs, got ${inputs.length}`);
  const [proj, cw, cs, st, gp, nw, rows] = inputs;
  const { keyHeads: nk, valueHeads: nv, keyDim: dk, valueDim: dv, convKernel: K } = a;
  if (nv % nk !== 0) throw new ShapeMismatch(`${op}: ${nv} value heads cannot share ${nk} key heads`);
  if (dk > DELTA_STEP_MAX_DIM || dv > DELTA_STEP_MAX_DIM)
    throw new InvalidArgument(`${op}: head sizes up to ${DELTA_STEP_MAX_DIM}, got ${dk} and ${dv}`);
  if (K < 2) throw new InvalidArgument(`${op}: conv kernel ${K} must be at least 2`);
  const C = 2 * nk * dk + nv * dv;
  const W = C + nv * dv + 2 * nv;
  const shape = (n: string, m: Meta, want: number[]) => {
    if (m.shape.join() !== want.join()) throw new ShapeMismatch(`${op}: ${n} is [${m.shape}], expected [${want}]`);
  };
  expectDType(op, 'proj', proj, 'f32');
  const M = proj.shape[0];
  shape('proj', proj, [ring ? M : 1, W]);
  expectDType(op, 'conv weight', cw, 'f32', 'f16', 'bf16');
  shape('conv weight', cw, [C, K]);
  expectDType(op, 'conv state', cs, 'f32');
  expectDType(op, 'state', st, 'f32');
  expectDType(op, 'gates', gp, 'f32');
  shape('gates', gp, [2, nv]);
  expectDType(op, 'norm', nw, 'f32', 'f16', 'bf16');
  shape('norm', nw, [dv]);
  let R = 1;
  if (ring) {
    R = cs.shape[0] / K;
    if (!Number.isInteger(R) || R < 1) throw new ShapeMismatch(`${op}: conv rings [${cs.shape}] are not [R·${K}, ${C}]`);
    shape('conv rings', cs, [R * K, C]);
    shape('states', st, [R * nv, dk, dv]);
    expectDType(op, 'rows', rows, 'i32');
    shape('rows', rows, [3, M]);
    if (!Number.isInteger(a.rowStride) || a.rowStride! < 1)
      throw new InvalidArgument(`${op}: rowStride ${a.rowStride} must be a positive integer`);
  } else {
    shape('conv state', cs, [K - 1, C]);
    shape('state', st, [nv, dk, dv]);
  }
  return { C, W, M, R, ring };
}

export const deltaStepKernel: KernelDef<DeltaStepAttrs> = {
  name: 'delta_step',
  outputs(inputs, a) {
    const { C, M, ring } = check(inputs, a);
    const y = { shape: [M, a.valueHeads * a.valueDim], dtype: 'f32' as const };
    return ring ? [y] : [y, { shape: [a.convKernel - 1, C], dtype: 'f32' }];
  },
  cpu(inputs, outputs, a, { inputs: metas }) {
    deltaStepCpu(inputs, outputs as FloatArray[], a, metas);
  },
  webgpu(ctx, inputs, outputs, a) {
    const { C, W, M, ring } = check(inputs.map((r) => r.meta), a);
    if (M === 0) return;
    const [cwd, nwd] = [inputs[1].meta.dtype, inputs[5].meta.dtype];
    ctx.dispatch({
      key: `delta_step_c${cwd}_n${nwd}_${ring ? 'ring' : 'one'}_wg${WG}`,
      wgsl: () => deltaStepWgsl(cwd, nwd, ring),
      uniforms: new Uniforms()
        .u32(a.keyHeads)
        .u32(a.valueHeads)
        .u32(a.keyDim)
        .u32(a.valueDim)
        .u32(a.convKernel)
        .u32(C)
        .f32(1e-6 / a.keyDim)
        .f32(Math.fround(1 / a.keyDim))
        .f32(Math.fround(1 / Math.sqrt(a.keyDim)))
        .f32(a.eps)
        .u32(W)
        .u32(M)
        .u32(a.rowStride ?? 1),
      bindings: [...inputs, ...outputs].map((r) => binding(r, 'delta_step')),
      workgroups: [a.valueHeads, M],
    });
  },
};

/** deltaStepWgsl's uniform block. */
const PARAMS =
  'struct P { nk: u32, nv: u32, dk: u32, dv: u32, K: u32, C: u32, l2eps: f32, wq: f32, wk: f32, eps: f32, W: u32, m: u32, stride: u32 }';

function deltaStepWgsl(cwd: Meta['dtype'], nwd: Meta['dtype'], ring: boolean): string {
  const M = DELTA_STEP_MAX_DIM;
  // one sequence: the K − 1 cached rows in order, the next state to its own output; stacked caches: rings in place
  const io = ring
    ? `@group(0) @binding(7) var<storage, read> rows: array<i32>;
@group(0) @binding(8) var<storage, read_write> y: array<f32>;`
    : `@group(0) @binding(7) var<storage, read_write> y: array<f32>;
@group(0) @binding(8) var<storage, read_write> cn: array<f32>;`;
  const conv = ring
    ? `fn conv(c: u32, keep: bool) -> f32 {
  var s = 0.0;
  // position len − K + 1 + j sits in slot (len + 1 + j) mod K; this token goes to slot len mod K, which held the
  // row no step reads any more
  for (var j = 0u; j + 1u < u.K; j++) { s += load_cw(c * u.K + j) * cs[(ring0 + (len + 1u + j) % u.K) * u.C + c]; }
  let x = proj[p0 + c];
  s += load_cw(c * u.K + u.K - 1u) * x;
  if (keep) { cs[(ring0 + len % u.K) * u.C + c] = x; }
  return s * sigmoid(s);
}`
    : `fn conv(c: u32, keep: bool) -> f32 {
  var s = 0.0;
  for (var j = 0u; j + 1u < u.K; j++) {
    let v = cs[j * u.C + c];
    s += load_cw(c * u.K + j) * v;
    if (keep && j > 0u) { cn[(j - 1u) * u.C + c] = v; }
  }
  s += load_cw(c * u.K + u.K - 1u) * proj[c];
  if (keep) { cn[(u.K - 2u) * u.C + c] = proj[c]; }
  return s * sigmoid(s);
}`;
  return `${PARAMS}
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> proj: array<f32>;
${loadFn('cw', 2, cwd)}
@group(0) @binding(3) var<storage, ${ring ? 'read_write' : 'read'}> cs: array<f32>;
@group(0) @binding(4) var<storage, read_write> st: array<f32>;
@group(0) @binding(5) var<storage, read> gp: array<f32>;
${loadFn('nw', 6, nwd)}
${io}
${MATH}
fn softplus(x: f32) -> f32 {
  let e = exp(min(x, 20.0));
  return select(select(log(1.0 + e), e - 0.5 * e * e, e < 1e-4), x, x > 20.0);
}
var<workgroup> qs: array<f32, ${M}>;
var<workgroup> ks: array<f32, ${M}>;
var<workgroup> os: array<f32, ${M}>;
// channel c through the causal conv (the K − 1 cached rows, then this token) and SiLU; keep: write the next state
var<private> p0: u32;
var<private> ring0: u32;
var<private> len: u32;
${conv}
${wgSumWgsl(WG)}
${mainSignature(WG)} {
  let h = wid.x;
  let b = wid.y;
  ${
    ring
      ? `let cr = u32(rows[2u * u.m + b]) / u.stride;
  len = u32(rows[u.m + b] - rows[2u * u.m + b]);
  ring0 = cr * u.K;
  let st0 = cr * u.nv;`
      : 'let st0 = 0u;'
  }
  p0 = b * u.W;
  let r = u.nv / u.nk;
  let kh = h / r;
  let lead = h % r == 0u;
  var sq = vec2<f32>(0.0);
  for (var i = lid.x; i < u.dk; i += ${WG}u) {
    let qv = conv(kh * u.dk + i, lead);
    let kv = conv(u.nk * u.dk + kh * u.dk + i, lead);
    qs[i] = qv;
    ks[i] = kv;
    sq += vec2<f32>(qv * qv, kv * kv);
  }
  let n2 = wg_sum(sq, lid.x);
  let rq = inverseSqrt(n2.x / f32(u.dk) + u.l2eps) * u.wq;
  let rk = inverseSqrt(n2.y / f32(u.dk) + u.l2eps) * u.wk;
  for (var i = lid.x; i < u.dk; i += ${WG}u) { qs[i] *= rq; ks[i] *= rk; }
  workgroupBarrier();
  let zb = u.C;
  let bb = zb + u.nv * u.dv;
  let g = gp[h] * softplus(proj[p0 + bb + u.nv + h] + gp[u.nv + h]);
  let alpha = exp(g);
  let beta = sigmoid(proj[p0 + bb + h]);
  let sb = (st0 + h) * u.dk * u.dv;
  var oo = 0.0;
  for (var j = lid.x; j < u.dv; j += ${WG}u) {
    let vj = conv(2u * u.nk * u.dk + h * u.dv + j, true);
    var m = 0.0;
    for (var i = 0u; i < u.dk; i++) { m += st[sb + i * u.dv + j] * alpha * ks[i]; }
    let d = beta * (vj - m);
    var o = 0.0;
    for (var i = 0u; i < u.dk; i++) {
      let s = st[sb + i * u.dv + j] * alpha + ks[i] * d;
      st[sb + i * u.dv + j] = s;
      o += s * qs[i];
    }
    os[j] = o;
    oo += o * o;
  }
  let rn = inverseSqrt(wg_sum(vec2<f32>(oo, 0.0), lid.x).x / f32(u.dv) + u.eps);
  for (var j = lid.x; j < u.dv; j += ${WG}u) {
    let z = proj[p0 + zb + h * u.dv + j];
    y[b * u.nv * u.dv + h * u.dv + j] = os[j] * rn * load_nw(j) * (z * sigmoid(z));
  }
}`;
}

function deltaStepCpu(inputs: CpuArray[], outs: FloatArray[], a: DeltaStepAttrs, metas: readonly Meta[]) {
  const { C, W, M, R, ring } = check(metas, a);
  const { keyHeads: nk, valueHeads: nv, keyDim: dk, valueDim: dv, convKernel: K } = a;
  const proj = inputs[0] as FloatArray;
  const cw = floatValues(inputs[1], metas[1].dtype);
  const cs = inputs[2] as FloatArray;
  const st = inputs[3] as FloatArray;
  const gp = inputs[4] as FloatArray;
  const nw = floatValues(inputs[5], metas[5].dtype);
  const rows = ring ? (inputs[6] as Int32Array) : null;
  const [y, cn] = outs;
  const silu = ACT.silu.f;
  for (let b = 0; b < M; b++) {
    const p0 = b * W;
    // the K − 1 rows before this token, oldest first (a ring's slots, or the one sequence's state)
    let past: (c: number, j: number) => number;
    let cr = 0;
    if (rows) {
      cr = rows[2 * M + b] / a.rowStride!;
      const len = rows[M + b] - rows[2 * M + b];
      if (!(Number.isInteger(cr) && cr >= 0 && cr < R && len >= 0))
        throw new InvalidArgument(`delta_step: row ${b} names cache row ${cr} of ${R}`);
      const ring0 = cr * K;
      const old = Float64Array.from({ length: (K - 1) * C }, (_, i) => cs[(ring0 + (len + 1 + Math.floor(i / C)) % K) * C + (i % C)]);
      past = (c, j) => old[j * C + c];
      for (let c = 0; c < C; c++) cs[(ring0 + (len % K)) * C + c] = proj[p0 + c];
    } else {
      const old = Float64Array.from(cs);
      past = (c, j) => old[j * C + c];
      for (let row = 0; row < K - 2; row++) cn.set(cs.subarray((row + 1) * C, (row + 2) * C), row * C);
      cn.set(proj.subarray(0, C), (K - 2) * C);
    }
    const conv = (c: number) => {
      let s = 0;
      for (let j = 0; j < K - 1; j++) s += cw[c * K + j] * past(c, j);
      return silu(Math.fround(s + cw[c * K + K - 1] * proj[p0 + c]));
    };
    const l2 = (c0: number, w: number) => {
      const v = Array.from({ length: dk }, (_, i) => Math.fround(conv(c0 + i)));
      const ss = v.reduce((s, x) => s + x * x, 0);
      const r = 1 / Math.sqrt(ss / dk + 1e-6 / dk);
      return v.map((x) => Math.fround(x * r * w));
    };
    const r = nv / nk;
    for (let h = 0; h < nv; h++) {
      const kh = Math.floor(h / r);
      const q = l2(kh * dk, Math.fround(1 / dk));
      const k = l2(nk * dk + kh * dk, Math.fround(1 / Math.sqrt(dk)));
      const bb = p0 + C + nv * dv;
      const g = Math.fround(Math.fround(ACT.softplus.f(Math.fround(proj[bb + nv + h] + gp[nv + h]))) * gp[h]);
      const alpha = Math.exp(g);
      const beta = Math.fround(ACT.sigmoid.f(proj[bb + h]));
      const o = new Float64Array(dv);
      for (let j = 0; j < dv; j++) {
        const vj = Math.fround(conv(2 * nk * dk + h * dv + j));
        const at = (i: number) => ((cr * nv + h) * dk + i) * dv + j;
        let m = 0;
        for (let i = 0; i < dk; i++) m += st[at(i)] * alpha * k[i];
        const d = beta * (vj - m);
        for (let i = 0; i < dk; i++) {
          st[at(i)] = st[at(i)] * alpha + k[i] * d;
          o[j] += st[at(i)] * q[i];
        }
      }
      const ss = o.reduce((s, x) => s + x * x, 0);
      const rn = 1 / Math.sqrt(ss / dv + a.eps);
      for (let j = 0; j < dv; j++)
        y[b * nv * dv + h * dv + j] = Math.fround(o[j] * rn * nw[j]) * Math.fround(silu(proj[p0 + C + h * dv + j]));
    }
  }
}
