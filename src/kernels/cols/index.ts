/**
 * cols: copies along the last dimension of f32 tensors of any rank ≥ 1, seen as rows × columns — sliceCols
 * (columns [start, start + width) of every row), splitCols (several slices at once: one output per part) and
 * concatCols (inputs side by side). Qwen3.5 splits a fused q|k|v projection and a query|gate pair with them;
 * each is the other's backward. Tensors are taken whole (one binding each) on the GPU.
 */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { type GpuContext, Uniforms } from '../../gpu/context';
import { type FloatArray, type GpuRef, type KernelDef, type Meta, binding, expectDType, rowsCols } from '../kernel';
import { concatColsForward, sliceColsForward } from './cpu';
import { concatColsWgsl, sliceColsWgsl } from './wgsl';

export { concatColsForward, sliceColsForward } from './cpu';
export { concatColsWgsl, sliceColsWgsl } from './wgsl';

const WG = 256;

/**
 * Inputs of one concat_cols: WebGPU gives a stage 8 storage buffers by default (maxStorageBuffersPerShaderStage),
 * and one is the output, so 6 inputs leave one to spare; the CUDA launch passes the same 6 pointers.
 */
export const MAX_CONCAT_COLS = 6;

export interface SliceColsAttrs {
  start: number;
  width: number;
}

export interface SplitColsAttrs {
  /** widths of the parts, in order; positive integers summing to the last dim */
  widths: readonly number[];
}

function colOperand(op: string, what: string, m: Meta) {
  expectDType(op, what, m, 'f32');
  if (m.shape.length < 1) {
    throw new ShapeMismatch(
      `${op}: ${what} is a scalar (shape []); column ops take tensors of rank ≥ 1 with columns along the last dim (reshape it to [1])`,
    );
  }
}

function checkRange(op: string, start: number, width: number, cols: number, what: string) {
  if (!Number.isInteger(start) || !Number.isInteger(width) || start < 0 || width < 0 || start + width > cols) {
    throw new InvalidArgument(
      `${op}: columns [${start}, ${start + width}) do not lie inside the ${cols} columns of ${what}; start and width must be integers with 0 ≤ start and start + width ≤ ${cols}`,
    );
  }
}

const withLast = (shape: readonly number[], last: number) => [...shape.slice(0, -1), last];

/** Validates splitCols' widths against x: positive integers summing to x's last dim. */
export function checkSplitWidths(op: string, x: Meta, widths: readonly number[]) {
  colOperand(op, 'x', x);
  const C = x.shape[x.shape.length - 1];
  if (!widths.length || widths.some((w) => !Number.isInteger(w) || w < 1)) {
    throw new InvalidArgument(`${op}: widths [${widths}] must be one or more positive integers (the columns of each part, in order)`);
  }
  const sum = widths.reduce((a, b) => a + b, 0);
  if (sum !== C)
    throw new InvalidArgument(`${op}: widths [${widths}] sum to ${sum} but x [${x.shape}] has ${C} columns; they must sum to the last dim`);
}

/** Validates concat_cols operands (1 to MAX_CONCAT_COLS f32 tensors, equal but for the last dim); the output shape. */
export function concatColsShape(op: string, xs: readonly Meta[]): number[] {
  if (!xs.length) throw new InvalidArgument(`${op}: nothing to concatenate; pass at least one tensor`);
  if (xs.length > MAX_CONCAT_COLS) {
    throw new InvalidArgument(
      `${op}: ${xs.length} inputs, at most ${MAX_CONCAT_COLS} (a WebGPU stage binds 8 storage buffers); concatenate in groups and concatenate the groups`,
    );
  }
  xs.forEach((m, i) => colOperand(op, `input ${i}`, m));
  const lead = xs[0].shape.slice(0, -1);
  xs.forEach((m, i) => {
    if (m.shape.length !== lead.length + 1 || lead.some((s, k) => s !== m.shape[k])) {
      throw new ShapeMismatch(
        `${op}: input ${i} has shape [${m.shape}] but input 0 has [${xs[0].shape}]; all inputs must be [${[...lead, 'columns']}] with only the last dim differing`,
      );
    }
  });
  return [...lead, xs.reduce((s, m) => s + m.shape[m.shape.length - 1], 0)];
}

