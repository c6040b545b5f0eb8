/**
 * topk: x [..., V] (f32) -> values [..., k] (f32) and indices [..., k] (i32), the k largest of each
 * row in descending order; equal values go by the lower index and NaN sorts after every number
 * (cpu.ts states the order). 1 ≤ k ≤ min(V, 32). Not differentiable. The logit lens reads only
 * these [m, k] pairs back instead of the [m, V] probabilities.
 * On the GPU one workgroup takes one row; tensors split across bindings along dim 0 are walked
 * (a row never straddles chunks there: a split tensor has rank ≥ 2, and rows lie inside one dim-0 slice).
 */
import { BindingLimitExceeded, InvalidArgument, ShapeMismatch } from '../../errors';
import { type GpuContext, Uniforms } from '../../gpu/context';
import { type FloatArray, type GpuRef, type KernelDef, type Meta, expectDType, rowsCols } from '../kernel';
import { bind, chunkStarts, locate, segments } from '../segments';
import { topkForward } from './cpu';
import { TOPK_MAX, topkWgsl } from './wgsl';

export { comesBefore, topkForward, topkRow } from './cpu';
export { TOPK_MAX, topkWgsl } from './wgsl';

const WG = 256;

export interface TopkAttrs {
  k: number;
}

function topkOutputs([x]: readonly Meta[], { k }: TopkAttrs): Meta[] {
  expectDType('topk', 'x', x, 'f32');
  if (x.shape.length < 1)
    throw new ShapeMismatch('topk: x is a scalar (shape []); top-k runs over the last dim, so reshape it to [1] or more');
  const v = x.shape[x.shape.length - 1];
  if (!Number.isInteger(k) || k < 1 || k > Math.min(v, TOPK_MAX)) {
    throw new InvalidArgument(
      `topk: k ${k} must be an integer in [1, ${Math.min(v, TOPK_MAX)}] (at most the row length ${v} and at most ${TOPK_MAX}); ask for fewer`,
    );
  }
  const shape = [...x.shape.slice(0, -1), k];
  return [{ shape, dtype: 'f32' }, { shape, dtype: 'i32' }];
}

/** Number of dim-0 slices (a 1-D tensor is one row, one slice). */
const slicesOf = (m: Meta) => (m.shape.length > 1 ? m.shape[0] : 1);

/** First dim-0 index of every chunk, plus the end; an unsplit tensor is one chunk. */
function dim0Starts(ref: GpuRef): number[] {
  const d0 = slicesOf(ref.meta);
  if (ref.chunks.length === 1) return [0, d0];
  const starts = chunkStarts(ref, 1);
  if (ref.meta.shape.length < 2 || starts[starts.length - 1] !== d0) {
    throw new BindingLimitExceeded(
      `topk: a tensor of shape [${ref.meta.shape}] is split across ${ref.chunks.length} bindings in a way that cuts through a row; ` +
        'top-k needs each row of the last dim inside one binding, so split only along dim 0 of a rank ≥ 2 tensor (or use a device with larger bindings)',
    );
  }
  return starts;
}

/** One dispatch per stretch of dim 0 that lies inside one chunk of x and one of each output. */
function dispatchTopk(ctx: GpuContext, x: GpuRef, values: GpuRef, indices: GpuRef, k: number) {
  const [rows, v] = rowsCols(x.meta.shape);
  if (rows === 0) return;
  const d0 = slicesOf(x.meta);
  const rowsPerD0 = rows / d0;
  const xs = dim0Starts(x);
  const vs = dim0Starts(values);
  const is = dim0Starts(indices);
  for (const [a, b] of segments(d0, [...xs, ...vs, ...is])) {
    if (a === b) continue;
    const xl = locate(x, xs, a);
    const vl = locate(values, vs, a);
    const il = locate(indices, is, a);
    if (vl.local !== il.local)
      throw new ShapeMismatch('topk: the values and indices outputs were split into different chunks; allocate them on one device');
    const inOff = xl.local * rowsPerD0 * v;
    const outOff = vl.local * rowsPerD0 * k;
    const n = (b - a) * rowsPerD0;
    if (inOff + n * v > 0xffffffff)
      throw new BindingLimitExceeded(
        'topk: a binding of more than 2³² elements cannot be indexed by this kernel; split the tensor along dim 0',
      );
    ctx.dispatch({
      key: `topk_f32_wg${WG}`,
      wgsl: () => topkWgsl(WG),
      uniforms: new Uniforms().u32(n).u32(v).u32(k).u32(inOff).u32(outOff),
      bindings: [bind(xl.chunk), bind(vl.chunk), bind(il.chunk)],
      workgroups: ctx.grid(n),
    });
  }
}

export const topkKernel: KernelDef<TopkAttrs> = {
  name: 'topk',
  outputs: topkOutputs,
  cpu([x], [values, indices], { k }, { inputs }) {
    const [rows, cols] = rowsCols(inputs[0].shape);
    topkForward(x as FloatArray, rows, cols, k, values as FloatArray, indices as Int32Array);
  },
  webgpu(ctx, [x], [values, indices], { k }) {
    dispatchTopk(ctx, x, values, indices, k);
  },
  cuda(ctx, [x], [values, indices], { k }) {
    const [rows, v] = rowsCols(x.meta.shape);
    ctx.launch('topk', [x.ptr, values.ptr, indices.ptr], [rows, v, k]);
  },
};
