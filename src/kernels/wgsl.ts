/** WGSL snippets shared by kernel builders. */
import type { DType } from '../formats/dtype';

/** Flat invocation index for grids folded into y by GpuContext.grid(). */
export const flatIndex = (wg: number) =>
  `(gid.x + gid.y * nwg.x * ${wg}u)`;

export const mainSignature = (wg: number | string, extra = '') =>
  `@compute @workgroup_size(${wg})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>${extra ? `, ${extra}` : ''})`;

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

/**
 * Subgroup reductions (GpuContext.subgroupReduce; gpu/subgroups.ts checks the layout they assume: subgroups cut from
 * local_invocation_index in consecutive runs of subgroup_size). The builtins a main signature adds for them.
 */
export const SUBGROUP_BUILTINS = '@builtin(subgroup_invocation_id) sid: u32, @builtin(subgroup_size) sg: u32';

/**
 * `fn <name>(v: vec4<f32>, l: u32, sg: u32, off: u32) -> vec4<f32>`: the sum of v over the aligned block of `lanes`
 * consecutive invocations (a power of two; the whole workgroup at most) that local index l belongs to, every lane of
 * the block getting it.
 * A butterfly of subgroupShuffleXor sums each run of min(sg, lanes) lanes inside its subgroup; when subgroups are
 * narrower than the block, their sums meet in `red[off …]` (vec4<f32> workgroup memory, lanes / sg slots per block)
 * after one barrier, where the workgroup-memory tree takes log2(lanes). Call it in uniform control flow; `red` may be
 * written again after the next barrier.
 */
export function blockSumWgsl(name: string, lanes: number, red: string): string {
  const masks: number[] = [];
  // subgroups hold at most 128 invocations, so masks stop at 64
  for (let m = Math.min(lanes / 2, 64); m >= 1; m /= 2) masks.push(m);
  return `fn ${name}(v: vec4<f32>, l: u32, sg: u32, off: u32) -> vec4<f32> {
  var r = v;
  ${masks.map((m) => `r += select(vec4<f32>(0.0), subgroupShuffleXor(r, ${m}u), ${m}u < sg);`).join('\n  ')}
  let b = min(sg, ${lanes}u);
  if (l % b == 0u) { ${red}[off + l / b] = r; }
  workgroupBarrier();
  var s = vec4<f32>(0.0);
  let first = off + (l / ${lanes}u) * (${lanes}u / b);
  for (var j = 0u; j < ${lanes}u / b; j++) { s += ${red}[first + j]; }
  return s;
}`;
}
