// Top-k over the last dim, one block per row (src/kernels/topk/cpu.ts states the order): a before b
// iff a > b, or a == b and a's index is lower; NaN after every number (NaNs by index); -0 == +0.
// Values are written as the input's own bits (a -0 stays -0, a NaN keeps its payload).
//
// Scan: thread t reads elements t, t + T, ... and keeps the k best it has seen in a sorted private
// list; most elements fail one comparison against the list's last entry. Merge: k rounds of "take
// the best head" over the block; the owner of the winner (index mod T, by the strided scan) advances.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::order_key;

constexpr int kTopkMax = 32;  // TOPK_MAX of src/kernels/topk/wgsl.ts
constexpr int kThreads = 256;
constexpr uint32_t kNone = 0xffffffffu;

// (ka, ia) comes before (kb, ib); an empty slot (key 0, index kNone) comes after everything, NaN
// (key 0, a real index) included
__device__ __forceinline__ bool before(uint32_t ka, uint32_t ia, uint32_t kb, uint32_t ib) {
  return ka > kb || (ka == kb && ia < ib);
}

__global__ void __launch_bounds__(kThreads) topk_kernel(const float* __restrict__ x, float* __restrict__ values,
                                                        int32_t* __restrict__ indices, int64_t V, int k) {
  __shared__ uint32_t red[2 * rmas::rows::kMaxWarps];
  const int t = threadIdx.x;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * V;
  uint32_t lk[kTopkMax], li[kTopkMax];
  for (int j = 0; j < k; j++) {
    lk[j] = 0u;
    li[j] = kNone;
  }
  uint32_t lastK = 0u, lastI = kNone;
  for (int64_t i64 = t; i64 < V; i64 += blockDim.x) {
    const uint32_t i = static_cast<uint32_t>(i64);
    const uint32_t c = order_key(x[base + i64]);
    if (!before(c, i, lastK, lastI)) continue;
    int j = k - 1;
    while (j > 0 && before(c, i, lk[j - 1], li[j - 1])) {
      lk[j] = lk[j - 1];
      li[j] = li[j - 1];
      j--;
    }
    lk[j] = c;
    li[j] = i;
    lastK = lk[k - 1];
    lastI = li[k - 1];
  }

  const int64_t out = static_cast<int64_t>(blockIdx.x) * k;
  const int warp = t >> 5, nwarps = blockDim.x >> 5;
  int head = 0;
  for (int r = 0; r < k; r++) {
    uint32_t bk = head < k ? lk[head] : 0u;
    uint32_t bi = head < k ? li[head] : kNone;
    // a total order on (key, index), so the xor butterfly leaves the same winner in every lane
    for (int s = 16; s > 0; s >>= 1) {
      const uint32_t k2 = __shfl_xor_sync(0xffffffffu, bk, s), i2 = __shfl_xor_sync(0xffffffffu, bi, s);
      if (before(k2, i2, bk, bi)) {
        bk = k2;
        bi = i2;
      }
    }
    if ((t & 31) == 0) {
      red[2 * warp] = bk;
      red[2 * warp + 1] = bi;
    }
    __syncthreads();
    bk = red[0];
    bi = red[1];
    for (int w = 1; w < nwarps; w++) {
      if (before(red[2 * w], red[2 * w + 1], bk, bi)) {
        bk = red[2 * w];
        bi = red[2 * w + 1];
      }
    }
    __syncthreads();
    if (bi != kNone && bi % blockDim.x == static_cast<uint32_t>(t)) {
      head++;
      values[out + r] = x[base + bi];
      indices[out + r] = static_cast<int32_t>(bi);
    }
  }
}

// "topk": ptrs [x f32 [rows, V], values f32 [rows, k], indices i32 [rows, k]]; ints [rows, V, k]
// (1 <= k <= min(V, 32)); floats [].
cudaError_t launch_topk(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 3, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], V = a.ints[1], k = a.ints[2];
  if (rows < 0 || rows > 0x7fffffff || V < 1 || V > 0x7fffffff || k < 1 || k > kTopkMax || k > V) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  topk_kernel<<<static_cast<unsigned>(rows), kThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<float>(a, 1),
                                                                     rmas::ptr<int32_t>(a, 2), V, static_cast<int>(k));
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("topk", launch_topk);
