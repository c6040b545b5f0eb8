/**
 * Elementwise binary ops (add, sub, mul) where b has a's shape or a trailing slice of it (bias rows),
 * alpha*a + beta, and column sums (the backward of a broadcast operand). f32 activations only.
 */
import { Uniforms } from '../../gpu/context';
import { ShapeMismatch } from '../../errors';
import { type FloatArray, type KernelDef, binding, expectDType, numelOf } from '../kernel';
import { type BinaryOp, binaryForward, scaleForward, sumRowsForward } from './cpu';
import { binaryWgsl, scaleWgsl, sumRowsWgsl } from './wgsl';

export type { BinaryOp } from './cpu';
const WG = 256;

/** Rows each stage-1 segment of a CUDA column sum covers at least; below it the sum is one pass in row order. */
const SUM_ROWS_SEG = 256;

/**
 * Row segments of the CUDA column sum (native/cuda/src/kernels/elementwise.cu): 1 (the CPU's own order)
 * for short columns, else enough to give the device about 128k threads; a function of sizes only.
 */
export function sumRowsSegments(rows: number, cols: number): number {
  if (rows <= SUM_ROWS_SEG) return 1;
  return Math.min(Math.ceil(rows / SUM_ROWS_SEG), Math.max(1, Math.ceil(131072 / cols)), 65535);
}

export function binaryKernel(op: BinaryOp): KernelDef<void> {
  const name = `binary_${op}`;
  return {
    name,
    outputs([a, b]) {
      expectDType(name, 'a', a, 'f32');
      expectDType(name, 'b', b, 'f32');
      const tail = a.shape.slice(a.shape.length - b.shape.length);
      if (b.shape.length > a.shape.length || tail.some((s, i) => s !== b.shape[i])) {
        throw new ShapeMismatch(`${name}: b has shape [${b.shape}], which is neither a's shape [${a.shape}] nor a trailing part of it`);
      }
      return [{ shape: a.shape, dtype: 'f32' }];
    },
    cpu([a, b], [out]) {
      binaryForward(op, a as FloatArray, b as FloatArray, out as FloatArray);
    },
    webgpu(ctx, [a, b], [out]) {
      const n = numelOf(a.meta.shape);
      ctx.dispatch({
        key: `${name}_f32_wg${WG}`,
        wgsl: () => binaryWgsl(op, WG),
        uniforms: new Uniforms().u32(n).u32(Math.max(numelOf(b.meta.shape), 1)),
        bindings: [binding(a, name), binding(b, name), binding(out, name)],
        workgroups: ctx.grid(Math.ceil(n / WG)),
      });
    },
    cuda(ctx, [a, b], [out]) {
      const n = numelOf(a.meta.shape);
      if (n === 0) return;
      ctx.launch(name, [a.ptr, b.ptr, out.ptr], [n, Math.max(numelOf(b.meta.shape), 1)]);
    },
  };
}

export const addKernel = binaryKernel('add');
export const subKernel = binaryKernel('sub');
export const mulKernel = binaryKernel('mul');

export const scaleKernel: KernelDef<{ alpha: number; beta?: number }> = {
  name: 'scale',
  outputs([a]) {
    expectDType('scale', 'a', a, 'f32');
    return [{ shape: a.shape, dtype: 'f32' }];
  },
  cpu([a], [out], { alpha, beta = 0 }) {
    scaleForward(a as FloatArray, alpha, beta, out as FloatArray);
  },
  webgpu(ctx, [a], [out], { alpha, beta = 0 }) {
    const n = numelOf(a.meta.shape);
    ctx.dispatch({
      key: `scale_f32_wg${WG}`,
      wgsl: () => scaleWgsl(WG),
      uniforms: new Uniforms().u32(n).f32(alpha).f32(beta),
      bindings: [binding(a, 'scale'), binding(out, 'scale')],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [a], [out], { alpha, beta = 0 }) {
    const n = numelOf(a.meta.shape);
    if (n === 0) return;
    ctx.launch('scale', [a.ptr, out.ptr], [n], [alpha, beta]);
  },
};

/** Sums `a` over its leading dims down to `shape` (a trailing slice of a's shape). */
export const sumRowsKernel: KernelDef<{ shape: readonly number[] }> = {
  name: 'sum_rows',
  outputs([a], { shape }) {
    expectDType('sum_rows', 'a', a, 'f32');
    const tail = a.shape.slice(a.shape.length - shape.length);
    if (shape.length > a.shape.length || tail.some((s, i) => s !== shape[i])) {
      throw new ShapeMismatch(`sum_rows: [${shape}] is not a trailing part of [${a.shape}]`);
    }
    return [{ shape, dtype: 'f32' }];
  },
  cpu([a], [out], { shape }) {
    sumRowsForward(a as FloatArray, Math.max(numelOf(shape), 1), out as FloatArray);
  },
  webgpu(ctx, [a], [out], { shape }) {
    const cols = Math.max(numelOf(shape), 1);
    const rows = numelOf(a.meta.shape) / cols;
    ctx.dispatch({
      key: `sum_rows_f32_wg${WG}`,
      wgsl: () => sumRowsWgsl(WG),
      uniforms: new Uniforms().u32(rows).u32(cols),
      bindings: [binding(a, 'sum_rows'), binding(out, 'sum_rows')],
      workgroups: ctx.grid(Math.ceil(cols / WG)),
    });
  },
  cuda(ctx, [a], [out], { shape }) {
    if (numelOf(shape) === 0) return;
    const cols = numelOf(shape);
    const rows = numelOf(a.meta.shape) / cols;
    const segs = sumRowsSegments(rows, cols);
    const partials = segs > 1 ? ctx.temp(4 * segs * cols) : 0n;
    ctx.launch('sum_rows', [a.ptr, out.ptr, partials], [rows, cols, segs]);
  },
};
