/**
 * RMSNorm over the last dimension, y = x / sqrt(mean(x²) + eps) · (offset + w): offset 0 for Llama/Qwen
 * (also Qwen3's per-head q/k norm: rows = tokens × heads, cols = head_dim), 1 for Gemma. x is f32 of any
 * rank; w is [cols] in f32, f16 or bf16 (read packed, no shader-f16 needed).
 * Backward: dx and per-row stats (mean 0, rstd) in one kernel; dw through normParamGradKernel.
 */
import { Uniforms } from '../../gpu/context';
import { ShapeMismatch } from '../../errors';
import type { DType } from '../../formats/dtype';
import { type FloatArray, type KernelDef, type Meta, binding, cudaDType, expectDType, expectSameShape, rowsCols } from '../kernel';
import { floatValues, rmsnormBackward, rmsnormForward } from './cpu';
import { rowCut } from '../row-cut';
import { NORM_ROWS_WG, rmsnormBackwardWgsl, rmsnormRowsWgsl, rmsnormWgsl } from './wgsl';

export { normParamGradKernel, type ParamGradAttrs } from './paramgrad';
export { floatValues } from './cpu';

export interface RmsNormAttrs {
  eps: number;
  /** Added to the weight: 1 for Gemma's y = x̂·(1 + w). */
  offset: number;
}

/** Threads per row: wide rows (hidden sizes) get 256, head-sized rows 64. Powers of two (tree reduction). */
export const normWorkgroup = (cols: number) => (cols >= 1024 ? 256 : 64);

/** Checks x (f32, rank ≥ 1, cols ≥ 1) and a [cols] parameter; returns [rows, cols]. */
export function checkRowParam(op: string, x: Meta, p: Meta | null, what: string, dtypes: DType[]): [number, number] {
  expectDType(op, 'x', x, 'f32');
  if (x.shape.length < 1) throw new ShapeMismatch(`${op}: x is a scalar; it needs a last dimension to normalize over`);
  const [rows, cols] = rowsCols(x.shape);
  if (cols < 1) throw new ShapeMismatch(`${op}: x has shape [${x.shape}]; the normalized (last) dimension must be at least 1`);
  if (p) {
    expectDType(op, what, p, ...dtypes);
    if (p.shape.length !== 1 || p.shape[0] !== cols) {
      throw new ShapeMismatch(`${op}: ${what} has shape [${p.shape}], expected [${cols}] (the last dimension of x [${x.shape}])`);
    }
  }
  return [rows, cols];
}

const W_DTYPES: DType[] = ['f32', 'f16', 'bf16'];

export const rmsnormKernel: KernelDef<RmsNormAttrs> = {
  name: 'rmsnorm',
  outputs([x, w]) {
    checkRowParam('rmsnorm', x, w, 'weight', W_DTYPES);
    return [{ shape: x.shape, dtype: 'f32' }];
  },
  cpu([x, w], [out], { eps, offset }, { inputs, wasm }) {
    const cols = rowsCols(inputs[0].shape)[1];
    const wf = floatValues(w, inputs[1].dtype);
    if (wasm?.rmsnorm(x as FloatArray, wf, cols, eps, offset, out as FloatArray)) return;
    rmsnormForward(x as FloatArray, wf, cols, eps, offset, out as FloatArray);
  },
  webgpu(ctx, [x, w], [out], { eps, offset }) {
    const [rows, cols] = rowsCols(x.meta.shape);
    const wd = w.meta.dtype;
    const common = {
      uniforms: new Uniforms().u32(rows).u32(cols).f32(eps).f32(offset),
      bindings: [binding(x, 'rmsnorm'), binding(w, 'rmsnorm'), binding(out, 'rmsnorm')],
    };
    if (rowCut(ctx) === 'rows') {
      ctx.dispatch({
        key: `rmsnorm_f32_w${wd}_rows_wg${NORM_ROWS_WG}`,
        wgsl: () => rmsnormRowsWgsl(wd),
        ...common,
        workgroups: ctx.grid(Math.ceil(rows / NORM_ROWS_WG)),
      });
      return;
    }
    const wg = normWorkgroup(cols);
    ctx.dispatch({ key: `rmsnorm_f32_w${wd}_wg${wg}`, wgsl: () => rmsnormWgsl(wd, wg), ...common, workgroups: ctx.grid(rows) });
  },
  cuda(ctx, [x, w], [out], { eps, offset }) {
    const [rows, cols] = rowsCols(x.meta.shape);
    ctx.launch('rmsnorm', [x.ptr, w.ptr, out.ptr], [rows, cols, cudaDType(w.meta.dtype)], [eps, offset]);
  },
};

export interface RmsNormBackwardAttrs extends RmsNormAttrs {
  /** Compute dx (inputs x, w, g; outputs dx, stats). False: statistics only (input x; output stats). */
  dx: boolean;
}

export const rmsnormBackwardKernel: KernelDef<RmsNormBackwardAttrs> = {
  name: 'rmsnorm_backward',
  outputs(inputs, { dx }) {
    const name = 'rmsnorm_backward';
    const [x, w, g] = inputs;
    const [rows] = checkRowParam(name, x, dx ? w : null, 'weight', W_DTYPES);
    const stats: Meta = { shape: [rows, 2], dtype: 'f32' };
    if (!dx) return [stats];
    expectDType(name, 'g', g, 'f32');
    expectSameShape(name, g, x, 'g', 'x');
    return [{ shape: x.shape, dtype: 'f32' }, stats];
  },
  cpu(ins, outs, { eps, offset, dx }, { inputs }) {
    const cols = rowsCols(inputs[0].shape)[1];
    const x = ins[0] as FloatArray;
    if (!dx) return rmsnormBackward(x, null, null, cols, eps, offset, null, outs[0] as FloatArray);
    const w = floatValues(ins[1], inputs[1].dtype);
    rmsnormBackward(x, w, ins[2] as FloatArray, cols, eps, offset, outs[0] as FloatArray, outs[1] as FloatArray);
  },
  webgpu(ctx, ins, outs, { eps, offset, dx }) {
    const name = 'rmsnorm_backward';
    const [rows, cols] = rowsCols(ins[0].meta.shape);
    const wg = normWorkgroup(cols);
    const wd = dx ? ins[1].meta.dtype : 'f32';
    ctx.dispatch({
      key: `rmsnorm_bwd_f32_w${wd}_${dx ? 'dx' : 'stats'}_wg${wg}`,
      wgsl: () => rmsnormBackwardWgsl(wd, wg, dx),
      uniforms: new Uniforms().u32(rows).u32(cols).f32(eps).f32(offset),
      bindings: [...ins, ...outs].map((r) => binding(r, name)),
      workgroups: ctx.grid(rows),
    });
  },
  cuda(ctx, ins, outs, { eps, offset, dx }) {
    const [rows, cols] = rowsCols(ins[0].meta.shape);
    const x = ins[0].ptr;
    const ptrs = dx ? [x, ins[1].ptr, ins[2].ptr, outs[0].ptr, outs[1].ptr] : [x, 0n, 0n, 0n, outs[0].ptr];
    ctx.launch('rmsnorm_backward', ptrs, [rows, cols, cudaDType(dx ? ins[1].meta.dtype : 'f32'), dx ? 1 : 0], [eps, offset]);
  },
};
