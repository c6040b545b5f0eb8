/**
 * Causal grouped-query attention: forward (prefill, chunked prefill and decode are one kernel: query t
 * sits at position kvLen − T + t), the flash-attention backward (row dot, dQ, dK/dV), and kvAppend,
 * which writes new k/v rows into a preallocated cache in place. f32 activations.
 */
import { GpuContext, Uniforms } from '../../gpu/context';
import { InvalidArgument, ShapeMismatch, UnsupportedFeature } from '../../errors';
import { floatValues } from '../rmsnorm/cpu';
import { rowCut } from '../row-cut';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectRank, expectSameShape } from '../kernel';
import { type AttnDims, attentionBackward, attentionForward, attentionRowDot } from './cpu';
import { FWD_ROWS, BWD_ROWS, LANES, ROWS_WG, attentionForwardWgsl, attentionRowsWgsl, combineWgsl, dimsPerLane, rowDotWgsl } from './wgsl';
import { attentionBackwardKVWgsl, attentionBackwardQWgsl } from './wgsl-backward';
import { cudaAttentionBackwardKV, cudaAttentionBackwardQ, cudaAttentionForward, cudaAttentionRowDot } from './cuda';

export { type AttnDims, attentionBackward, attentionForward, attentionRowDot, keyRange } from './cpu';
export { kvAppendKernel } from './kv';

export interface AttentionAttrs {
  /** multiplies q·k; default 1/√D */
  scale?: number;
  /** sliding window: a query sees the last `window` positions including its own; 0/undefined = none */
  window?: number;
  /** valid rows of k and v when they are cache tensors [maxS, Hkv, D]; default S */
  kvLen?: number;
  /** key-range splits of the forward (flash-decoding); default chosen from the grid size. Tests force it. */
  splits?: number;
}

/** Validates q [T, Hq, D], k/v [S, Hkv, D] and the attributes; returns the problem size. */
export function attentionDims(op: string, q: Meta, k: Meta, v: Meta, attrs: AttentionAttrs, f16Cache = false): AttnDims {
  for (const [n, m] of [['q', q], ['k', k], ['v', v]] as const) {
    if (n === 'q' || !f16Cache) expectDType(op, n, m, 'f32');
    else expectDType(op, n, m, 'f32', 'f16');
    expectRank(op, n, m, 3);
  }
  expectSameShape(op, k, v, 'k', 'v');
  if (k.dtype !== v.dtype) throw new ShapeMismatch(`${op}: k is ${k.dtype} but v is ${v.dtype}`);
  const [t, hq, d] = q.shape;
  const [s, hkv, dk] = k.shape;
  if (dk !== d) throw new ShapeMismatch(`${op}: q has head_dim ${d} but k has ${dk}; q is [T, Hq, D] and k, v are [S, Hkv, D]`);
  if (d < 1 || hkv < 1 || hq % hkv !== 0) {
    throw new ShapeMismatch(`${op}: ${hq} query heads cannot share ${hkv} kv heads; Hq must be a positive multiple of Hkv and D ≥ 1`);
  }
  const kvLen = attrs.kvLen ?? s;
  if (!Number.isInteger(kvLen) || kvLen < t || kvLen > s) {
    throw new InvalidArgument(
      `${op}: kvLen ${kvLen} must be an integer between T = ${t} (the ${t} queries are the last kvLen rows of k/v) and S = ${s} (rows of k/v)`,
    );
  }
  const window = attrs.window ?? 0;
  if (!Number.isInteger(window) || window < 0)
    throw new InvalidArgument(`${op}: window ${window} must be a positive integer (or 0 for none)`);
  const scale = attrs.scale ?? 1 / Math.sqrt(d);
  if (!Number.isFinite(scale)) throw new InvalidArgument(`${op}: scale ${scale} is not finite`);
  return { t, s, hq, hkv, d, kvLen, scale, window };
}

function attnUniforms(dims: AttnDims, split = { base: 0, len: dims.kvLen, n: 1 }) {
  return new Uniforms()
    .u32(dims.t).u32(dims.hq).u32(dims.hkv).u32(dims.d).u32(dims.hq / dims.hkv).u32(dims.kvLen - dims.t).u32(dims.kvLen).u32(dims.window)
    .f32(dims.scale).u32(split.len).u32(dims.s).u32(split.n).u32(split.base).u32(LANES);
}