function sliceColsGpu(ctx: GpuContext, op: string, x: GpuRef, out: GpuRef, start: number) {
  const [R, C] = rowsCols(x.meta.shape);
  const width = out.meta.shape[out.meta.shape.length - 1];
  const n = R * width;
  if (!n) return;
  ctx.dispatch({
    key: `slice_cols_b32_wg${WG}`,
    wgsl: () => sliceColsWgsl(WG),
    uniforms: new Uniforms().u32(n).u32(C).u32(start).u32(width),
    bindings: [binding(x, op), binding(out, op)],
    workgroups: ctx.grid(Math.ceil(n / WG)),
  });
}

/** x [..., C] -> columns [start, start + width): [..., width]. */
export const sliceColsKernel: KernelDef<SliceColsAttrs> = {
  name: 'slice_cols',
  outputs([x], { start, width }) {
    colOperand('slice_cols', 'x', x);
    checkRange('slice_cols', start, width, x.shape[x.shape.length - 1], `x [${x.shape}]`);
    return [{ shape: withLast(x.shape, width), dtype: 'f32' }];
  },
  cpu([x], [out], { start, width }, { inputs: [xm] }) {
    const [R, C] = rowsCols(xm.shape);
    sliceColsForward(x as FloatArray, out as FloatArray, R, C, start, width);
  },
  webgpu(ctx, [x], [out], { start }) {
    sliceColsGpu(ctx, 'slice_cols', x, out, start);
  },
  cuda(ctx, [x], [out], { start, width }) {
    const [R, C] = rowsCols(x.meta.shape);
    if (R * width > 0) ctx.launch('slice_cols', [x.ptr, out.ptr], [R, C, start, width]);
  },
};

/** x [..., Σ widths] -> one output [..., widths[i]] per part: a slice_cols each, recorded as one op by F.splitCols. */
export const splitColsKernel: KernelDef<SplitColsAttrs> = {
  name: 'split_cols',
  outputs([x], { widths }) {
    checkSplitWidths('split_cols', x, widths);
    return widths.map((w) => ({ shape: withLast(x.shape, w), dtype: 'f32' as const }));
  },
  cpu([x], outs, { widths }, { inputs: [xm] }) {
    const [R, C] = rowsCols(xm.shape);
    let at = 0;
    widths.forEach((w, i) => {
      sliceColsForward(x as FloatArray, outs[i] as FloatArray, R, C, at, w);
      at += w;
    });
  },
  webgpu(ctx, [x], outs, { widths }) {
    let at = 0;
    widths.forEach((w, i) => {
      sliceColsGpu(ctx, 'split_cols', x, outs[i], at);
      at += w;
    });
  },
  cuda(ctx, [x], outs, { widths }) {
    const [R, C] = rowsCols(x.meta.shape);
    let at = 0;
    widths.forEach((w, i) => {
      if (R > 0) ctx.launch('slice_cols', [x.ptr, outs[i].ptr], [R, C, at, w]);
      at += w;
    });
  },
};

/** xs[i] [..., w_i] (1 to MAX_CONCAT_COLS inputs, equal leading dims) -> [..., Σ w_i]. */
export const concatColsKernel: KernelDef<void> = {
  name: 'concat_cols',
  outputs(xs) {
    return [{ shape: concatColsShape('concat_cols', xs), dtype: 'f32' }];
  },
  cpu(xs, [out], _a, { inputs, outputs: [om] }) {
    concatColsForward(xs as FloatArray[], inputs.map((m) => rowsCols(m.shape)[1]), out as FloatArray, rowsCols(om.shape)[0]);
  },
  webgpu(ctx, xs, [out]) {
    const [R, C] = rowsCols(out.meta.shape);
    const n = R * C;
    if (!n) return;
    const uniforms = new Uniforms().u32(n).u32(C);
    for (const x of xs) uniforms.u32(rowsCols(x.meta.shape)[1]);
    ctx.dispatch({
      key: `concat_cols_${xs.length}_b32_wg${WG}`,
      wgsl: () => concatColsWgsl(WG, xs.length),
      uniforms,
      bindings: [...xs, out].map((r) => binding(r, 'concat_cols')),
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, xs, [out]) {
    const [R, C] = rowsCols(out.meta.shape);
    if (R * C > 0) ctx.launch('concat_cols', [out.ptr, ...xs.map((x) => x.ptr)], [R, ...xs.map((x) => rowsCols(x.meta.shape)[1])]);
  },
};
