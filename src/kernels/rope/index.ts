/**
 * Rotary position embedding, half-split layout (GPT-NeoX / Hugging Face Llama, Qwen): x [T, H, D] f32,
 * positions [T] i32 (any values: past length + t during decode), inverse frequencies [R/2] f32 from
 * ropeInvFreq (R ≤ D rotated dims; the rest pass through). The backward is the same kernel with
 * `inverse` (rotation by −θ).
 */
import { DTypeMismatch, ShapeMismatch } from '../../errors';
import { Uniforms } from '../../gpu/context';
import { type FloatArray, type KernelDef, binding, expectDType } from '../kernel';
import { ropeForward } from './cpu';
import { ropeWgsl } from './wgsl';

export { ropeInvFreq, type RopeConfig, type RopeScaling } from './freq';

export interface RopeAttrs {
  /** Rotate by −θ (the backward). */
  inverse: boolean;
  /** Multiplies cos and sin (HF's attention_scaling; 1 for default and llama3 RoPE). */
  scale: number;
}

const WG = 256;

export const ropeKernel: KernelDef<RopeAttrs> = {
  name: 'rope',
  outputs([x, pos, freq]) {
    expectDType('rope', 'x', x, 'f32');
    if (x.shape.length !== 3) throw new ShapeMismatch(`rope: x has shape [${x.shape}], expected [tokens, heads, head_dim]`);
    const [T, , D] = x.shape;
    if (pos.dtype !== 'i32') throw new DTypeMismatch(`rope: positions have dtype ${pos.dtype}, expected i32 (one position per token)`);
    if (pos.shape.length !== 1 || pos.shape[0] !== T)
      throw new ShapeMismatch(`rope: positions have shape [${pos.shape}], expected [${T}] (one per token of x)`);
    expectDType('rope', 'inverse frequencies', freq, 'f32');
    if (freq.shape.length !== 1 || freq.shape[0] < 1 || 2 * freq.shape[0] > D) {
      throw new ShapeMismatch(
        `rope: inverse frequencies have shape [${freq.shape}], expected [R/2] with 2 ≤ R ≤ head_dim = ${D} (see ropeInvFreq)`,
      );
    }
    return [{ shape: x.shape, dtype: 'f32' }];
  },
  cpu([x, pos, freq], [out], { inverse, scale }, { inputs }) {
    const [, H, D] = inputs[0].shape;
    ropeForward(x as FloatArray, pos as Int32Array, freq as FloatArray, H, D, inverse ? -1 : 1, scale, out as FloatArray);
  },
  webgpu(ctx, [x, pos, freq], [out], { inverse, scale }) {
    const [T, H, D] = x.meta.shape;
    const half = freq.meta.shape[0];
    const w = D - half;
    const n = T * H * w;
    ctx.dispatch({
      key: `rope_f32_neox_wg${WG}`,
      wgsl: () => ropeWgsl(WG),
      uniforms: new Uniforms().u32(n).u32(H).u32(D).u32(half).u32(w).f32(inverse ? -1 : 1).f32(scale),
      bindings: [x, pos, freq, out].map((r) => binding(r, 'rope')),
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [x, pos, freq], [out], { inverse, scale }) {
    const [T, H, D] = x.meta.shape;
    ctx.launch('rope', [x.ptr, pos.ptr, freq.ptr, out.ptr], [T, H, D, freq.meta.shape[0]], [inverse ? -1 : 1, scale]);
  },
};
