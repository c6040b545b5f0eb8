/**
 * AdamW over flat f32 buffers, in place (no outputs): inputs [params, grads, m, v, decayMask?], all [N].
 * The decay mask scales weight decay per element (0 for biases and LayerNorm parameters, 1 for
 * matrices, as upstream's two parameter groups). Also the in-place copy, add and fill kernels that
 * flat parameter buffers use to gather gradients and import checkpoints.
 */
import { Uniforms } from '../../gpu/context';
import { InvalidArgument } from '../../errors';
import { type FloatArray, type KernelDef, binding, expectDType, expectSameShape, numelOf } from '../kernel';
import { type AdamWHyper, adamwScalars, adamwUpdate, assignInto } from './cpu';
import { addIntoWgsl, adamwWgsl, fillWgsl } from './wgsl';

export type { AdamWHyper } from './cpu';
const WG = 256;

export const adamwKernel: KernelDef<AdamWHyper> = {
  name: 'adamw',
  outputs(inputs, h) {
    if (inputs.length !== 4 && inputs.length !== 5)
      throw new InvalidArgument(`adamw: expected [params, grads, m, v, decayMask?], got ${inputs.length} tensors`);
    const names = ['params', 'grads', 'm', 'v', 'decayMask'];
    inputs.forEach((t, i) => {
      expectDType('adamw', names[i], t, 'f32');
      expectSameShape('adamw', t, inputs[0], names[i], 'params');
    });
    if (!Number.isInteger(h.t) || h.t < 1)
      throw new InvalidArgument(`adamw: step t must be an integer >= 1 (bias correction 1 - beta^t), got ${h.t}`);
    for (const k of ['lr', 'eps', 'weightDecay'] as const) {
      if (!(h[k] >= 0)) throw new InvalidArgument(`adamw: ${k} must be >= 0, got ${h[k]}`);
    }
    for (const k of ['beta1', 'beta2'] as const) {
      if (!(h[k] >= 0 && h[k] < 1)) throw new InvalidArgument(`adamw: ${k} must be in [0, 1), got ${h[k]}`);
    }
    return [];
  },
  cpu([p, g, m, v, mask], _outs, h) {
    adamwUpdate(p as FloatArray, g as FloatArray, m as FloatArray, v as FloatArray, (mask as FloatArray | undefined) ?? null, h);
  },
  webgpu(ctx, [p, g, m, v, mask], _outs, h) {
    const n = numelOf(p.meta.shape);
    if (!n) return;
    const { lrWd, stepSize, bc2sqrt } = adamwScalars(h);
    const gb = binding(g, 'adamw');
    ctx.dispatch({
      key: `adamw_f32_wg${WG}`,
      wgsl: () => adamwWgsl(WG),
      uniforms: new Uniforms().u32(n).u32(mask ? 1 : 0).f32(lrWd).f32(h.beta1).f32(1 - h.beta1).f32(h.beta2).f32(1 - h.beta2)
        .f32(stepSize).f32(bc2sqrt).f32(h.eps),
      bindings: [binding(p, 'adamw'), gb, binding(m, 'adamw'), binding(v, 'adamw'), mask ? binding(mask, 'adamw') : gb],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [p, g, m, v, mask], _outs, h) {
    const { lrWd, stepSize, bc2sqrt } = adamwScalars(h);
    ctx.launch(
      'adamw',
      [p.ptr, g.ptr, m.ptr, v.ptr, mask?.ptr ?? 0n],
      [numelOf(p.meta.shape), mask ? 1 : 0],
      [lrWd, h.beta1, 1 - h.beta1, h.beta2, 1 - h.beta2, stepSize, bc2sqrt, h.eps],
    );
  },
};

/** In place: inputs [dst, src] of one shape; dst <- src, or dst += src with `add`. */
export const assignKernel: KernelDef<{ add: boolean }> = {
  name: 'assign',
  outputs([dst, src]) {
    expectDType('assign', 'dst', dst, 'f32');
    expectDType('assign', 'src', src, 'f32');
    expectSameShape('assign', dst, src, 'dst', 'src');
    return [];
  },
  cpu([dst, src], _outs, { add }) {
    assignInto(dst as FloatArray, src as FloatArray, add);
  },
  webgpu(ctx, [dst, src], _outs, { add }) {
    const n = numelOf(dst.meta.shape);
    if (!n) return;
    const d = binding(dst, 'assign');
    const s = binding(src, 'assign');
    if (!add) {
      ctx.copy(s.buffer, s.offset!, d.buffer, d.offset!, n * 4);
      return;
    }
    ctx.dispatch({
      key: `add_into_f32_wg${WG}`,
      wgsl: () => addIntoWgsl(WG),
      uniforms: new Uniforms().u32(n),
      bindings: [d, s],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [dst, src], _outs, { add }) {
    ctx.launch('assign', [dst.ptr, src.ptr], [numelOf(dst.meta.shape), add ? 1 : 0]);
  },
};

/** In place: every element of the input becomes `value`. */
export const fillKernel: KernelDef<{ value: number }> = {
  name: 'fill',
  outputs([dst]) {
    expectDType('fill', 'dst', dst, 'f32');
    return [];
  },
  cpu([dst], _outs, { value }) {
    (dst as FloatArray).fill(value);
  },
  webgpu(ctx, [dst], _outs, { value }) {
    const n = numelOf(dst.meta.shape);
    if (!n) return;
    const d = binding(dst, 'fill');
    if (value === 0 && !Object.is(value, -0)) {
      ctx.clear(d.buffer, d.offset, n * 4);
      return;
    }
    ctx.dispatch({
      key: `fill_f32_wg${WG}`,
      wgsl: () => fillWgsl(WG),
      uniforms: new Uniforms().u32(n).f32(value),
      bindings: [d],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [dst], _outs, { value }) {
    ctx.launch('fill', [dst.ptr], [numelOf(dst.meta.shape)], [value]);
  },
};
