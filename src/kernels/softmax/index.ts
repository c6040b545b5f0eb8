/**
 * softmax / log-softmax over the last dim (any rank: leading dims are rows), forward and backward.
 * f32 activations. Rows are independent, so tensors split across bindings along dim 0 (vocab-wide
 * logits of a long sequence) are processed one chunk at a time.
 */
import { Uniforms } from '../../gpu/context';
import type { GpuContext } from '../../gpu/context';
import { ShapeMismatch } from '../../errors';
import { type FloatArray, type GpuRef, type KernelDef, type Meta, expectDType, expectSameShape, rowsCols } from '../kernel';
import { softmaxBackward, softmaxForward } from './cpu';
import { softmaxBackwardWgsl, softmaxWgsl } from './wgsl';

export { softmaxBackward, softmaxForward } from './cpu';

const WG = 256;

export interface SoftmaxAttrs {
  /** log-softmax instead of softmax */
  log: boolean;
}

function checkInput(op: string, x: Meta) {
  expectDType(op, 'x', x, 'f32');
  if (x.shape.length < 1) throw new ShapeMismatch(`${op}: x is a scalar; expected at least one dimension (softmax runs over the last)`);
}

/**
 * Walks operands of one shape chunk by chunk (they were split identically along dim 0) and calls
 * `fn` once per chunk with its bindings and row count.
 */
function perChunk(refs: GpuRef[], what: string, fn: (bindings: GPUBufferBinding[], rows: number) => void) {
  const shape = refs[0].meta.shape;
  const [rows] = rowsCols(shape);
  const n = refs[0].chunks.length;
  if (refs.some((r) => r.chunks.length !== n || r.chunks.some((c, i) => c.rows !== refs[0].chunks[i].rows))) {
    throw new ShapeMismatch(`${what}: operands of shape [${shape}] are split into different chunks; allocate them on the same device`);
  }
  const rowsPerDim0 = n > 1 ? rows / shape[0] : 0;
  for (let i = 0; i < n; i++) {
    const chunkRows = n === 1 ? rows : refs[0].chunks[i].rows * rowsPerDim0;
    if (chunkRows > 0) fn(refs.map((r) => ({ buffer: r.chunks[i].buffer, offset: r.chunks[i].offset, size: r.chunks[i].size })), chunkRows);
  }
}

function dispatchRows(ctx: GpuContext, key: string, wgsl: () => string, refs: GpuRef[], cols: number) {
  perChunk(refs, key, (bindings, rows) =>
    ctx.dispatch({ key, wgsl, uniforms: new Uniforms().u32(rows).u32(cols), bindings, workgroups: ctx.grid(rows) }),
  );
}

/** [..., cols] -> softmax (or log-softmax) over cols. */
export const softmaxKernel: KernelDef<SoftmaxAttrs> = {
  name: 'softmax',
  outputs([x]) {
    checkInput('softmax', x);
    return [{ shape: x.shape, dtype: 'f32' }];
  },
  cpu([x], [y], { log }, { inputs }) {
    const [rows, cols] = rowsCols(inputs[0].shape);
    softmaxForward(x as FloatArray, rows, cols, log, y as FloatArray);
  },
  webgpu(ctx, [x], [y], { log }) {
    const [, cols] = rowsCols(x.meta.shape);
    dispatchRows(ctx, `softmax_f32_${log ? 'log' : 'fwd'}_wg${WG}`, () => softmaxWgsl(log, WG), [x, y], cols);
  },
  cuda(ctx, [x], [y], { log }) {
    const [rows, cols] = rowsCols(x.meta.shape);
    if (rows * cols > 0) ctx.launch('softmax', [x.ptr, y.ptr], [rows, cols, log ? 1 : 0]);
  },
};

/** (y, dy) -> dx, where y is the forward output (softmax or log-softmax). */
export const softmaxBackwardKernel: KernelDef<SoftmaxAttrs> = {
  name: 'softmax_backward',
  outputs([y, dy]) {
    checkInput('softmax_backward', y);
    expectDType('softmax_backward', 'dy', dy, 'f32');
    expectSameShape('softmax_backward', y, dy, 'y', 'dy');
    return [{ shape: y.shape, dtype: 'f32' }];
  },
  cpu([y, dy], [dx], { log }, { inputs }) {
    const [rows, cols] = rowsCols(inputs[0].shape);
    softmaxBackward(y as FloatArray, dy as FloatArray, rows, cols, log, dx as FloatArray);
  },
  webgpu(ctx, [y, dy], [dx], { log }) {
    const [, cols] = rowsCols(y.meta.shape);
    dispatchRows(ctx, `softmax_f32_${log ? 'logbwd' : 'bwd'}_wg${WG}`, () => softmaxBackwardWgsl(log, WG), [y, dy, dx], cols);
  },
  cuda(ctx, [y, dy], [dx], { log }) {
    const [rows, cols] = rowsCols(y.meta.shape);
    if (rows * cols > 0) ctx.launch('softmax_backward', [y.ptr, dy.ptr, dx.ptr], [rows, cols, log ? 1 : 0]);
  },
};
