/**
 * conv1d: the causal depthwise 1-D convolution of Qwen3.5's Gated DeltaNet layers (cpu.ts has the formula),
 * over x [T, C] with weights w [C, K] and, when decoding goes on from a cache, the K − 1 positions before x as
 * `state` [K − 1, C]. The backward reaches x and, for a trainable decoder, w; a cached state is not trained
 * through. f32 throughout.
 */
import { Uniforms } from '../../gpu/context';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectDim, expectRank } from '../kernel';
import { causalConv1dBackward, causalConv1dBackwardW, causalConv1dForward } from './cpu';
import { causalConv1dBackwardWWgsl, causalConv1dBackwardWgsl, causalConv1dWgsl } from './wgsl';

export { causalConv1dBackward, causalConv1dBackwardW, causalConv1dForward } from './cpu';
const WG = 256;

function dims(op: string, x: Meta, w: Meta, state?: Meta): { T: number; C: number; K: number } {
  expectDType(op, 'x', x, 'f32');
  expectDType(op, 'w', w, 'f32');
  expectRank(op, 'x', x, 2);
  expectRank(op, 'w', w, 2);
  const [T, C] = x.shape;
  const [Cw, K] = w.shape;
  expectDim(op, 'w', Cw, C, 'channels');
  if (K < 1) expectDim(op, 'w', K, 1, 'kernel size (at least)');
  if (state) {
    expectDType(op, 'state', state, 'f32');
    expectRank(op, 'state', state, 2);
    expectDim(op, 'state', state.shape[0], K - 1, 'rows (kernel size − 1)');
    expectDim(op, 'state', state.shape[1], C, 'channels');
  }
  return { T, C, K };
}

/** Inputs x [T, C], w [C, K] and optionally state [K − 1, C]; output [T, C]. */
export const causalConv1dKernel: KernelDef<void> = {
  name: 'causal_conv1d',
  outputs([x, w, state]) {
    dims('causal_conv1d', x, w, state);
    return [{ shape: x.shape, dtype: 'f32' }];
  },
  cpu([x, w, state], [out], _a, { inputs }) {
    const { T, C, K } = dims('causal_conv1d', inputs[0], inputs[1], inputs[2]);
    causalConv1dForward(x as FloatArray, w as FloatArray, (state as FloatArray | undefined) ?? null, out as FloatArray, T, C, K);
  },
  webgpu(ctx, ins, [out]) {
    const { T, C, K } = dims('causal_conv1d', ins[0].meta, ins[1].meta, ins[2]?.meta);
    const n = T * C;
    if (!n) return;
    const withState = ins.length === 3;
    ctx.dispatch({
      key: `causal_conv1d_${withState ? 'state' : 'zeros'}_wg${WG}`,
      wgsl: () => causalConv1dWgsl(WG, withState),
      uniforms: new Uniforms().u32(n).u32(T).u32(C).u32(K),
      bindings: [...ins, out].map((r) => binding(r, 'causal_conv1d')),
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [x, w, state], [out]) {
    const { T, C, K } = dims('causal_conv1d', x.meta, w.meta, state?.meta);
    if (T * C > 0) ctx.launch('causal_conv1d', [x.ptr, w.ptr, state ? state.ptr : 0n, out.ptr], [T, C, K]);
  },
};

/** Inputs g [T, C] (the output's gradient) and w [C, K]; output dx [T, C]. */
export const causalConv1dBackwardKernel: KernelDef<void> = {
  name: 'causal_conv1d_backward',
  outputs([g, w]) {
    dims('causal_conv1d_backward', g, w);
    return [{ shape: g.shape, dtype: 'f32' }];
  },
  cpu([g, w], [dx], _a, { inputs }) {
    const { T, C, K } = dims('causal_conv1d_backward', inputs[0], inputs[1]);
    causalConv1dBackward(g as FloatArray, w as FloatArray, dx as FloatArray, T, C, K);
  },
  webgpu(ctx, [g, w], [dx]) {
    const { T, C, K } = dims('causal_conv1d_backward', g.meta, w.meta);
    const n = T * C;
    if (!n) return;
    ctx.dispatch({
      key: `causal_conv1d_bwd_wg${WG}`,
      wgsl: () => causalConv1dBackwardWgsl(WG),
      uniforms: new Uniforms().u32(n).u32(T).u32(C).u32(K),
      bindings: [g, w, dx].map((r) => binding(r, 'causal_conv1d_backward')),
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [g, w], [dx]) {
    const { T, C, K } = dims('causal_conv1d_backward', g.meta, w.meta);
    if (T * C > 0) ctx.launch('causal_conv1d_backward', [g.ptr, w.ptr, dx.ptr], [T, C, K]);
  },
};

/** Inputs g [T, C] (the output's gradient), x [T, C] and optionally state [K − 1, C]; attrs: K; output dw [C, K]. */
export const causalConv1dBackwardWKernel: KernelDef<{ k: number }> = {
  name: 'causal_conv1d_backward_w',
  outputs([g, x, state], { k }) {
    expectDType('causal_conv1d_backward_w', 'g', g, 'f32');
    expectDim('causal_conv1d_backward_w', 'g', g.shape.length, 2, 'rank');
    dims('causal_conv1d_backward_w', x, { shape: [g.shape[1], k], dtype: 'f32' }, state);
    expectDim('causal_conv1d_backward_w', 'g', g.shape[0], x.shape[0], 'positions');
    return [{ shape: [x.shape[1], k], dtype: 'f32' }];
  },
  cpu([g, x, state], [dw], { k }, { inputs }) {
    const [T, C] = inputs[1].shape;
    causalConv1dBackwardW(g as FloatArray, x as FloatArray, (state as FloatArray | undefined) ?? null, dw as FloatArray, T, C, k);
  },
  webgpu(ctx, ins, [dw], { k }) {
    const [T, C] = ins[1].meta.shape;
    const n = C * k;
    if (!n) return;
    const withState = ins.length === 3;
    ctx.dispatch({
      key: `causal_conv1d_bwd_w_${withState ? 'state' : 'zeros'}_wg${WG}`,
      wgsl: () => causalConv1dBackwardWWgsl(WG, withState),
      uniforms: new Uniforms().u32(n).u32(T).u32(C).u32(k),
      bindings: [...ins, dw].map((r) => binding(r, 'causal_conv1d_backward_w')),
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [g, x, state], [dw], { k }) {
    const [T, C] = x.meta.shape;
    if (C * k > 0) ctx.launch('causal_conv1d_backward_w', [g.ptr, x.ptr, state ? state.ptr : 0n, dw.ptr], [T, C, k]);
  },
};
