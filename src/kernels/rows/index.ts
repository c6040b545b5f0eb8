/**
 * rows: copies of whole rows along dim 0 of f32 tensors of any rank ≥ 1 — sliceRows, concatRows and
 * placeRows (zeros with rows placed at an offset: the backward of sliceRows). Training builds
 * `embed(prefix) ⊕ latents ⊕ embed(suffix)` and trims latents with them.
 * On the GPU each copy is one dispatch per stretch of rows that lies inside one chunk of the source
 * and one of the destination, so tensors split across bindings along dim 0 are walked, not refused.
 */
import { BindingLimitExceeded, InvalidArgument, ShapeMismatch } from '../../errors';
import { type GpuContext, Uniforms } from '../../gpu/context';
import { type FloatArray, type GpuRef, type KernelDef, type Meta, expectDType, numelOf } from '../kernel';
import { bind, chunkStarts, locate, segments } from '../segments';
import { concatRowsForward, placeRowsForward, sliceRowsForward } from './cpu';
import { copyWordsWgsl } from './wgsl';

export { copyRows, concatRowsForward, placeRowsForward, sliceRowsForward } from './cpu';
export { copyWordsWgsl } from './wgsl';

const WG = 256;

export interface SliceRowsAttrs {
  start: number;
  n: number;
}

export interface PlaceRowsAttrs {
  /** row of the output where the input's first row goes */
  start: number;
  /** rows of the output */
  rows: number;
}

/** Elements of one row: the product of the trailing dims. */
const rowElemsOf = (m: Meta) => numelOf(m.shape.slice(1));

function rowOperand(op: string, what: string, m: Meta) {
  expectDType(op, what, m, 'f32');
  if (m.shape.length < 1) {
    throw new ShapeMismatch(
      `${op}: ${what} is a scalar (shape []); row ops take tensors of rank ≥ 1 with rows along dim 0 (reshape it to [1])`,
    );
  }
}

function checkRange(op: string, start: number, n: number, rows: number, what: string) {
  if (!Number.isInteger(start) || !Number.isInteger(n) || start < 0 || n < 0 || start + n > rows) {
    throw new InvalidArgument(
      `${op}: rows [${start}, ${start + n}) do not lie inside the ${rows} rows of ${what}; start and n must be integers with 0 ≤ start and start + n ≤ ${rows}`,
    );
  }
}

/** Validates concatRows operands: one or more f32 tensors whose shapes agree past dim 0. */
export function concatRowsShape(op: string, xs: readonly Meta[]): number[] {
  if (!xs.length) throw new InvalidArgument(`${op}: nothing to concatenate; pass at least one tensor (zero-row tensors are allowed)`);
  xs.forEach((m, i) => rowOperand(op, `input ${i}`, m));
  const rest = xs[0].shape.slice(1);
  xs.forEach((m, i) => {
    if (m.shape.length !== rest.length + 1 || m.shape.some((s, k) => k > 0 && s !== rest[k - 1])) {
      throw new ShapeMismatch(
        `${op}: input ${i} has shape [${m.shape}] but input 0 has [${xs[0].shape}]; all inputs must be [rows, ${rest.join(', ') || '(none)'}] with only rows differing`,
      );
    }
  });
  return [xs.reduce((s, m) => s + m.shape[0], 0), ...rest];
}

/** First row of every chunk, plus the end. An unsplit tensor is one chunk whatever its shape says. */
function rowStarts(op: string, ref: GpuRef): number[] {
  const rows = ref.meta.shape[0];
  if (ref.chunks.length === 1) return [0, rows];
  const starts = chunkStarts(ref, 1);
  if (starts[starts.length - 1] !== rows) {
    throw new BindingLimitExceeded(
      `${op}: a tensor of shape [${ref.meta.shape}] is split across ${ref.chunks.length} bindings holding ${starts[starts.length - 1]} rows, not ${rows}; ` +
        'row ops walk tensors split along dim 0 only, so keep dim 0 of split tensors unchanged (or use a device with larger bindings)',
    );
  }
  return starts;
}

