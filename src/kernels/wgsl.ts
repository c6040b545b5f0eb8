/** WGSL snippets shared by kernel builders. */
import type { DType } from '../formats/dtype';

/** Flat invocation index for grids folded into y by GpuContext.grid(). */
export const flatIndex = (wg: number) =>
  `(gid.x + gid.y * nwg.x * ${wg}u)`;

export const mainSignature = (wg: number | string) =>
  `@compute @workgroup_size(${wg})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>)`;

/** Workgroup index when the workgroup grid may have been folded into y. */
export const flatWorkgroup = `(wid.x + wid.y * nwg.x)`;

/**
 * Declares `name` as read-only storage of `dtype` and a function `load_<name>(i: u32) -> f32`.
 * f16/bf16 are read as packed u32 pairs (no shader-f16 needed); with `nativeF16` f16 uses array<f16>.
 */
export function loadFn(name: string, binding: number, dtype: DType, nativeF16 = false): string {
  switch (dtype) {
    case 'f32':
      return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<f32>;
fn load_${name}(i: u32) -> f32 { return ${name}[i]; }`;
    case 'i32':
      return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<i32>;
fn load_${name}(i: u32) -> f32 { return f32(${name}[i]); }`;
    case 'f16':
      if (nativeF16) {
        return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<f16>;
fn load_${name}(i: u32) -> f32 { return f32(${name}[i]); }`;
      }
      return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<u32>;
fn load_${name}(i: u32) -> f32 { return unpack2x16float(${name}[i >> 1u])[i & 1u]; }`;
    case 'bf16':
      return `@group(0) @binding(${binding}) var<storage, read> ${name}: array<u32>;
fn load_${name}(i: u32) -> f32 { return bitcast<f32>(((${name}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu) << 16u); }`;
    default:
      throw new Error(`loadFn: ${dtype} is block-quantized; use the quantized loaders in kernels/matmul`);
  }
}

/** `enable f16;` when a kernel variant uses native f16. */
export const enableF16 = (on: boolean) => (on ? 'enable f16;\n' : '');
