// softmax / log-softmax over the last dim, forward and backward; the semantics are
// src/kernels/softmax/cpu.ts. One block per row (rows of a vocabulary are 151,936 wide). Each thread keeps
// an online (max, sum) pair, so the forward reads a row twice; pairs are merged with a fixed shuffle and
// warp order, so reruns are bitwise equal. log-softmax is (x - max) - log(sum), exact for close logits.
#include <cfloat>

#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::block_sum;
using rmas::rows::kMaxWarps;

// The running max starts at -FLT_MAX, not -inf: exp(-inf - m) is then 0 and no inf - inf appears,
// while a row of -inf still ends with sum 0 and NaN outputs, as on the CPU.
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

/** Threads per row: a multiple of 32 up to 1024 for vocabulary-wide rows. */
inline int softmax_threads(int64_t cols) { return cols >= 16384 ? 1024 : cols >= 2048 ? 512 : rmas::rows::row_threads(cols); }

__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows, int64_t cols, int log) {
  __shared__ MaxSum red[kMaxWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float* xr = x + row * cols;
    float* yr = y + row * cols;
    MaxSum p{-FLT_MAX, 0.f};
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = xr[c];
      if (v > p.m) {
        p.s = p.s * expf(p.m - v) + 1.f;
        p.m = v;
      } else {
        p.s += expf(v - p.m);
      }
    }
#pragma unroll
    for (int k = 16; k > 0; k >>= 1) {
      const MaxSum o{__shfl_xor_sync(0xffffffffu, p.m, k), __shfl_xor_sync(0xffffffffu, p.s, k)};
      // both partners merge (lower lane's value first) so they hold the same bits
      p = (lane & k) ? merge(o, p) : merge(p, o);
    }
    if (lane == 0) red[warp] = p;
    __syncthreads();
    MaxSum t = red[0];
    for (int w = 1; w < nwarps; w++) t = merge(t, red[w]);
    __syncthreads();  // red is rewritten by the next row
    if (log) {
      const float ls = logf(t.s);
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = (xr[c] - t.m) - ls;
    } else {
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - t.m) / t.s;
    }
  }
}

// softmax: dx = y·(dy - Σ dy·y); log-softmax: dx = dy - exp(y)·Σ dy
__global__ void softmax_backward_kernel(const float* __restrict__ y, const float* __restrict__ dy, float* __restrict__ dx, int64_t rows,
                                        int64_t cols, int log) {
  __shared__ float red[kMaxWarps];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float s[1] = {0.f};
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s[0] += log ? dy[base + c] : dy[base + c] * y[base + c];
    block_sum(s, red);
    if (log) {
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dx[base + c] = dy[base + c] - expf(y[base + c]) * s[0];
    } else {
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dx[base + c] = y[base + c] * (dy[base + c] - s[0]);
    }
  }
}

inline unsigned row_grid(int64_t rows) { return static_cast<unsigned>(rows < (int64_t{1} << 30) ? rows : (int64_t{1} << 30)); }

// ptrs [x, y] (f32 [rows, cols]); ints [rows, cols, log (0 | 1)]; floats [].
cudaError_t launch_softmax(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 2, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = args.ints[0], cols = args.ints[1];
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  softmax_kernel<<<row_grid(rows), softmax_threads(cols), 0, args.stream>>>(rmas::ptr<const float>(args, 0), rmas::ptr<float>(args, 1),
                                                                           rows, cols, args.ints[2] != 0);
  return cudaGetLastError();
}

// ptrs [y, dy, dx] (f32 [rows, cols]; y is the forward output); ints [rows, cols, log (0 | 1)]; floats [].
cudaError_t launch_softmax_backward(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = args.ints[0], cols = args.ints[1];
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  softmax_backward_kernel<<<row_grid(rows), softmax_threads(cols), 0, args.stream>>>(
      rmas::ptr<const float>(args, 0), rmas::ptr<const float>(args, 1), rmas::ptr<float>(args, 2), rows, cols, args.ints[2] != 0);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("softmax", launch_softmax);
RMAS_KERNEL("softmax_backward", launch_softmax_backward);