/** GPU: dst rows [dstRow, dstRow + n) = src rows [srcRow, srcRow + n), chunk by chunk. */
export function copyRowsGpu(ctx: GpuContext, op: string, src: GpuRef, srcRow: number, dst: GpuRef, dstRow: number, n: number) {
  const rowElems = rowElemsOf(src.meta);
  if (n === 0 || rowElems === 0) return;
  const sStarts = rowStarts(op, src);
  const dStarts = rowStarts(op, dst);
  const cuts = [...sStarts.map((s) => s - srcRow), ...dStarts.map((s) => s - dstRow)];
  for (const [a, b] of segments(n, cuts)) {
    const s = locate(src, sStarts, srcRow + a);
    const d = locate(dst, dStarts, dstRow + a);
    const words = (b - a) * rowElems;
    if ((Math.max(s.local, d.local) + b - a) * rowElems > 0xffffffff) {
      throw new BindingLimitExceeded(
        `${op}: a binding of more than 2³² elements cannot be indexed by this kernel; split the tensor along dim 0`,
      );
    }
    ctx.dispatch({
      key: `rows_copy_b32_wg${WG}`,
      wgsl: () => copyWordsWgsl(WG),
      uniforms: new Uniforms().u32(words).u32(s.local * rowElems).u32(d.local * rowElems),
      bindings: [bind(s.chunk), bind(d.chunk)],
      workgroups: ctx.grid(Math.ceil(words / WG)),
    });
  }
}

/** x [R, ...rest] -> rows [start, start + n): [n, ...rest]. */
export const sliceRowsKernel: KernelDef<SliceRowsAttrs> = {
  name: 'slice_rows',
  outputs([x], { start, n }) {
    rowOperand('slice_rows', 'x', x);
    checkRange('slice_rows', start, n, x.shape[0], `x [${x.shape}]`);
    return [{ shape: [n, ...x.shape.slice(1)], dtype: 'f32' }];
  },
  cpu([x], [out], { start }, { inputs: [xm] }) {
    sliceRowsForward(x as FloatArray, start, rowElemsOf(xm), out as FloatArray);
  },
  webgpu(ctx, [x], [out], { start, n }) {
    copyRowsGpu(ctx, 'slice_rows', x, start, out, 0, n);
  },
  cuda(ctx, [x], [out], { start, n }) {
    const rowElems = rowElemsOf(x.meta);
    if (n * rowElems > 0) ctx.launch('slice_rows', [x.ptr, out.ptr], [n * rowElems, start * rowElems]);
  },
};

/** xs[i] [R_i, ...rest] -> [ΣR_i, ...rest]; zero-row inputs add nothing. */
export const concatRowsKernel: KernelDef<void> = {
  name: 'concat_rows',
  outputs(xs) {
    return [{ shape: concatRowsShape('concat_rows', xs), dtype: 'f32' }];
  },
  cpu(xs, [out], _a, { inputs }) {
    concatRowsForward(xs as FloatArray[], inputs.map((m) => m.shape[0]), rowElemsOf(inputs[0]), out as FloatArray);
  },
  webgpu(ctx, xs, [out]) {
    let at = 0;
    for (const x of xs) {
      copyRowsGpu(ctx, 'concat_rows', x, 0, out, at, x.meta.shape[0]);
      at += x.meta.shape[0];
    }
  },
  cuda(ctx, xs, [out]) {
    if (numelOf(out.meta.shape) === 0) return;
    ctx.launch('concat_rows', [out.ptr, ...xs.map((x) => x.ptr)], xs.map((x) => numelOf(x.meta.shape)));
  },
};

/** g [n, ...rest] -> zeros [rows, ...rest] with g at rows [start, start + n): sliceRows' backward. */
export const placeRowsKernel: KernelDef<PlaceRowsAttrs> = {
  name: 'place_rows',
  outputs([g], { start, rows }) {
    rowOperand('place_rows', 'g', g);
    if (!Number.isInteger(rows) || rows < 0) throw new InvalidArgument(`place_rows: rows ${rows} must be a non-negative integer`);
    checkRange('place_rows', start, g.shape[0], rows, `the [${rows}, ${g.shape.slice(1)}] output`);
    return [{ shape: [rows, ...g.shape.slice(1)], dtype: 'f32' }];
  },
  cpu([g], [out], { start }, { inputs: [gm] }) {
    placeRowsForward(g as FloatArray, start, gm.shape[0], rowElemsOf(gm), out as FloatArray);
  },
  webgpu(ctx, [g], [out], { start }) {
    for (const c of out.chunks) ctx.clear(c.buffer, c.offset, c.size);
    copyRowsGpu(ctx, 'place_rows', g, 0, out, start, g.meta.shape[0]);
  },
  cuda(ctx, [g], [out], { start }) {
    const total = numelOf(out.meta.shape);
    if (total > 0) ctx.launch('place_rows', [g.ptr, out.ptr], [total, start * rowElemsOf(g.meta), numelOf(g.meta.shape)]);
  },
};
