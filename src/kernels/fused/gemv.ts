/**
 * The fused GEMV of the inference path: y = epilogue(prologue(x) · [W₀; W₁; …]ᵀ) for a few rows of x (decode and
 * latent steps), one dispatch. The prologue normalises x on the fly (RMSNorm with (offset + w), or LayerNorm; Gemma's
 * sandwich adds a normalised o to x first and writes that sum out), or gates it by sigmoid(gate); the weights are up
 * to four [Nₛ, K] matrices whose rows the output concatenates (q|k|v), or a gate/up pair whose products meet in
 * SwiGLU/GeGLU; the epilogue adds a bias, applies GELU, or adds a residual.
 *
 * Weights are read as whole words, each once: q4_0 and q8_0 one block per lane step (its scale loaded once), f16/bf16
 * eight values per vec4 word, f32 four; rows whose words are not 16-byte aligned fall back to scalar words, and
 * shapes no word walk fits to one element per load. The wide cut (GPUs): every workgroup recomputes the row statistics
 * it needs (x is a few KB and cached), so the norm costs no dispatch. The narrow cut (CPU rasterisers, where each
 * repeated statistic is paid in full): a prologue dispatch computes them once and writes the GEMV's input.
 */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { type DType, isQuant } from '../../formats/dtype';
import { GpuContext, Uniforms } from '../../gpu/context';
import { ACT, type Activation } from '../activation/cpu';
import { type CpuArray, type FloatArray, type GpuRef, type KernelDef, type Meta, binding, expectDType, expectRank } from '../kernel';
import { dequantize } from '../matmul/cpu';
import { floatValues } from '../rmsnorm/cpu';
import { type Geometry, MR, STAGE, type Variant, WIDE, fusedGemvWgsl, gemvGeometry, roles, walkOf } from './gemv-wgsl';

export interface FusedGemvAttrs {
  /** Normalisation of the (pre-added) input: RMSNorm x·rsqrt(mean x² + eps)·(offset + γ), or LayerNorm with γ, β. */
  norm?: { kind: 'rms'; eps: number; offset: number } | { kind: 'layer'; eps: number };
  /** Gemma's sandwich: x + rmsNorm(o)·(offset + w) is the input (o and w are inputs), and a second output holds it. */
  preAdd?: { eps: number; offset: number };
  /**
   * x[i, k]·sigmoid(g) with g = gate[i·ld + ⌊k / head⌋·headStride + offset + k mod head]: Qwen3.5's attention output
   * gate, read where q_proj wrote it.
   */
  inputGate?: { ld: number; head: number; headStride: number; offset: number };
  /** Number of weights (1–4); their rows concatenate along N. With `glu` exactly 2, gate and up. */
  weights: number;
  /** act(x·W₀ᵀ + b₀)·(x·W₁ᵀ + b₁): the gated MLP unit. */
  glu?: Activation;
  /** Applied to each output after its bias (not with glu). */
  act?: Activation;
  /** An f32 bias over the N outputs (glu: 2N, gate's then up's). */
  bias?: boolean;
  /** Adds an [M, N] f32 residual. */
  residual?: boolean;
}

const MAX_STORAGE = 8;

interface Dims {
  M: number;
  K: number;
  N: number;
  /** Rows of each weight. */
  rows: number[];
}

