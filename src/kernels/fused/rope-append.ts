/**
 * One dispatch between the QKV product and attention: per token and head, the per-head RMSNorm (Qwen3, Gemma 3), the
 * rotation (half-split layout, partial rotary), and for key/value heads the write into the KV cache. Each row t says
 * its RoPE position and the cache row it writes (`rows`, StepRows): consecutive rows of one sequence, or one row for
 * each sequence of a batch whose caches are stacked in one tensor.
 * Queries go to a fresh [T, Hq, D] output. With `gated` (Qwen3.5) q_proj wrote per head its query then its gate; the
 * gate stays where it is and the o-projection reads it there (FusedGemvAttrs.inputGate).
 */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { Uniforms } from '../../gpu/context';
import { type CpuArray, type FloatArray, type KernelDef, type Meta, binding, expectDType, expectRank } from '../kernel';
import { floatValues } from '../rmsnorm/cpu';
import { f32ToF16Bits } from '../../formats/dtype';
import { ropeAngle } from '../rope/cpu';
import { COS_SIN } from '../rope/wgsl';
import { flatWorkgroup, loadFn, mainSignature } from '../wgsl';

export interface RopeAppendAttrs {
  heads: number;
  kvHeads: number;
  headDim: number;
  /** q_proj's rows hold per head the query and then its output gate (2·D per head). */
  gated: boolean;
  /** Per-head RMSNorm of q and k before the rotation (their weights are inputs 1 and 2). */
  qkNorm: boolean;
  eps: number;
  offset: number;
}

const WG = 64;

/** Inputs: qkv [T, width], with qkNorm qNorm and kNorm [D], rows [3, T] i32 (StepRows), freq [R/2], k cache, v cache. */
function check(inputs: readonly Meta[], a: RopeAppendAttrs) {
  const n = a.qkNorm ? 7 : 5;
  if (inputs.length !== n) throw new InvalidArgument(`rope_append: expected ${n} inputs, got ${inputs.length}`);
  const [qkv, pos, freq, kc, vc] = a.qkNorm ? [inputs[0], ...inputs.slice(3)] : inputs;
  const [qn, kn] = a.qkNorm ? [inputs[1], inputs[2]] : [null, null];
  const op = 'rope_append';
  const { heads: H, kvHeads: Hkv, headDim: D } = a;
  expectDType(op, 'qkv', qkv, 'f32');
  expectRank(op, 'qkv', qkv, 2);
  const [T, width] = qkv.shape;
  const qw = H * D * (a.gated ? 2 : 1);
  if (width !== qw + 2 * Hkv * D)
    throw new ShapeMismatch(`${op}: qkv rows have ${width} values, expected ${qw + 2 * Hkv * D} (q ${qw}, k and v ${Hkv * D} each)`);
  if (qn && kn) for (const [n, m] of [['q norm', qn], ['k norm', kn]] as const) {
    expectDType(op, n, m, 'f32', 'f16', 'bf16');
    if (m.shape.length !== 1 || m.shape[0] !== D) throw new ShapeMismatch(`${op}: ${n} has shape [${m.shape}], expected [${D}]`);
  }
  expectDType(op, 'rows', pos, 'i32');
  if (pos.shape.length !== 2 || pos.shape[0] !== 3 || pos.shape[1] !== T)
    throw new ShapeMismatch(`${op}: rows [${pos.shape}] for ${T} tokens, expected [3, ${T}]`);
  const half = freq.shape[0];
  if (freq.shape.length !== 1 || half < 1 || 2 * half > D)
    throw new ShapeMismatch(`${op}: frequencies [${freq.shape}] do not fit head_dim ${D}`);
  if (kc.dtype !== vc.dtype) throw new ShapeMismatch(`${op}: the k cache is ${kc.dtype} but the v cache ${vc.dtype}`);
  for (const [n, m] of [['k cache', kc], ['v cache', vc]] as const) {
    expectDType(op, n, m, 'f32', 'f16');
    if (m.shape.length !== 3 || m.shape[1] !== Hkv || m.shape[2] !== D)
      throw new ShapeMismatch(`${op}: ${n} is [${m.shape}], expected [maxLen, ${Hkv}, ${D}]`);
  }
  return { T, width, qw, half };
}

