/**
 * Attention on CUDA: the hooks of the attention KernelDefs, launching native/cuda/src/kernels/attention.cu.
 * The ints layouts are documented above each launch function there; keep them in sync.
 */
import { InvalidArgument } from '../../errors';
import type { CudaLauncher, CudaRef } from '../kernel';
import type { AttnDims } from './cpu';

/** Largest head_dim the kernels take (each lane of a warp holds up to 8 dims of a row). */
export const CUDA_MAX_HEAD_DIM = 256;
/** Query rows per block of attention_fwd / attention_bwd_q, keys per block of attention_bwd_kv. */
const ROWS = 16;
/** Keys per shared-memory tile; split lengths are multiples of it. */
const KEY_TILE = 32;

const dimsInts = (d: AttnDims) => [d.t, d.s, d.hq, d.hkv, d.d, d.kvLen, d.window];

function checkHeadDim(op: string, d: AttnDims) {
  if (d.d > CUDA_MAX_HEAD_DIM) {
    throw new InvalidArgument(
      `${op}: head_dim ${d.d} exceeds the CUDA kernels' ${CUDA_MAX_HEAD_DIM}; use the webgpu or cpu backend for this model`,
    );
  }
}

/**
 * Key-range splits of the forward (flash-decoding). A decode step has only Hkv blocks, too few to fill a GPU,
 * so a long cache is cut into splits merged by attention_combine; prefill grids are large enough. Splits cover
 * [base, kvLen), base being the first key any query sees.
 */
export function cudaSplits(dims: AttnDims, forced?: number): { base: number; len: number; n: number } {
  const past = dims.kvLen - dims.t;
  const base = dims.window > 0 ? Math.max(0, past + 1 - dims.window) : 0;
  const span = dims.kvLen - base;
  const blocks = Math.ceil((dims.t * (dims.hq / dims.hkv)) / ROWS) * dims.hkv;
  // aim at ~264 blocks (two per SM of an H100), with at least 128 keys per split
  let n = forced ?? (span >= 256 && blocks < 132 ? Math.min(Math.floor(span / 128), Math.ceil(264 / blocks)) : 1);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgument(`attention: splits ${forced} must be a positive integer`);
  n = Math.min(n, 65535);
  const len = Math.max(KEY_TILE, Math.ceil(Math.ceil(span / n) / KEY_TILE) * KEY_TILE);
  return { base, len, n: Math.max(1, Math.ceil(span / len)) };
}

/**
 * attention_fwd: ptrs [q, k, v, o, lse]; ints [T, S, Hq, Hkv, D, kvLen, window, splitBase, splitLen, n];
 * floats [scale]. With n > 1 it writes n slices into temporaries and attention_combine
 * (ptrs [partO, partLse, o, lse]; ints [T, Hq, D, n]) merges them.
 */
export function cudaAttentionForward(ctx: CudaLauncher, [q, k, v]: CudaRef[], [o, lse]: CudaRef[], dims: AttnDims, splits?: number) {
  if (dims.t === 0 || dims.hq === 0) return;
  checkHeadDim('attention', dims);
  const sp = cudaSplits(dims, splits);
  const ints = [...dimsInts(dims), sp.base, sp.len, sp.n];
  if (sp.n === 1) {
    ctx.launch('attention_fwd', [q.ptr, k.ptr, v.ptr, o.ptr, lse.ptr], ints, [dims.scale]);
    return;
  }
  const partO = ctx.temp(sp.n * dims.t * dims.hq * dims.d * 4);
  const partL = ctx.temp(sp.n * dims.hq * dims.t * 4);
  ctx.launch('attention_fwd', [q.ptr, k.ptr, v.ptr, partO, partL], ints, [dims.scale]);
  ctx.launch('attention_combine', [partO, partL, o.ptr, lse.ptr], [dims.t, dims.hq, dims.d, sp.n], []);
}

/** attention_row_dot: ptrs [o, dO, di]; ints [T, Hq, D]. */
export function cudaAttentionRowDot(ctx: CudaLauncher, [o, dO]: CudaRef[], [di]: CudaRef[]) {
  const [t, hq, d] = o.meta.shape;
  if (t * hq === 0) return;
  ctx.launch('attention_row_dot', [o.ptr, dO.ptr, di.ptr], [t, hq, d], []);
}

/** attention_bwd_q: ptrs [q, k, v, lse, di, dO, dq]; ints [T, S, Hq, Hkv, D, kvLen, window]; floats [scale]. */
export function cudaAttentionBackwardQ(ctx: CudaLauncher, inputs: CudaRef[], [dq]: CudaRef[], dims: AttnDims) {
  if (dims.t === 0 || dims.hq === 0) return;
  checkHeadDim('attention_backward_q', dims);
  ctx.launch('attention_bwd_q', [...inputs.map((r) => r.ptr), dq.ptr], dimsInts(dims), [dims.scale]);
}

/**
 * attention_bwd_kv: ptrs [q, k, v, lse, di, dO, dk, dv]; ints [T, S, Hq, Hkv, D, kvLen, window]; floats [scale].
 * Writes every row of dk and dv (zeros where no query looks, T = 0 included).
 */
export function cudaAttentionBackwardKV(ctx: CudaLauncher, inputs: CudaRef[], [dk, dv]: CudaRef[], dims: AttnDims) {
  if (dims.s === 0) return;
  checkHeadDim('attention_backward_kv', dims);
  ctx.launch('attention_bwd_kv', [...inputs.map((r) => r.ptr), dk.ptr, dv.ptr], dimsInts(dims), [dims.scale]);
}

/** kv_append: ptrs [cache, rows]; ints [at, n, Hkv·D]. */
export function cudaKvAppend(ctx: CudaLauncher, [cache, rows]: CudaRef[], at: number) {
  const n = rows.meta.shape[0];
  const rowElems = cache.meta.shape[1] * cache.meta.shape[2];
  if (n * rowElems === 0) return;
  ctx.launch('kv_append', [cache.ptr, rows.ptr], [at, n, rowElems], []);
}