function checkGrid(ctx: GpuContext, op: string, n: number, what: string) {
  const max = ctx.report.limits.maxComputeWorkgroupsPerDimension;
  if (n > max)
    throw new InvalidArgument(
      `${op}: ${n} workgroups of ${what} exceed this device's ${max} per dimension; process the sequence in chunks`,
    );
}

/**
 * Key-range splits of the forward. A decode step has only Hkv workgroups, too few to fill a GPU, so
 * long caches are split and merged (flash-decoding); prefill grids are large enough as they are.
 * Splits cover [base, kvLen), base being the first key any query sees (so a window wastes none).
 */
function chooseSplits(ctx: GpuContext, dims: AttnDims, blocks: number, forced?: number) {
  const past = dims.kvLen - dims.t;
  const base = dims.window > 0 ? Math.max(0, past + 1 - dims.window) : 0;
  const span = dims.kvLen - base;
  // aim at ~256 workgroups (a couple per SM of a large GPU), with at least 128 keys per split
  let n = forced ?? (span >= 256 && blocks < 128 ? Math.min(Math.floor(span / 128), Math.ceil(256 / blocks)) : 1);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgument(`attention: splits ${forced} must be a positive integer`);
  const partBytes = dims.t * dims.hq * dims.d * 4;
  n = Math.min(n, Math.max(1, Math.floor(ctx.bindingLimit / partBytes)), ctx.report.limits.maxComputeWorkgroupsPerDimension);
  const len = Math.ceil(Math.ceil(span / Math.max(1, n)) / LANES) * LANES;
  return { base, len, n: Math.max(1, Math.ceil(span / len)) };
}

/**
 * (q, k, v) -> (o [T, Hq, D], lse [Hq, T]): lse is the logsumexp of each row's scaled scores. k and v may be an f16
 * cache (forward only; WebGPU with shader-f16 and the CPU).
 */
