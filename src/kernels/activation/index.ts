/**
 * Elementwise activations on f32 tensors of any shape: SiLU, exact (erf) GELU, tanh GELU, and
 * SwiGLU(gate, up) = silu(gate)·up. Backward kernels take the forward input and the output gradient.
 */
import { Uniforms } from '../../gpu/context';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectSameShape, numelOf } from '../kernel';
import { type Activation, activationBackward, activationForward, gluBackward, gluForward } from './cpu';
import { activationBackwardWgsl, activationWgsl, gluBackwardWgsl, gluWgsl } from './wgsl';

export { type Activation, erf, erfc } from './cpu';
const WG = 256;

/** The activation codes of native/cuda/src/kernels/activation.cu. */
export const ACTIVATION_CODE: Readonly<Record<Activation, number>> = {
  silu: 0,
  gelu: 1,
  gelu_tanh: 2,
  tanh: 3,
  sigmoid: 4,
  softplus: 5,
  exp: 6,
};

function elementwise(
  ctx: Parameters<KernelDef<unknown>['webgpu']>[0],
  key: string,
  wgsl: () => string,
  n: number,
  refs: Parameters<typeof binding>[0][],
  what: string,
) {
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

function checkGlu(name: string, gate: Meta, up: Meta) {
  expectDType(name, 'gate', gate, 'f32');
  expectDType(name, 'up', up, 'f32');
  expectSameShape(name, gate, up, 'gate', 'up');
}

/** act(gate)·up, the gated MLP activation: SwiGLU (act silu: Llama, Qwen, Mistral) or GeGLU (act gelu_tanh: Gemma). */
export const gluKernel: KernelDef<{ act: Activation }> = {
  name: 'glu',
  outputs([gate, up]) {
    checkGlu('glu', gate, up);
    return [{ shape: gate.shape, dtype: 'f32' }];
  },
  cpu([gate, up], [out], { act }, { wasm }) {
    if (wasm?.glu(act, gate as FloatArray, up as FloatArray, out as FloatArray)) return;
    gluForward(act, gate as FloatArray, up as FloatArray, out as FloatArray);
  },
  webgpu(ctx, [gate, up], [out], { act }) {
    elementwise(ctx, `glu_${act}_f32_wg${WG}`, () => gluWgsl(act, WG), numelOf(gate.meta.shape), [gate, up, out], 'glu');
  },
  cuda(ctx, [gate, up], [out], { act }) {
    const n = numelOf(gate.meta.shape);
    if (n > 0) ctx.launch('glu', [gate.ptr, up.ptr, out.ptr], [n, ACTIVATION_CODE[act]]);
  },
};

/** Inputs gate, up, g; outputs dgate (if `dgate`) then dup (if `dup`). */
export const gluBackwardKernel: KernelDef<{ act: Activation; dgate: boolean; dup: boolean }> = {
  name: 'glu_backward',
  outputs([gate, up, g], { dgate, dup }) {
    const name = 'glu_backward';
    checkGlu(name, gate, up);
    expectDType(name, 'g', g, 'f32');
    expectSameShape(name, gate, g, 'gate', 'g');
    const m: Meta = { shape: gate.shape, dtype: 'f32' };
    return [...(dgate ? [m] : []), ...(dup ? [m] : [])];
  },
  cpu([gate, up, g], outs, { act, dgate, dup }) {
    const dg = dgate ? (outs[0] as FloatArray) : null;
    const du = dup ? (outs[dgate ? 1 : 0] as FloatArray) : null;
    gluBackward(act, gate as FloatArray, up as FloatArray, g as FloatArray, dg, du);
  },
  webgpu(ctx, [gate, up, g], outs, { act, dgate, dup }) {
    if (!dgate && !dup) return;
    const v = dgate && dup ? 'both' : dgate ? 'gate' : 'up';
    const ins = dgate ? [gate, up, g] : [gate, g];
    elementwise(
      ctx,
      `glu_bwd_${act}_f32_${v}_wg${WG}`,
      () => gluBackwardWgsl(act, WG, dgate, dup),
      numelOf(gate.meta.shape),
      [...ins, ...outs],
      'glu_backward',
    );
  },
  cuda(ctx, [gate, up, g], outs, { act, dgate, dup }) {
    const n = numelOf(gate.meta.shape);
    if (n === 0 || (!dgate && !dup)) return;
    const dg = dgate ? outs[0].ptr : 0n;
    const du = dup ? outs[dgate ? 1 : 0].ptr : 0n;
    ctx.launch('glu_backward', [gate.ptr, up.ptr, g.ptr, dg, du], [n, ACTIVATION_CODE[act]]);
  },
};
