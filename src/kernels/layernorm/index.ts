/**
 * LayerNorm over the last dimension, PyTorch nn.LayerNorm semantics (biased variance, eps inside the
 * sqrt), with optional γ and β of shape [cols] in f32, f16 or bf16. x is f32 of any rank.
 * Inputs: x, then γ if `gamma`, then β if `beta`. Backward: dx and per-row (mean, rstd) in one kernel;
 * dγ/dβ through normParamGradKernel (../rmsnorm/paramgrad.ts).
 */
import { Uniforms } from '../../gpu/context';
import { InvalidArgument } from '../../errors';
import type { DType } from '../../formats/dtype';
import { type FloatArray, type KernelDef, type Meta, binding, cudaDType, expectDType, expectSameShape, rowsCols } from '../kernel';
import { checkRowParam, floatValues, normWorkgroup } from '../rmsnorm';
import { layernormBackward, layernormForward } from './cpu';
import { layernormBackwardWgsl, layernormWgsl } from './wgsl';

export interface LayerNormAttrs {
  eps: number;
  gamma: boolean;
  beta: boolean;
}

const P_DTYPES: DType[] = ['f32', 'f16', 'bf16'];

export const layernormKernel: KernelDef<LayerNormAttrs> = {
  name: 'layernorm',
  outputs(inputs, { gamma, beta }) {
    const x = inputs[0];
    const want = 1 + Number(gamma) + Number(beta);
    if (inputs.length !== want)
      throw new InvalidArgument(
        `layernorm: got ${inputs.length} inputs, expected ${want} (x${gamma ? ', gamma' : ''}${beta ? ', beta' : ''})`,
      );
    checkRowParam('layernorm', x, null, '', P_DTYPES);
    if (gamma) checkRowParam('layernorm', x, inputs[1], 'gamma', P_DTYPES);
    if (beta) checkRowParam('layernorm', x, inputs[gamma ? 2 : 1], 'beta', P_DTYPES);
    return [{ shape: x.shape, dtype: 'f32' }];
  },
  cpu(ins, [out], { eps, gamma, beta }, { inputs }) {
    const cols = rowsCols(inputs[0].shape)[1];
    const bi = gamma ? 2 : 1;
    const gm = gamma ? floatValues(ins[1], inputs[1].dtype) : null;
    const bt = beta ? floatValues(ins[bi], inputs[bi].dtype) : null;
    layernormForward(ins[0] as FloatArray, gm, bt, cols, eps, out as FloatArray);
  },
  webgpu(ctx, ins, [out], { eps, gamma, beta }) {
    const [rows, cols] = rowsCols(ins[0].meta.shape);
    const wg = normWorkgroup(cols);
    const gdt = gamma ? ins[1].meta.dtype : null;
    const bdt = beta ? ins[gamma ? 2 : 1].meta.dtype : null;
    ctx.dispatch({
      key: `layernorm_f32_g${gdt ?? 'none'}_b${bdt ?? 'none'}_wg${wg}`,
      wgsl: () => layernormWgsl(gdt, bdt, wg),
      uniforms: new Uniforms().u32(rows).u32(cols).f32(eps),
      bindings: [...ins, out].map((r) => binding(r, 'layernorm')),
      workgroups: ctx.grid(rows),
    });
  },
  cuda(ctx, ins, [out], { eps, gamma, beta }) {
    const [rows, cols] = rowsCols(ins[0].meta.shape);
    const gm = gamma ? ins[1] : null;
    const bt = beta ? ins[gamma ? 2 : 1] : null;
    ctx.launch(
      'layernorm',
      [ins[0].ptr, gm?.ptr ?? 0n, bt?.ptr ?? 0n, out.ptr],
      [rows, cols, gm ? cudaDType(gm.meta.dtype) : -1, bt ? cudaDType(bt.meta.dtype) : -1],
      [eps],
    );
  },
};

export interface LayerNormBackwardAttrs {
  eps: number;
  /** γ is an input (after g) when true. */
  gamma: boolean;
  /** Inputs x, g[, γ]; outputs dx, stats. False: input x only, output stats [rows, 2] (mean, rstd). */
  dx: boolean;
}

export const layernormBackwardKernel: KernelDef<LayerNormBackwardAttrs> = {
  name: 'layernorm_backward',
  outputs(inputs, { gamma, dx }) {
    const name = 'layernorm_backward';
    const [x, g, gm] = inputs;
    const [rows] = checkRowParam(name, x, dx && gamma ? gm : null, 'gamma', P_DTYPES);
    const stats: Meta = { shape: [rows, 2], dtype: 'f32' };
    if (!dx) return [stats];
    expectDType(name, 'g', g, 'f32');
    expectSameShape(name, g, x, 'g', 'x');
    return [{ shape: x.shape, dtype: 'f32' }, stats];
  },
  cpu(ins, outs, { eps, gamma, dx }, { inputs }) {
    const cols = rowsCols(inputs[0].shape)[1];
    const x = ins[0] as FloatArray;
    if (!dx) return layernormBackward(x, null, null, cols, eps, null, outs[0] as FloatArray);
    const gm = gamma ? floatValues(ins[2], inputs[2].dtype) : null;
    layernormBackward(x, ins[1] as FloatArray, gm, cols, eps, outs[0] as FloatArray, outs[1] as FloatArray);
  },
  webgpu(ctx, ins, outs, { eps, gamma, dx }) {
    const [rows, cols] = rowsCols(ins[0].meta.shape);
    const wg = normWorkgroup(cols);
    const gdt = dx && gamma ? ins[2].meta.dtype : null;
    ctx.dispatch({
      key: `layernorm_bwd_f32_g${gdt ?? 'none'}_${dx ? 'dx' : 'stats'}_wg${wg}`,
      wgsl: () => layernormBackwardWgsl(gdt, wg, dx),
      uniforms: new Uniforms().u32(rows).u32(cols).f32(eps),
      bindings: [...ins, ...outs].map((r) => binding(r, 'layernorm_backward')),
      workgroups: ctx.grid(rows),
    });
  },
  cuda(ctx, ins, outs, { eps, gamma, dx }) {
    const [rows, cols] = rowsCols(ins[0].meta.shape);
    const gm = dx && gamma ? ins[2] : null;
    const x = ins[0].ptr;
    const ptrs = dx ? [x, ins[1].ptr, gm?.ptr ?? 0n, outs[0].ptr, outs[1].ptr] : [x, 0n, 0n, 0n, outs[0].ptr];
    ctx.launch('layernorm_backward', ptrs, [rows, cols, gm ? cudaDType(gm.meta.dtype) : -1, dx ? 1 : 0], [eps]);
  },
};