export const attentionKernel: KernelDef<AttentionAttrs> = {
  name: 'attention',
  outputs([q, k, v], attrs) {
    const { t, hq, d } = attentionDims('attention', q, k, v, attrs, true);
    return [{ shape: [t, hq, d], dtype: 'f32' }, { shape: [hq, t], dtype: 'f32' }];
  },
  cpu([q, k, v], [o, lse], attrs, { inputs: [qm, km, vm], wasm }) {
    const dims = attentionDims('attention', qm, km, vm, attrs, true);
    if (wasm?.attention(q as FloatArray, k as FloatArray, v as FloatArray, dims, o as FloatArray, lse as FloatArray)) return;
    attentionForward(q as FloatArray, floatValues(k, km.dtype), floatValues(v, vm.dtype), dims, o as FloatArray, lse as FloatArray);
  },
  webgpu(ctx, [q, k, v], [o, lse], attrs) {
    const op = 'attention';
    const dims = attentionDims(op, q.meta, k.meta, v.meta, attrs, true);
    const f16 = k.meta.dtype === 'f16';
    if (f16) ctx.requireFeature('shader-f16', 'an f16 KV cache');
    if (dims.t === 0 || dims.hq === 0) return;
    const kv = f16 ? 'f16kv' : 'f32';
    let shape: { key: string; wgsl: () => string; grid: [number, number] };
    if (rowCut(ctx) === 'rows') {
      const d4 = Math.ceil(dims.d / 4);
      shape = {
        key: `attention_${kv}_fwd_rows_d4${d4}_wg${ROWS_WG}`,
        wgsl: () => attentionRowsWgsl(d4, f16),
        grid: ctx.grid(Math.ceil((dims.t * dims.hq) / ROWS_WG)),
      };
    } else {
      const dpt = dimsPerLane(dims.d);
      const rowBlocks = Math.ceil((dims.t * dims.hq) / dims.hkv / FWD_ROWS);
      checkGrid(ctx, op, rowBlocks, `${FWD_ROWS} query rows`);
      shape = {
        key: `attention_${kv}_fwd_dpt${dpt}_wg${FWD_ROWS * LANES}`,
        wgsl: () => attentionForwardWgsl(dpt, f16),
        grid: [rowBlocks, dims.hkv],
      };
    }
    const split = chooseSplits(ctx, dims, shape.grid[0] * shape.grid[1], attrs.splits);
    const fwd = (outs: GPUBufferBinding[]) =>
      ctx.dispatch({
        key: shape.key,
        wgsl: shape.wgsl,
        uniforms: attnUniforms(dims, split),
        bindings: [binding(q, op), binding(k, op), binding(v, op), ...outs],
        workgroups: [...shape.grid, split.n],
      });
    const n = split.n;
    if (n === 1) return fwd([binding(o, op), binding(lse, op)]);
    const outElems = dims.t * dims.hq * dims.d;
    const partO = ctx.createBuffer(n * outElems * 4, GpuContext.STORAGE, 'attention-split-o');
    const partL = ctx.createBuffer(n * dims.hq * dims.t * 4, GpuContext.STORAGE, 'attention-split-lse');
    const po = { buffer: partO, offset: 0, size: n * outElems * 4 };
    const pl = { buffer: partL, offset: 0, size: n * dims.hq * dims.t * 4 };
    fwd([po, pl]);
    const WG = 256;
    ctx.dispatch({
      key: `attention_f32_combine_wg${WG}`,
      wgsl: () => combineWgsl(WG),
      uniforms: new Uniforms().u32(outElems).u32(dims.d).u32(dims.t).u32(dims.hq).u32(n),
      bindings: [po, pl, binding(o, op), binding(lse, op)],
      workgroups: ctx.grid(Math.ceil(outElems / WG)),
    });
    // released after encoding: the pool hands them out again only after this batch is submitted
    ctx.releaseBuffer(partO);
    ctx.releaseBuffer(partL);
  },
  cuda(ctx, inputs, outputs, attrs) {
    const [q, k, v] = inputs;
    if (k.meta.dtype !== 'f32') throw new UnsupportedFeature('attention: the CUDA backend keeps f32 caches; use kvDtype f32');
    cudaAttentionForward(ctx, inputs, outputs, attentionDims('attention', q.meta, k.meta, v.meta, attrs), attrs.splits);
  },
};

function backwardDims(op: string, [q, k, v, lse, di, dO]: readonly Meta[], attrs: AttentionAttrs): AttnDims {
  const dims = attentionDims(op, q, k, v, attrs);
  for (const [n, m] of [['lse', lse], ['di', di]] as const) {
    expectDType(op, n, m, 'f32');
    if (m.shape.length !== 2 || m.shape[0] !== dims.hq || m.shape[1] !== dims.t) {
      throw new ShapeMismatch(`${op}: ${n} has shape [${m.shape}], expected [Hq, T] = [${dims.hq}, ${dims.t}]`);
    }
  }
  expectDType(op, 'dO', dO, 'f32');
  expectSameShape(op, q, dO, 'q', 'dO');
  return dims;
}

/** (o, dO) -> di [Hq, T], the rowsum(dO ∘ O) term of the backward. */
export const attentionRowDotKernel: KernelDef<AttentionAttrs> = {
  name: 'attention_row_dot',
  outputs([o, dO]) {
    expectDType('attention_row_dot', 'o', o, 'f32');
    expectRank('attention_row_dot', 'o', o, 3);
    expectSameShape('attention_row_dot', o, dO, 'o', 'dO');
    return [{ shape: [o.shape[1], o.shape[0]], dtype: 'f32' }];
  },
  cpu([o, dO], [di], _attrs, { inputs: [om] }) {
    const [t, hq, d] = om.shape;
    attentionRowDot(o as FloatArray, dO as FloatArray, t, hq, d, di as FloatArray);
  },
  webgpu(ctx, [o, dO], [di]) {
    const [t, hq, d] = o.meta.shape;
    const WG = 64;
    if (t * hq === 0) return;
    ctx.dispatch({
      key: `attention_f32_rowdot_wg${WG}`,
      wgsl: () => rowDotWgsl(WG),
      uniforms: new Uniforms().u32(t).u32(hq).u32(d),
      bindings: [binding(o, 'attention_row_dot'), binding(dO, 'attention_row_dot'), binding(di, 'attention_row_dot')],
      workgroups: ctx.grid(Math.ceil((t * hq) / WG)),
    });
  },
  cuda(ctx, inputs, outputs) {
    cudaAttentionRowDot(ctx, inputs, outputs);
  },
};

