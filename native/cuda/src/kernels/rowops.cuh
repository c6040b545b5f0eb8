// Device helpers shared by the row kernels (norms, losses, sampling, top-k): deterministic block sums,
// packed parameter loads and the order-preserving f32 key. Header only; kernel files include it.
//
// Determinism: a warp sums with an xor butterfly (every lane ends with the same bits, since each
// step adds the same two values on both partners), then every thread adds the per-warp sums in warp
// order. The result depends on blockDim only, never on scheduling, so reruns are bitwise equal.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "../registry.h"

namespace rmas {
namespace rows {

constexpr int kMaxWarps = 32;

/** Threads per row for a row of `cols` values: a multiple of 32, at most 256. */
inline int row_threads(int64_t cols) { return cols >= 1024 ? 256 : cols >= 256 ? 128 : cols > 32 ? 64 : 32; }

/** Blocks for a grid-stride loop over n elements of `threads` each (at least 1, at most 2^20). */
inline unsigned grid_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b > (1 << 20) ? (1 << 20) : b);
}

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
  return v;
}

/**
 * Sums N values over the block; every thread gets the totals. `smem` holds kMaxWarps * N values of T.
 * Call from uniform control flow with blockDim.x a multiple of 32. Ends with a barrier, so `smem` may
 * be reused right after.
 */
template <int N, typename T>
__device__ __forceinline__ void block_sum(T (&v)[N], T* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
  for (int i = 0; i < N; i++) v[i] = warp_sum(v[i]);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < N; i++) smem[warp * N + i] = v[i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < N; i++) {
    T s = smem[i];
    for (int w = 1; w < nwarps; w++) s += smem[w * N + i];
    v[i] = s;
  }
  __syncthreads();
}

/** Element i of a [cols] parameter stored as f32, f16 or bf16 (the DType code). */
__device__ __forceinline__ float load_param(const void* p, int64_t dtype, int64_t i) {
  if (dtype == BF16) return __uint_as_float(static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16);
  if (dtype == F16) return __half2float(__ushort_as_half(static_cast<const uint16_t*>(p)[i]));
  return static_cast<const float*>(p)[i];
}

/** True when a parameter dtype code can be read by load_param. */
inline bool float_param(int64_t dtype) { return dtype == F32 || dtype == F16 || dtype == BF16; }

/**
 * Order-preserving u32 key of an f32: larger value, larger key; -0 folded onto +0; NaN -> 0, below
 * -Infinity (whose key is 0x007fffff), so NaN sorts after every number.
 */
__device__ __forceinline__ uint32_t order_key(float x) {
  uint32_t b = __float_as_uint(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0u;
  if (b == 0x80000000u) b = 0u;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/** The f32 whose order_key is k (k from a non-NaN value). */
__device__ __forceinline__ float order_unkey(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

}  // namespace rows
}  // namespace rmas
