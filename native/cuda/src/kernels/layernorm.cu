// LayerNorm over the last dimension, PyTorch nn.LayerNorm semantics (biased variance, eps inside the
// sqrt, optional gamma/beta in f32/f16/bf16); see src/kernels/layernorm/cpu.ts. One block per row;
// mean first, then the centred sum of squares (no E[x^2] - mean^2 cancellation), as the reference.
// dgamma/dbeta come from "norm_param_grad" (rmsnorm.cu) over the stats written here.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::block_sum;
using rmas::rows::load_param;

/** mean and rstd of the row at `base`; every thread gets both. */
__device__ __forceinline__ void row_stats(const float* __restrict__ x, int64_t base, int64_t cols, float eps, float* red,
                                          float& mean, float& rstd) {
  float s[1] = {0.f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s[0] += x[base + c];
  block_sum(s, red);
  mean = s[0] / static_cast<float>(cols);
  float v[1] = {0.f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float d = x[base + c] - mean;
    v[0] += d * d;
  }
  block_sum(v, red);
  rstd = 1.f / sqrtf(v[0] / static_cast<float>(cols) + eps);
}

// y = (x - mean) rstd gamma + beta; gdtype/bdtype < 0: that parameter is absent
__global__ void layernorm_kernel(const float* __restrict__ x, const void* __restrict__ gamma, int64_t gdtype,
                                 const void* __restrict__ beta, int64_t bdtype, float* __restrict__ out, int64_t cols, float eps) {
  __shared__ float red[rmas::rows::kMaxWarps];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float mean, rstd;
  row_stats(x, base, cols, eps, red, mean, rstd);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float y = (x[base + c] - mean) * rstd;
    if (gdtype >= 0) y *= load_param(gamma, gdtype, c);
    if (bdtype >= 0) y += load_param(beta, bdtype, c);
    out[base + c] = y;
  }
}

// stats[row] = (mean, rstd); with dx: dx = rstd (gh - mean(gh) - xh mean(gh xh)), gh = g gamma, xh = (x - mean) rstd
__global__ void layernorm_backward_kernel(const float* __restrict__ x, const float* __restrict__ g, const void* __restrict__ gamma,
                                          int64_t gdtype, float* __restrict__ dx, float* __restrict__ stats, int64_t cols, float eps) {
  __shared__ float red[2 * rmas::rows::kMaxWarps];
  const int64_t row = blockIdx.x;
  const int64_t base = row * cols;
  float mean, rstd;
  row_stats(x, base, cols, eps, red, mean, rstd);
  if (threadIdx.x == 0) {
    stats[2 * row] = mean;
    stats[2 * row + 1] = rstd;
  }
  if (!dx) return;
  // gh is rounded on its own (__fmul_rn) in both loops: contracted into the subtraction below as an FMA, it would
  // differ from the gh summed into mean(gh) by its rounding error, and a one-column row (dx exactly 0) would get
  // rstd times that error (3.5e-5 on an H200 at eps 1e-5)
  float acc[2] = {0.f, 0.f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float gh = __fmul_rn(g[base + c], gdtype >= 0 ? load_param(gamma, gdtype, c) : 1.f);
    acc[0] += gh;
    acc[1] += gh * (x[base + c] - mean) * rstd;
  }
  block_sum(acc, red);
  const float mg = acc[0] / static_cast<float>(cols), mgh = acc[1] / static_cast<float>(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float gh = __fmul_rn(g[base + c], gdtype >= 0 ? load_param(gamma, gdtype, c) : 1.f);
    dx[base + c] = rstd * (gh - mg - (x[base + c] - mean) * rstd * mgh);
  }
}

bool param_code(int64_t d) { return d == -1 || rmas::rows::float_param(d); }

// "layernorm": ptrs [x f32 [rows, cols], gamma [cols] or 0, beta [cols] or 0, out f32 [rows, cols]];
// ints [rows, cols, gamma dtype (-1: absent), beta dtype (-1: absent)]; floats [eps].
cudaError_t launch_layernorm(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 4, 1)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], cols = a.ints[1], gd = a.ints[2], bd = a.ints[3];
  if (rows < 0 || cols < 1 || rows > 0x7fffffff || !param_code(gd) || !param_code(bd)) return cudaErrorInvalidValue;
  if ((gd >= 0 && !a.ptrs[1]) || (bd >= 0 && !a.ptrs[2])) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  layernorm_kernel<<<static_cast<unsigned>(rows), rmas::rows::row_threads(cols), 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const void>(a, 1), gd, rmas::ptr<const void>(a, 2), bd, rmas::ptr<float>(a, 3),
      cols, static_cast<float>(a.floats[0]));
  return cudaGetLastError();
}

// "layernorm_backward": ptrs [x f32 [rows, cols], g f32 [rows, cols] or 0, gamma [cols] or 0, dx f32 [rows, cols] or 0,
// stats f32 [rows, 2]]; ints [rows, cols, gamma dtype (-1: absent), withDx (1: g, dx given; 0: stats only)]; floats [eps].
cudaError_t launch_layernorm_backward(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 5, 4, 1)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], cols = a.ints[1], gd = a.ints[2];
  const bool withDx = a.ints[3] != 0;
  if (rows < 0 || cols < 1 || rows > 0x7fffffff || !param_code(gd)) return cudaErrorInvalidValue;
  if (withDx && (!a.ptrs[1] || !a.ptrs[3] || (gd >= 0 && !a.ptrs[2]))) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  layernorm_backward_kernel<<<static_cast<unsigned>(rows), rmas::rows::row_threads(cols), 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const void>(a, 2), withDx ? gd : -1,
      withDx ? rmas::ptr<float>(a, 3) : nullptr, rmas::ptr<float>(a, 4), cols, static_cast<float>(a.floats[0]));
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("layernorm", launch_layernorm);
RMAS_KERNEL("layernorm_backward", launch_layernorm_backward);