export const ropeAppendKernel: KernelDef<RopeAppendAttrs> = {
  name: 'rope_append',
  outputs(inputs, a) {
    const { T } = check(inputs, a);
    return [{ shape: [T, a.heads, a.headDim], dtype: 'f32' }];
  },
  cpu(inputs, [q], a, { inputs: metas }) {
    ropeAppendCpu(inputs, q as FloatArray, a, metas);
  },
  webgpu(ctx, inputs, [q], a) {
    const { T, width, qw, half } = check(inputs.map((r) => r.meta), a);
    if (T === 0) return;
    const [qd, kd] = a.qkNorm ? [inputs[1].meta.dtype, inputs[2].meta.dtype] : ['f32' as const, 'f32' as const];
    const f16 = inputs[inputs.length - 2].meta.dtype === 'f16';
    if (f16) ctx.requireFeature('shader-f16', 'an f16 KV cache');
    const groups = T * (a.heads + a.kvHeads);
    const max = ctx.report.limits.maxComputeWorkgroupsPerDimension;
    ctx.dispatch({
      key: `rope_append_q${qd}_k${kd}_${a.qkNorm ? 'norm' : 'plain'}_${f16 ? 'f16kv' : 'f32kv'}_wg${WG}`,
      wgsl: () => ropeAppendWgsl(qd, kd, a.qkNorm, f16),
      uniforms: new Uniforms().u32(T).u32(a.heads).u32(a.kvHeads).u32(a.headDim).u32(width).u32(qw).u32(a.gated ? 2 * a.headDim : a.headDim)
        .u32(half).f32(a.eps).f32(a.offset),
      bindings: [...inputs, q].map((r) => binding(r, 'rope_append')),
      workgroups: groups <= max ? [groups] : [max, Math.ceil(groups / max)],
    });
  },
};

/** ropeAppendWgsl's uniform block. */
const PARAMS = 'struct P { T: u32, H: u32, Hkv: u32, D: u32, width: u32, qw: u32, qstride: u32, half: u32, eps: f32, off: f32 }';

function ropeAppendWgsl(qd: Meta['dtype'], kd: Meta['dtype'], norm: boolean, f16: boolean): string {
  const b = norm ? 2 : 0;
  const t = f16 ? 'f16' : 'f32';
  return `${f16 ? 'enable f16;\n' : ''}${PARAMS}
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
${norm ? `${loadFn('qn', 2, qd)}\n${loadFn('kn', 3, kd)}` : ''}
@group(0) @binding(${2 + b}) var<storage, read> pos: array<i32>;
@group(0) @binding(${3 + b}) var<storage, read> freq: array<f32>;
@group(0) @binding(${4 + b}) var<storage, read_write> kc: array<${t}>;
@group(0) @binding(${5 + b}) var<storage, read_write> vc: array<${t}>;
@group(0) @binding(${6 + b}) var<storage, read_write> q: array<f32>;
var<workgroup> red: array<f32, ${WG}>;
${COS_SIN}
var<private> isq: bool;
var<private> r: f32;
// the normalised element d of the head starting at src
fn nv(src: u32, d: u32) -> f32 {
  let v = qkv[src + d];
  ${norm ? 'if (isq) { return v * r * (u.off + load_qn(d)); }\n  return v * r * (u.off + load_kn(d));' : 'return v;'}
}
fn store(dst: u32, d: u32, v: f32) {
  if (isq) { q[dst + d] = v; } else { kc[dst + d] = ${t}(v); }
}
${mainSignature(WG)} {
  let wi = ${flatWorkgroup};
  let t = wi / (u.H + u.Hkv);
  if (t >= u.T) { return; }
  let h = wi - t * (u.H + u.Hkv);
  isq = h < u.H;
  let kh = h - u.H;
  let src = select(t * u.width + u.qw + kh * u.D, t * u.width + h * u.qstride, isq);
  let dst = select((u32(pos[u.T + t]) * u.Hkv + kh) * u.D, (t * u.H + h) * u.D, isq);
  r = 1.0;
  ${
    norm
      ? `var ss = 0.0;
  for (var d = lid.x; d < u.D; d += ${WG}u) { let v = qkv[src + d]; ss += v * v; }
  red[lid.x] = ss;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (lid.x < s) { red[lid.x] += red[lid.x + s]; }
    workgroupBarrier();
  }
  r = inverseSqrt(red[0] / f32(u.D) + u.eps);`
      : ''
  }
  for (var j = lid.x; j < u.D - u.half; j += ${WG}u) {
    if (j < u.half) {
      let cs = cos_sin(f32(pos[t]) * freq[j]);
      let x0 = nv(src, j);
      let x1 = nv(src, j + u.half);
      store(dst, j, x0 * cs.x - x1 * cs.y);
      store(dst, j + u.half, x1 * cs.x + x0 * cs.y);
    } else {
      store(dst, j + u.half, nv(src, j + u.half));
    }
  }
  if (!isq) {
    let vs = t * u.width + u.qw + u.Hkv * u.D + kh * u.D;
    for (var d = lid.x; d < u.D; d += ${WG}u) { vc[dst + d] = ${t}(qkv[vs + d]); }
  }
}`;
}

