/** kvAppend: copies new k or v rows [T, Hkv, D] into a preallocated cache [maxS, Hkv, D] at row `at`. */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { type FloatArray, type KernelDef, binding, expectDType, expectRank } from '../kernel';
import { cudaKvAppend } from './cuda';

export const kvAppendKernel: KernelDef<{ at: number }> = {
  name: 'kv_append',
  outputs([cache, rows], { at }) {
    expectDType('kv_append', 'cache', cache, 'f32');
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
    (cache as FloatArray).set(rows as FloatArray, at * rowElems);
  },
  webgpu(ctx, [cache, rows], _out, { at }) {
    const rowBytes = cache.meta.shape[1] * cache.meta.shape[2] * 4;
    const src = binding(rows, 'kv_append');
    const n = rows.meta.shape[0];
    // The cache may be split along dim 0 (long contexts): copy the part of [at, at + n) each chunk holds.
    let first = 0;
    for (const c of cache.chunks) {
      const lo = Math.max(at, first);
      const hi = Math.min(at + n, first + c.rows);
      if (lo < hi && rowBytes > 0) ctx.copy(src.buffer, (src.offset ?? 0) + (lo - at) * rowBytes, c.buffer, c.offset + (lo - first) * rowBytes, (hi - lo) * rowBytes);
      first += c.rows;
    }
  },
  cuda(ctx, inputs, _out, { at }) {
    cudaKvAppend(ctx, inputs, at);
  },
};
