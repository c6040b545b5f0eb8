/**
 * Reductions over all elements (-> [1]) or the last dim (-> the leading shape; [1] for a vector):
 * sum, mean and sum of squares, their backward, and global gradient-norm clipping (in place).
 * f32 only. Deterministic two-stage GPU reductions (see wgsl.ts) that walk split tensors.
 */
import { Uniforms } from '../../gpu/context';
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectSameShape, numelOf } from '../kernel';
import { clipGradNormCpu, reduceRowsBackward, reduceRowsForward } from './cpu';
import { WG, encodeReduceAll, encodeReduceLast, spans, splitsFor } from './plan';
import { clipScaleWgsl, reduceBackwardWgsl } from './wgsl';

export type ReduceOp = 'sum' | 'mean' | 'sumsq';
export type ReduceAxis = 'all' | 'last';
export interface ReduceAttrs {
  op: ReduceOp;
  axis: ReduceAxis;
}

/** Output shape of a reduction: [1] for all elements, the leading dims for the last dim. */
export function reducedShape(shape: readonly number[], axis: ReduceAxis): number[] {
  return axis === 'all' || shape.length < 2 ? [1] : shape.slice(0, -1);
}

/** Elements that fold into one output value. */
function group(shape: readonly number[], axis: ReduceAxis): number {
  return axis === 'all' ? numelOf(shape) : shape[shape.length - 1];
}

function check(name: string, x: Meta, axis: ReduceAxis) {
  expectDType(name, 'x', x, 'f32');
  if (axis === 'last' && x.shape.length === 0) {
    throw new ShapeMismatch(`${name}: x is a rank-0 tensor and has no last dim; reshape it to [1] or reduce over all elements`);
  }
}

/** mean folds 1/n into the final write (1/0 = Infinity gives NaN for an empty mean, as torch does). */
const alphaOf = (op: ReduceOp, n: number) => (op === 'mean' ? 1 / n : 1);

export const reduceKernel: KernelDef<ReduceAttrs> = {
  name: 'reduce',
  outputs([x], { axis }) {
    check('reduce', x, axis);
    return [{ shape: reducedShape(x.shape, axis), dtype: 'f32' }];
  },
  cpu([x], [out], { op, axis }, { inputs: [m] }) {
    const cols = group(m.shape, axis);
    reduceRowsForward(x as FloatArray, cols, op === 'sumsq', alphaOf(op, cols), out as FloatArray);
  },
  webgpu(ctx, [x], [out], { op, axis }) {
    const cols = group(x.meta.shape, axis);
    const opts = { square: op === 'sumsq', alpha: alphaOf(op, cols) };
    const o = binding(out, 'reduce');
    if (axis === 'all') encodeReduceAll(ctx, spans(x), opts, o);
    else encodeReduceLast(ctx, spans(x), numelOf(out.meta.shape), cols, opts, o);
  },
  cuda(ctx, [x], [out], { op, axis }) {
    const cols = group(x.meta.shape, axis);
    const rows = numelOf(out.meta.shape);
    if (rows === 0) return;
    // the same segments as the WebGPU plan; an empty row still writes alpha * 0 (NaN for a mean)
    const splits = splitsFor(cols);
    const partials = splits > 1 ? ctx.temp(4 * rows * splits) : 0n;
    ctx.launch('reduce', [x.ptr, out.ptr, partials], [rows, cols, splits, op === 'sumsq' ? 1 : 0], [alphaOf(op, cols)]);
  },
};

export interface ReduceBackwardAttrs extends ReduceAttrs {
  /** Shape of the reduced input x (the gradient's shape). */
  shape: readonly number[];
}

