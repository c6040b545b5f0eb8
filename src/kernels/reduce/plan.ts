/**
 * Encoding of the two-stage reductions on a GpuContext, shared by reduce, clip and the losses.
 * Inputs may be split across bindings (GpuRef chunks along dim 0); every chunk is walked.
 */
import { GpuContext, Uniforms } from '../../gpu/context';
import { type GpuRef, numelOf } from '../kernel';
import { reduceFinalWgsl, reducePartialWgsl } from './wgsl';

export const WG = 256;
/** Elements one thread sums at least before another segment is opened. */
const PER_THREAD = 8;
/** Segments per row; bounds stage 2 to one workgroup per row reading at most this many partials. */
const MAX_SPLITS = 1024;

/** Segments a row of `cols` elements is split into by stage 1 (0 for an empty row). */
export const splitsFor = (cols: number) => (cols === 0 ? 0 : Math.min(MAX_SPLITS, Math.ceil(cols / (WG * PER_THREAD))));

/** One binding of a tensor and the elements it holds: [start, start + count) of the flat tensor. */
export interface Span {
  binding: GPUBufferBinding;
  start: number;
  count: number;
}

/** The chunks of a tensor as element spans (chunks hold whole dim-0 slices). */
export function spans(ref: GpuRef): Span[] {
  const total = numelOf(ref.meta.shape);
  const inner = numelOf(ref.meta.shape.slice(1));
  let start = 0;
  return ref.chunks.map((c) => {
    const count = ref.chunks.length === 1 ? total : c.rows * inner;
    const s = { binding: { buffer: c.buffer, offset: c.offset, size: c.size }, start, count };
    start += count;
    return s;
  });
}

/** A temporary f32 device buffer; released after encoding (the pool recycles it only after submit). */
export function scratch(ctx: GpuContext, elements: number, label: string): { binding: GPUBufferBinding; release(): void } {
  const size = Math.max(4, elements * 4);
  const buffer = ctx.createBuffer(size, GpuContext.STORAGE, label);
  return { binding: { buffer, offset: 0, size }, release: () => ctx.releaseBuffer(buffer) };
}

function partial(
  ctx: GpuContext,
  square: boolean,
  x: GPUBufferBinding,
  rows: number,
  cols: number,
  splits: number,
  outBase: number,
  alpha: number,
  out: GPUBufferBinding,
) {
  if (rows * splits === 0) return;
  ctx.dispatch({
    key: `reduce_${square ? 'sumsq' : 'sum'}_f32_partial_wg${WG}`,
    wgsl: () => reducePartialWgsl(square, WG),
    uniforms: new Uniforms()
      .u32(rows)
      .u32(cols)
      .u32(splits)
      .u32(Math.ceil(cols / splits))
      .u32(outBase)
      .f32(alpha),
    bindings: [x, out],
    workgroups: ctx.grid(rows * splits),
  });
}

function final(
  ctx: GpuContext,
  partials: GPUBufferBinding,
  rows: number,
  splits: number,
  alpha: number,
  root: boolean,
  out: GPUBufferBinding,
) {
  if (rows === 0) return;
  ctx.dispatch({
    key: `reduce_final_f32_wg${WG}`,
    wgsl: () => reduceFinalWgsl(WG),
    uniforms: new Uniforms()
      .u32(rows)
      .u32(splits)
      .f32(alpha)
      .u32(root ? 1 : 0),
    bindings: [partials, out],
    workgroups: ctx.grid(rows),
  });
}

export interface ReduceOpts {
  square: boolean;
  alpha: number;
  /** Square-root the result (a norm). */
  root?: boolean;
}

/**
 * out[0] = alpha * sum over every element of every span (squared when `square`), then sqrt if `root`.
 * The spans may come from several tensors: clip_grad_norm_ reduces all gradients into one partial row.
 */
export function encodeReduceAll(ctx: GpuContext, parts: Span[], { square, alpha, root = false }: ReduceOpts, out: GPUBufferBinding) {
  const splits = parts.map((p) => splitsFor(p.count));
  if (parts.length === 1 && splits[0] === 1 && !root) {
    partial(ctx, square, parts[0].binding, 1, parts[0].count, 1, 0, alpha, out);
    return;
  }
  const total = splits.reduce((a, b) => a + b, 0);
  const tmp = scratch(ctx, total, 'reduce-partials');
  let base = 0;
  parts.forEach((p, k) => {
    partial(ctx, square, p.binding, 1, p.count, splits[k], base, 1, tmp.binding);
    base += splits[k];
  });
  final(ctx, tmp.binding, 1, total, alpha, root, out);
  tmp.release();
}

/** out[r] = alpha * sum_c x[r, c] (squared when `square`) for the `rows` rows held by the spans. */
export function encodeReduceLast(
  ctx: GpuContext,
  parts: Span[],
  rows: number,
  cols: number,
  { square, alpha }: ReduceOpts,
  out: GPUBufferBinding,
) {
  const splits = splitsFor(cols);
  if (splits === 1) {
    for (const p of parts) partial(ctx, square, p.binding, p.count / cols, cols, 1, p.start / cols, alpha, out);
    return;
  }
  // splits 0 (empty rows) still runs stage 2, which writes alpha * 0 (NaN for a mean, as in torch)
  const tmp = scratch(ctx, rows * splits, 'reduce-partials');
  if (splits)
    for (const p of parts) partial(ctx, square, p.binding, p.count / cols, cols, splits, (p.start / cols) * splits, 1, tmp.binding);
  final(ctx, tmp.binding, rows, splits, alpha, false, out);
  tmp.release();
}
