/**
 * kvAppend: copies new k or v rows [T, Hkv, D] (f32) into a preallocated cache [maxS, Hkv, D] at row `at`. An f16
 * cache (Decoder.kvDtype, WebGPU with shader-f16 and the CPU) stores each value rounded to f16.
 */
import { InvalidArgument, ShapeMismatch, UnsupportedFeature } from '../../errors';
import { f32ToF16Bits } from '../../formats/dtype';
import { type GpuContext, Uniforms } from '../../gpu/context';
import { type FloatArray, type GpuChunk, type KernelDef, binding, expectDType, expectRank } from '../kernel';
import { flatIndex, mainSignature } from '../wgsl';
import { cudaKvAppend } from './cuda';

export const kvAppendKernel: KernelDef<{ at: number }> = {
  name: 'kv_append',
  outputs([cache, rows], { at }) {
    expectDType('kv_append', 'cache', cache, 'f32', 'f16');
    expectDType('kv_append', 'rows', rows, 'f32');
    expectRank('kv_append', 'cache', cache, 3);
    expectRank('kv_append', 'rows', rows, 3);
    if (cache.shape[1] !== rows.shape[1] || cache.shape[2] !== rows.shape[2]) {
      throw new ShapeMismatch(`kv_append: rows [${rows.shape}] do not fit cache [${cache.shape}]; both are [*, Hkv, D]`);
    }
    if (!Number.isInteger(at) || at < 0 || at + rows.shape[0] > cache.shape[0]) {
      throw new InvalidArgument(
        `kv_append: cannot write ${rows.shape[0]} rows at row ${at} of a cache with ${cache.shape[0]} rows; allocate a longer cache or start a new sequence`,
      );
    }
    return [];
  },
  cpu([cache, rows], _out, { at }, { inputs }) {
    const rowElems = inputs[0].shape[1] * inputs[0].shape[2];
    if (inputs[0].dtype === 'f16') (cache as Uint16Array).set(Array.from(rows as FloatArray, f32ToF16Bits), at * rowElems);
    else (cache as FloatArray).set(rows as FloatArray, at * rowElems);
  },
  webgpu(ctx, [cache, rows], _out, { at }) {
    const rowElems = cache.meta.shape[1] * cache.meta.shape[2];
    if (rowElems === 0) return;
    const src = binding(rows, 'kv_append');
    const f16 = cache.meta.dtype === 'f16';
    if (f16) ctx.requireFeature('shader-f16', 'an f16 KV cache');
    // The cache may be split along dim 0 (long contexts): write the part of [at, at + n) each chunk holds.
    let first = 0;
    for (const c of cache.chunks) {
      const lo = Math.max(at, first);
      const hi = Math.min(at + rows.meta.shape[0], first + c.rows);
      if (lo < hi) {
        if (f16) appendF16(ctx, src, c, (lo - at) * rowElems, (lo - first) * rowElems, (hi - lo) * rowElems);
        else
          ctx.copy(
            src.buffer,
            (src.offset ?? 0) + (lo - at) * rowElems * 4,
            c.buffer,
            c.offset + (lo - first) * rowElems * 4,
            (hi - lo) * rowElems * 4,
          );
      }
      first += c.rows;
    }
  },
  cuda(ctx, inputs, _out, { at }) {
    if (inputs[0].meta.dtype !== 'f32') throw new UnsupportedFeature('kv_append: the CUDA backend keeps f32 caches; use kvDtype f32');
    cudaKvAppend(ctx, inputs, at);
  },
};

const WG = 256;

/** `count` f32 values of the rows from element `from` into an f16 cache chunk from element `to`, rounded to f16. */
function appendF16(ctx: GpuContext, src: GPUBufferBinding, c: GpuChunk, from: number, to: number, count: number) {
  ctx.dispatch({
    key: `kv_append_f16_wg${WG}`,
    wgsl: () => `enable f16;
struct P { n: u32, src: u32, dst: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> rows: array<f32>;
@group(0) @binding(2) var<storage, read_write> cache: array<f16>;
${mainSignature(WG)} {
  let i = ${flatIndex(WG)};
  if (i < u.n) { cache[u.dst + i] = f16(rows[u.src + i]); }
}`,
    uniforms: new Uniforms().u32(count).u32(from).u32(to),
    bindings: [src, { buffer: c.buffer, offset: c.offset, size: c.size }],
    workgroups: ctx.grid(Math.ceil(count / WG)),
  });
}