/** dx from the output gradient g: inputs [g] for sum/mean, [g, x] for sumsq. */
export const reduceBackwardKernel: KernelDef<ReduceBackwardAttrs> = {
  name: 'reduce_backward',
  outputs(inputs, { op, axis, shape }) {
    const [g, x] = inputs;
    expectDType('reduce_backward', 'g', g, 'f32');
    const want = reducedShape(shape, axis);
    expectSameShape('reduce_backward', g, { shape: want, dtype: 'f32' }, 'g', 'the reduced output');
    if (op === 'sumsq') {
      if (!x) throw new InvalidArgument('reduce_backward: sumsq needs x as the second input');
      expectSameShape('reduce_backward', x, { shape, dtype: 'f32' }, 'x', 'attrs.shape');
    }
    return [{ shape, dtype: 'f32' }];
  },
  cpu([g, x], [dx], { op, axis, shape }) {
    const cols = Math.max(group(shape, axis), 1);
    reduceRowsBackward(g as FloatArray, op === 'sumsq' ? (x as FloatArray) : null, cols, alphaOf(op, group(shape, axis)), dx as FloatArray);
  },
  webgpu(ctx, [g, x], [dx], { op, axis, shape }) {
    const square = op === 'sumsq';
    const cols = Math.max(group(shape, axis), 1);
    const alpha = alphaOf(op, group(shape, axis));
    const gb = binding(g, 'reduce_backward');
    const xs = square ? spans(x) : null;
    spans(dx).forEach((d, k) => {
      if (!d.count) return;
      ctx.dispatch({
        key: `reduce_backward_${square ? 'sumsq' : 'sum'}_f32_wg${WG}`,
        wgsl: () => reduceBackwardWgsl(square, WG),
        uniforms: new Uniforms().u32(d.count).u32(cols).u32(d.start).f32(alpha),
        bindings: xs ? [gb, xs[k].binding, d.binding] : [gb, d.binding],
        workgroups: ctx.grid(Math.ceil(d.count / WG)),
      });
    });
  },
  cuda(ctx, [g, x], [dx], { op, axis, shape }) {
    const n = numelOf(shape);
    if (n === 0) return;
    const square = op === 'sumsq';
    ctx.launch(
      'reduce_backward',
      [g.ptr, square ? x.ptr : 0n, dx.ptr],
      [n, Math.max(group(shape, axis), 1)],
      [alphaOf(op, group(shape, axis))],
    );
  },
};

/**
 * Global gradient-norm clipping in place over every input (torch clip_grad_norm_ semantics, 2-norm):
 * the only output is the total norm before clipping, [1], left on the device.
 */
export const clipGradNormKernel: KernelDef<{ maxNorm: number }> = {
  name: 'clip_grad_norm',
  outputs(grads, { maxNorm }) {
    if (!grads.length) throw new InvalidArgument('clip_grad_norm: no gradients given');
    if (!(maxNorm > 0)) throw new InvalidArgument(`clip_grad_norm: maxNorm must be positive, got ${maxNorm}`);
    grads.forEach((g, i) => expectDType('clip_grad_norm', `gradient ${i}`, g, 'f32'));
    return [{ shape: [1], dtype: 'f32' }];
  },
  cpu(inputs, [out], { maxNorm }) {
    (out as FloatArray)[0] = clipGradNormCpu(inputs as FloatArray[], maxNorm);
  },
  webgpu(ctx, grads, [out], { maxNorm }) {
    const parts = grads.flatMap((g) => spans(g)).filter((p) => p.count > 0);
    const total = binding(out, 'clip_grad_norm');
    if (!parts.length) {
      ctx.clear(total.buffer, total.offset, 4);
      return;
    }
    encodeReduceAll(ctx, parts, { square: true, alpha: 1, root: true }, total);
    for (const p of parts) {
      ctx.dispatch({
        key: `clip_scale_f32_wg${WG}`,
        wgsl: () => clipScaleWgsl(WG),
        uniforms: new Uniforms().u32(p.count).f32(maxNorm),
        bindings: [total, p.binding],
        workgroups: ctx.grid(Math.ceil(p.count / WG)),
      });
    }
  },
  cuda(ctx, grads, [out], { maxNorm }) {
    const sizes = grads.map((g) => numelOf(g.meta.shape));
    const splits = sizes.map(splitsFor);
    const total = splits.reduce((a, b) => a + b, 0);
    const partials = total > 0 ? ctx.temp(4 * total) : 0n;
    ctx.launch('clip_grad_norm', [out.ptr, partials, ...grads.map((g) => g.ptr)], sizes.flatMap((n, i) => [n, splits[i]]), [maxNorm]);
  },
};

export { scratch, spans, encodeReduceAll, encodeReduceLast, splitsFor, type Span } from './plan';
export { treeSum } from './wgsl';