/** (q, k, v, lse, di, dO) -> dq. */
export const attentionBackwardQKernel: KernelDef<AttentionAttrs> = {
  name: 'attention_backward_q',
  outputs(inputs, attrs) {
    backwardDims('attention_backward_q', inputs, attrs);
    return [{ shape: inputs[0].shape, dtype: 'f32' }];
  },
  cpu([q, k, v, lse, di, dO], [dq], attrs, { inputs }) {
    const dims = backwardDims('attention_backward_q', inputs, attrs);
    const f = (a: unknown) => a as FloatArray;
    attentionBackward(f(q), f(k), f(v), f(lse), f(di), f(dO), dims, f(dq), null, null);
  },
  webgpu(ctx, ins, [dq], attrs) {
    const op = 'attention_backward_q';
    const dims = backwardDims(op, ins.map((r) => r.meta), attrs);
    if (dims.t === 0 || dims.hq === 0) return;
    const dpt = dimsPerLane(dims.d);
    const rowBlocks = Math.ceil((dims.t * dims.hq) / dims.hkv / BWD_ROWS);
    checkGrid(ctx, op, rowBlocks, `${BWD_ROWS} query rows`);
    ctx.dispatch({
      key: `attention_f32_bwdq_dpt${dpt}_wg${BWD_ROWS * LANES}`,
      wgsl: () => attentionBackwardQWgsl(dpt),
      uniforms: attnUniforms(dims),
      bindings: [...ins.map((r) => binding(r, op)), binding(dq, op)],
      workgroups: [rowBlocks, dims.hkv],
    });
  },
  cuda(ctx, inputs, outputs, attrs) {
    cudaAttentionBackwardQ(ctx, inputs, outputs, backwardDims('attention_backward_q', inputs.map((r) => r.meta), attrs));
  },
};

/** (q, k, v, lse, di, dO) -> (dk, dv), shaped like k and v (rows at or past kvLen are zero). */
export const attentionBackwardKVKernel: KernelDef<AttentionAttrs> = {
  name: 'attention_backward_kv',
  outputs(inputs, attrs) {
    backwardDims('attention_backward_kv', inputs, attrs);
    return [{ shape: inputs[1].shape, dtype: 'f32' }, { shape: inputs[2].shape, dtype: 'f32' }];
  },
  cpu([q, k, v, lse, di, dO], [dk, dv], attrs, { inputs }) {
    const dims = backwardDims('attention_backward_kv', inputs, attrs);
    const f = (a: unknown) => a as FloatArray;
    attentionBackward(f(q), f(k), f(v), f(lse), f(di), f(dO), dims, null, f(dk), f(dv));
  },
  webgpu(ctx, ins, [dk, dv], attrs) {
    const op = 'attention_backward_kv';
    const dims = backwardDims(op, ins.map((r) => r.meta), attrs);
    if (dims.s === 0) return;
    if (dims.t === 0) {
      for (const r of [dk, dv]) for (const c of r.chunks) ctx.clear(c.buffer, c.offset, c.size);
      return;
    }
    const dpt = dimsPerLane(dims.d);
    const keyBlocks = Math.ceil(dims.s / BWD_ROWS);
    checkGrid(ctx, op, keyBlocks, `${BWD_ROWS} key rows`);
    ctx.dispatch({
      key: `attention_f32_bwdkv_dpt${dpt}_wg${BWD_ROWS * LANES}`,
      wgsl: () => attentionBackwardKVWgsl(dpt),
      uniforms: attnUniforms(dims),
      bindings: [...ins.map((r) => binding(r, op)), binding(dk, op), binding(dv, op)],
      workgroups: [keyBlocks, dims.hkv],
    });
  },
  cuda(ctx, inputs, outputs, attrs) {
    cudaAttentionBackwardKV(ctx, inputs, outputs, backwardDims('attention_backward_kv', inputs.map((r) => r.meta), attrs));
  },
};