function check(inputs: readonly Meta[], a: FusedGemvAttrs): Dims {
  const op = 'fused_gemv';
  const names = roles(a);
  if (!Number.isInteger(a.weights) || a.weights < 1 || a.weights > 4) throw new InvalidArgument(`${op}: 1 to 4 weights, got ${a.weights}`);
  if (a.glu && a.weights !== 2) throw new InvalidArgument(`${op}: a gated unit takes exactly 2 weights (gate, up), got ${a.weights}`);
  if (a.glu && a.act) throw new InvalidArgument(`${op}: act applies without glu only`);
  if (inputs.length !== names.length)
    throw new InvalidArgument(`${op}: expected ${names.length} inputs (${names.join(', ')}), got ${inputs.length}`);
  const outs = 1 + (a.preAdd ? 1 : 0);
  if (names.length + outs > MAX_STORAGE) {
    throw new InvalidArgument(
      `${op}: ${names.length + outs} storage bindings exceed the ${MAX_STORAGE} every WebGPU device allows; fuse less`,
    );
  }
  const at = (n: string) => inputs[names.indexOf(n)];
  const x = at('x');
  expectDType(op, 'x', x, 'f32');
  expectRank(op, 'x', x, 2);
  const [M, K] = x.shape;
  const rows: number[] = [];
  for (let s = 0; s < a.weights; s++) {
    const w = at(`w${s}`);
    expectRank(op, `weight ${s}`, w, 2);
    if (w.shape[1] !== K) throw new ShapeMismatch(`${op}: weight ${s} is [${w.shape}] but x has ${K} columns; weights are [N, K]`);
    if (isQuant(w.dtype) && K % 32 !== 0) throw new ShapeMismatch(`${op}: a ${w.dtype} weight needs K a multiple of 32, got ${K}`);
    rows.push(w.shape[0]);
  }
  if (a.glu && rows[0] !== rows[1]) throw new ShapeMismatch(`${op}: gate has ${rows[0]} rows but up has ${rows[1]}`);
  const N = a.glu ? rows[0] : rows.reduce((s, n) => s + n, 0);
  const vec = (n: string, len: number, ...dt: DType[]) => {
    const m = at(n);
    expectDType(op, n, m, ...dt);
    if (m.shape.reduce((p, d) => p * d, 1) !== len) throw new ShapeMismatch(`${op}: ${n} has shape [${m.shape}], expected ${len} values`);
  };
  for (const n of ['gamma', 'beta', 'wpost']) if (names.includes(n)) vec(n, K, 'f32', 'f16', 'bf16');
  if (a.preAdd) vec('o', M * K, 'f32');
  if (a.bias) vec('bias', a.glu ? 2 * N : N, 'f32');
  if (a.residual) vec('res', M * N, 'f32');
  if (a.inputGate) {
    const g = a.inputGate;
    const gm = at('gate');
    expectDType(op, 'gate', gm, 'f32');
    const last = (M - 1) * g.ld + Math.floor((K - 1) / g.head) * g.headStride + g.offset + ((K - 1) % g.head);
    if (last >= gm.shape.reduce((p, d) => p * d, 1)) throw new ShapeMismatch(`${op}: the gate's layout reads past its ${gm.shape} values`);
  }
  return { M, K, N, rows };
}

export const fusedGemvKernel: KernelDef<FusedGemvAttrs> = {
  name: 'fused_gemv',
  outputs(inputs, attrs) {
    const { M, K, N } = check(inputs, attrs);
    return attrs.preAdd ? [{ shape: [M, N], dtype: 'f32' }, { shape: [M, K], dtype: 'f32' }] : [{ shape: [M, N], dtype: 'f32' }];
  },
  cpu(inputs, outputs, attrs, { inputs: metas }) {
    fusedGemvCpu(inputs, outputs, attrs, metas);
  },
  webgpu(ctx, inputs, outputs, attrs) {
    const d = check(inputs.map((r) => r.meta), attrs);
    if (d.M === 0 || d.N === 0) return;
    const names = roles(attrs);
    const walks = Array.from({ length: attrs.weights }, (_, s) => walkOf(inputs[names.indexOf(`w${s}`)].meta.dtype, d.K));
    const geometry = gemvGeometry(ctx.gemvNarrow, walks, d.K, ctx.subgroupMin, ctx.report.limits.maxComputeInvocationsPerWorkgroup);
    if (geometry === WIDE || !(attrs.norm || attrs.preAdd)) {
      gemvDispatch(ctx, d, inputs, outputs, attrs, geometry);
      return;
    }
    // the narrow cut: the prologue writes the GEMV's input (and Gemma's sum) once; the GEMV takes it as a plain x
    const preAttrs: FusedGemvAttrs = { norm: attrs.norm, preAdd: attrs.preAdd, inputGate: attrs.inputGate, weights: 0 };
    const pre = roles(preAttrs);
    const bytes = d.M * d.K * 4;
    const buf = ctx.createBuffer(bytes, GpuContext.STORAGE, 'fused-gemv-input');
    const xin: GpuRef = { meta: { shape: [d.M, d.K], dtype: 'f32' }, chunks: [{ buffer: buf, offset: 0, size: bytes, rows: d.M }] };
    gemvDispatch(ctx, d, inputs.slice(0, pre.length), [xin, ...outputs.slice(1)], preAttrs, geometry, true);
    const rest = { weights: attrs.weights, glu: attrs.glu, act: attrs.act, bias: attrs.bias, residual: attrs.residual };
    gemvDispatch(ctx, d, [xin, ...inputs.slice(pre.length)], outputs.slice(0, 1), rest, geometry);
    ctx.releaseBuffer(buf);
  },
};

