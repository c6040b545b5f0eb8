/**
 * Elementwise activations on f32 tensors of any shape: SiLU, exact (erf) GELU, tanh GELU, and
 * SwiGLU(gate, up) = silu(gate)·up. Backward kernels take the forward input and the output gradient.
 */
import { Uniforms } from '../../gpu/context';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectSameShape, numelOf } from '../kernel';
import { type Activation, activationBackward, activationForward, swigluBackward, swigluForward } from './cpu';
import { activationBackwardWgsl, activationWgsl, swigluBackwardWgsl, swigluWgsl } from './wgsl';

export { type Activation, erf, erfc } from './cpu';
const WG = 256;

/** The activation codes of native/cuda/src/kernels/activation.cu. */
export const ACTIVATION_CODE: Readonly<Record<Activation, number>> = { silu: 0, gelu: 1, gelu_tanh: 2 };

function elementwise(ctx: Parameters<KernelDef<unknown>['webgpu']>[0], key: string, wgsl: () => string, n: number, refs: Parameters<typeof binding>[0][], what: string) {
  ctx.dispatch({
    key,
    wgsl,
    uniforms: new Uniforms().u32(n),
    bindings: refs.map((r) => binding(r, what)),
    workgroups: ctx.grid(Math.ceil(n / WG)),
  });
}

export const activationKernel: KernelDef<{ op: Activation }> = {
  name: 'activation',
  outputs([x], { op }) {
    expectDType(op, 'x', x, 'f32');
    return [{ shape: x.shape, dtype: 'f32' }];
  },
  cpu([x], [out], { op }) {
    activationForward(op, x as FloatArray, out as FloatArray);
  },
  webgpu(ctx, [x], [out], { op }) {
    elementwise(ctx, `${op}_f32_wg${WG}`, () => activationWgsl(op, WG), numelOf(x.meta.shape), [x, out], op);
  },
  cuda(ctx, [x], [out], { op }) {
    const n = numelOf(x.meta.shape);
    if (n > 0) ctx.launch('activation', [x.ptr, out.ptr], [n, ACTIVATION_CODE[op]]);
  },
};

/** Inputs x (the forward input) and g; output dx = g·f'(x). */
export const activationBackwardKernel: KernelDef<{ op: Activation }> = {
  name: 'activation_backward',
  outputs([x, g], { op }) {
    expectDType(`${op}_backward`, 'x', x, 'f32');
    expectDType(`${op}_backward`, 'g', g, 'f32');
    expectSameShape(`${op}_backward`, x, g, 'x', 'g');
    return [{ shape: x.shape, dtype: 'f32' }];
  },
  cpu([x, g], [dx], { op }) {
    activationBackward(op, x as FloatArray, g as FloatArray, dx as FloatArray);
  },
  webgpu(ctx, [x, g], [dx], { op }) {
    elementwise(ctx, `${op}_bwd_f32_wg${WG}`, () => activationBackwardWgsl(op, WG), numelOf(x.meta.shape), [x, g, dx], `${op}_backward`);
  },
  cuda(ctx, [x, g], [dx], { op }) {
    const n = numelOf(x.meta.shape);
    if (n > 0) ctx.launch('activation_backward', [x.ptr, g.ptr, dx.ptr], [n, ACTIVATION_CODE[op]]);
  },
};

function checkSwiglu(name: string, gate: Meta, up: Meta) {
  expectDType(name, 'gate', gate, 'f32');
  expectDType(name, 'up', up, 'f32');
  expectSameShape(name, gate, up, 'gate', 'up');
}

export const swigluKernel: KernelDef<void> = {
  name: 'swiglu',
  outputs([gate, up]) {
    checkSwiglu('swiglu', gate, up);
    return [{ shape: gate.shape, dtype: 'f32' }];
  },
  cpu([gate, up], [out]) {
    swigluForward(gate as FloatArray, up as FloatArray, out as FloatArray);
  },
  webgpu(ctx, [gate, up], [out]) {
    elementwise(ctx, `swiglu_f32_wg${WG}`, () => swigluWgsl(WG), numelOf(gate.meta.shape), [gate, up, out], 'swiglu');
  },
  cuda(ctx, [gate, up], [out]) {
    const n = numelOf(gate.meta.shape);
    if (n > 0) ctx.launch('swiglu', [gate.ptr, up.ptr, out.ptr], [n]);
  },
};

/** Inputs gate, up, g; outputs dgate (if `dgate`) then dup (if `dup`). */
export const swigluBackwardKernel: KernelDef<{ dgate: boolean; dup: boolean }> = {
  name: 'swiglu_backward',
  outputs([gate, up, g], { dgate, dup }) {
    const name = 'swiglu_backward';
    checkSwiglu(name, gate, up);
    expectDType(name, 'g', g, 'f32');
    expectSameShape(name, gate, g, 'gate', 'g');
    const m: Meta = { shape: gate.shape, dtype: 'f32' };
    return [...(dgate ? [m] : []), ...(dup ? [m] : [])];
  },
  cpu([gate, up, g], outs, { dgate, dup }) {
    const dg = dgate ? (outs[0] as FloatArray) : null;
    const du = dup ? (outs[dgate ? 1 : 0] as FloatArray) : null;
    swigluBackward(gate as FloatArray, up as FloatArray, g as FloatArray, dg, du);
  },
  webgpu(ctx, [gate, up, g], outs, { dgate, dup }) {
    if (!dgate && !dup) return;
    const v = dgate && dup ? 'both' : dgate ? 'gate' : 'up';
    const ins = dgate ? [gate, up, g] : [gate, g];
    elementwise(ctx, `swiglu_bwd_f32_${v}_wg${WG}`, () => swigluBackwardWgsl(WG, dgate, dup), numelOf(gate.meta.shape), [...ins, ...outs], 'swiglu_backward');
  },
  cuda(ctx, [gate, up, g], outs, { dgate, dup }) {
    const n = numelOf(gate.meta.shape);
    if (n === 0 || (!dgate && !dup)) return;
    const dg = dgate ? outs[0].ptr : 0n;
    const du = dup ? outs[dgate ? 1 : 0].ptr : 0n;
    ctx.launch('swiglu_backward', [gate.ptr, up.ptr, g.ptr, dg, du], [n]);
  },
};