function ropeAppendCpu(inputs: CpuArray[], q: FloatArray, a: RopeAppendAttrs, metas: readonly Meta[]) {
  const { T, width, qw, half } = check(metas, a);
  const [qkv, pos, freq, kc, vc] = (a.qkNorm ? [inputs[0], ...inputs.slice(3)] : inputs) as [
    FloatArray,
    Int32Array,
    FloatArray,
    FloatArray | Uint16Array,
    FloatArray | Uint16Array,
  ];
  const { heads: H, kvHeads: Hkv, headDim: D } = a;
  const rows = kc.length / (Hkv * D);
  for (let t = 0; t < T; t++) {
    if (!(pos[T + t] >= 0 && pos[T + t] < rows))
      throw new InvalidArgument(`rope_append: row ${t} writes cache row ${pos[T + t]} of ${rows}`);
  }
  const qn = a.qkNorm ? floatValues(inputs[1], metas[1].dtype) : null;
  const kn = a.qkNorm ? floatValues(inputs[2], metas[2].dtype) : null;
  // an f16 cache stores each value rounded to f16
  const store = (dst: FloatArray | Uint16Array) =>
    dst instanceof Uint16Array ? (i: number, v: number) => (dst[i] = f32ToF16Bits(v)) : (i: number, v: number) => (dst[i] = v);
  const head = new Float64Array(D);
  const put = (src: number, w: FloatArray | null, t: number, set: (i: number, v: number) => void, at: number) => {
    let r = 1;
    if (w) {
      let ss = 0;
      for (let d = 0; d < D; d++) ss += qkv[src + d] ** 2;
      r = 1 / Math.sqrt(ss / D + a.eps);
    }
    // normalised values are f32 tensors on the unfused path
    for (let d = 0; d < D; d++) head[d] = w ? Math.fround(qkv[src + d] * r * (a.offset + w[d])) : qkv[src + d];
    for (let i = 0; i < half; i++) {
      const ang = ropeAngle(pos[t], freq[i]);
      const [c, s] = [Math.cos(ang), Math.sin(ang)];
      set(at + i, head[i] * c - head[i + half] * s);
      set(at + i + half, head[i + half] * c + head[i] * s);
    }
    for (let d = 2 * half; d < D; d++) set(at + d, head[d]);
  };
  const [setQ, setK, setV] = [store(q), store(kc), store(vc)];
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < H; h++) put(t * width + h * (a.gated ? 2 * D : D), qn, t, setQ, (t * H + h) * D);
    for (let h = 0; h < Hkv; h++) {
      const row = (pos[T + t] * Hkv + h) * D;
      put(t * width + qw + h * D, kn, t, setK, row);
      for (let d = 0; d < D; d++) setV(row + d, qkv[t * width + qw + Hkv * D + h * D + d]);
    }
  }
}