/** One dispatch of the GEMV (or, with `prologue`, of its norm's prologue) on refs in `roles(attrs)` order. */
function gemvDispatch(
  ctx: GpuContext, d: Dims, inputs: GpuRef[], outputs: GpuRef[], attrs: FusedGemvAttrs, geometry: Geometry, prologue = false,
) {
  const names = roles(attrs);
  const dtypes = (n: string) => inputs[names.indexOf(n)].meta.dtype;
  const walks = Array.from({ length: attrs.weights }, (_, s) => walkOf(dtypes(`w${s}`), d.K));
  // the pipeline depends on the structure and dtypes only; sizes, eps and offsets are uniforms
  // a transformed input (norm, gate, pre-add) small enough is staged in workgroup memory once instead of being
  // recomputed for each of the workgroup's weight rows
  const stage = !prologue && !!(attrs.norm || attrs.preAdd || attrs.inputGate) && Math.min(d.M, MR) * d.K <= STAGE;
  const subgroups = ctx.subgroupReduce;
  const v: Variant = {
    attrs,
    walks,
    stage,
    subgroups,
    paramDtypes: ['wpost', 'gamma', 'beta'].filter((n) => names.includes(n)).map(dtypes),
    geometry,
    prologue,
    one: !prologue && geometry !== WIDE,
  };
  const cut = prologue
    ? '_prologue'
    : geometry === WIDE ? '' : `_l${geometry.lanes}r${geometry.rows}${geometry.shuffleOnly ? 's' : ''}${v.one ? '_x1' : ''}`;
  const key = `fused_gemv${cut}_${JSON.stringify([
    walks.map((w) => `${w.dtype}:${w.mode}`),
    stage,
    subgroups,
    v.paramDtypes,
    attrs.norm?.kind ?? '',
    !!attrs.preAdd,
    !!attrs.inputGate,
    attrs.weights,
    attrs.glu ?? '',
    attrs.act ?? '',
    !!attrs.bias,
    !!attrs.residual,
  ])}`;
  const starts = [0];
  for (const n of d.rows) starts.push(starts[starts.length - 1] + n);
  const g = attrs.inputGate ?? { ld: 0, head: 1, headStride: 0, offset: 0 };
  const norm = attrs.norm;
  const u = new Uniforms().u32(d.M).u32(d.K).u32(d.N)
    .f32(norm?.eps ?? 0).f32(norm?.kind === 'rms' ? norm.offset : 0).f32(attrs.preAdd?.eps ?? 0).f32(attrs.preAdd?.offset ?? 0)
    .u32(g.ld).u32(g.head).u32(g.headStride).u32(g.offset)
    .u32(starts[1] ?? 0).u32(starts[2] ?? 0).u32(starts[3] ?? 0);
  for (let s = 0; s < 4; s++) u.u32(s < attrs.weights ? walks[s].ld : 0);
  const groups = prologue ? 1 : Math.ceil(d.N / geometry.rows);
  const max = ctx.report.limits.maxComputeWorkgroupsPerDimension;
  const [gx, gy] = groups <= max ? [groups, 1] : [max, Math.ceil(groups / max)];
  ctx.dispatch({
    key,
    wgsl: () => fusedGemvWgsl(v),
    uniforms: u,
    bindings: [...inputs, ...outputs].map((r: GpuRef, i) => binding(r, `fused_gemv ${[...names, 'out', 'x1'][i]}`)),
    workgroups: [gx, gy, v.one ? d.M : Math.ceil(d.M / MR)],
  });
}

// --- the CPU reference: the unfused ops one after another ---

function fusedGemvCpu(inputs: CpuArray[], outputs: CpuArray[], a: FusedGemvAttrs, metas: readonly Meta[]) {
  const { M, K, N, rows } = check(metas, a);
  const names = roles(a);
  const get = (n: string) => inputs[names.indexOf(n)];
  const vals = (n: string) => floatValues(get(n), metas[names.indexOf(n)].dtype);
  const x = get('x') as FloatArray;
  const out = outputs[0] as FloatArray;
  const xin = new Float64Array(M * K);
  if (a.preAdd) {
    const o = get('o') as FloatArray;
    const w = vals('wpost');
    for (let i = 0; i < M; i++) {
      let ss = 0;
      for (let k = 0; k < K; k++) ss += o[i * K + k] ** 2;
      const r = 1 / Math.sqrt(ss / K + a.preAdd.eps);
      // the sum is stored as f32 (the unfused path's tensors are) before it is normalised again
      for (let k = 0; k < K; k++) xin[i * K + k] = Math.fround(x[i * K + k] + Math.fround(o[i * K + k] * r * (a.preAdd.offset + w[k])));
    }
    (outputs[1] as FloatArray).set(xin);
  } else xin.set(x);
  const av = new Float64Array(M * K);
  for (let i = 0; i < M; i++) {
    const row = xin.subarray(i * K, (i + 1) * K);
    const dst = av.subarray(i * K, (i + 1) * K);
    if (a.norm?.kind === 'rms') {
      const g = vals('gamma');
      let ss = 0;
      for (let k = 0; k < K; k++) ss += row[k] ** 2;
      const r = 1 / Math.sqrt(ss / K + a.norm.eps);
      for (let k = 0; k < K; k++) dst[k] = Math.fround(row[k] * r * (a.norm.offset + g[k]));
    } else if (a.norm?.kind === 'layer') {
      const [g, be] = [vals('gamma'), vals('beta')];
      let s = 0;
      for (let k = 0; k < K; k++) s += row[k];
      const mean = s / K;
      let v = 0;
      for (let k = 0; k < K; k++) v += (row[k] - mean) ** 2;
      const r = 1 / Math.sqrt(v / K + a.norm.eps);
      for (let k = 0; k < K; k++) dst[k] = Math.fround((row[k] - mean) * r * g[k] + be[k]);
    } else dst.set(row);
    if (a.inputGate) {
      const gt = get('gate') as FloatArray;
      const { ld, head, headStride, offset } = a.inputGate;
      for (let k = 0; k < K; k++)
        dst[k] = Math.fround(dst[k] * ACT.sigmoid.f(gt[i * ld + Math.floor(k / head) * headStride + offset + (k % head)]));
    }
  }
  const ws = rows.map((r, s) => dequantize(get(`w${s}`), metas[names.indexOf(`w${s}`)].dtype, [r, K]));
  const bias = a.bias ? (get('bias') as FloatArray) : null;
  const res = a.residual ? (get('res') as FloatArray) : null;
  const dot = (w: FloatArray, r: number, i: number) => {
    let s = 0;
    for (let k = 0; k < K; k++) s += w[r * K + k] * av[i * K + k];
    return s;
  };
  for (let i = 0; i < M; i++) {
    for (let n = 0, s = 0, base = 0; n < N; n++) {
      let y: number;
      if (a.glu) {
        const g = Math.fround(dot(ws[0], n, i) + (bias ? bias[n] : 0));
        const up = Math.fround(dot(ws[1], n, i) + (bias ? bias[N + n] : 0));
        y = ACT[a.glu].f(g) * up;
      } else {
        while (n - base >= rows[s]) base += rows[s++];
        y = Math.fround(dot(ws[s], n - base, i) + (bias ? bias[n] : 0));
        if (a.act) y = ACT[a.act].f(y);
      }
      out[i * N + n] = res ? Math.fround(y) + res[i * N + n] : y;
    }
  }
}
