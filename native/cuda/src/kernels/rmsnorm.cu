// RMSNorm over the last dimension and the row-norm parameter gradients (shared with LayerNorm); the
// semantics are src/kernels/rmsnorm/cpu.ts and paramgrad.ts. One block per row, f32 accumulation.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::block_sum;
using rmas::rows::load_param;

// y = x * r * (offset + w), r = 1 / sqrt(mean(x^2) + eps)
__global__ void rmsnorm_kernel(const float* __restrict__ x, const void* __restrict__ w, int64_t wdtype,
                               float* __restrict__ out, int64_t cols, float eps, float offset) {
  __shared__ float red[rmas::rows::kMaxWarps];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * cols;
  float ss[1] = {0.f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = x[base + c];
    ss[0] += v * v;
  }
  block_sum(ss, red);
  const float r = 1.f / sqrtf(ss[0] / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[base + c] = x[base + c] * r * (offset + load_param(w, wdtype, c));
}

// stats[row] = (0, r); with dx: dx = r g w' - x r^3 sum(g w' x) / C, w' = offset + w
__global__ void rmsnorm_backward_kernel(const float* __restrict__ x, const void* __restrict__ w, int64_t wdtype,
                                        const float* __restrict__ g, float* __restrict__ dx, float* __restrict__ stats,
                                        int64_t cols, float eps, float offset) {
  __shared__ float red[2 * rmas::rows::kMaxWarps];
  const int64_t row = blockIdx.x;
  const int64_t base = row * cols;
  float acc[2] = {0.f, 0.f};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = x[base + c];
    acc[0] += v * v;
    if (dx) acc[1] += g[base + c] * (offset + load_param(w, wdtype, c)) * v;
  }
  block_sum(acc, red);
  const float r = 1.f / sqrtf(acc[0] / static_cast<float>(cols) + eps);
  if (threadIdx.x == 0) {
    stats[2 * row] = 0.f;
    stats[2 * row + 1] = r;
  }
  if (!dx) return;
  const float k = r * r * r * acc[1] / static_cast<float>(cols);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    dx[base + c] = r * g[base + c] * (offset + load_param(w, wdtype, c)) - x[base + c] * k;
  }
}

constexpr int kGradThreads = 256;

// Stage 1: thread (column c, row block b) sums rows [b rb, (b + 1) rb) in order into
// part[(b K + j) cols + c], j = 0 for dgamma (when asked), K - 1 for dbeta.
__global__ void norm_param_grad_partial(const float* __restrict__ g, const float* __restrict__ x, const float* __restrict__ stats,
                                        float* __restrict__ part, int64_t rows, int64_t cols, int64_t rb, int gamma, int beta) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int64_t b = blockIdx.y;
  const int64_t r0 = b * rb;
  const int64_t r1 = r0 + rb < rows ? r0 + rb : rows;
  const int K = gamma + beta;
  float sg = 0.f, sb = 0.f;
  for (int64_t r = r0; r < r1; r++) {
    const float gv = g[r * cols + c];
    if (gamma) sg += gv * (x[r * cols + c] - stats[2 * r]) * stats[2 * r + 1];
    if (beta) sb += gv;
  }
  if (gamma) part[(b * K) * cols + c] = sg;
  if (beta) part[(b * K + K - 1) * cols + c] = sb;
}

// Stage 2: one thread per column sums the row-block partials in block order.
__global__ void norm_param_grad_final(const float* __restrict__ part, float* __restrict__ dgamma, float* __restrict__ dbeta,
                                      int64_t cols, int64_t nblk, int gamma, int beta) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int K = gamma + beta;
  float sg = 0.f, sb = 0.f;
  for (int64_t b = 0; b < nblk; b++) {
    if (gamma) sg += part[(b * K) * cols + c];
    if (beta) sb += part[(b * K + K - 1) * cols + c];
  }
  if (gamma) dgamma[c] = sg;
  if (beta) dbeta[c] = sb;
}

// "rmsnorm": ptrs [x f32 [rows, cols], w [cols] (wdtype), out f32 [rows, cols]];
// ints [rows, cols, wdtype (F32/F16/BF16)]; floats [eps, offset].
cudaError_t launch_rmsnorm(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 3, 3, 2)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], cols = a.ints[1], wdtype = a.ints[2];
  if (rows < 0 || cols < 1 || rows > 0x7fffffff || !rmas::rows::float_param(wdtype)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const int threads = rmas::rows::row_threads(cols);
  rmsnorm_kernel<<<static_cast<unsigned>(rows), threads, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const void>(a, 1), wdtype, rmas::ptr<float>(a, 2), cols,
      static_cast<float>(a.floats[0]), static_cast<float>(a.floats[1]));
  return cudaGetLastError();
}

// "rmsnorm_backward": ptrs [x f32 [rows, cols], w [cols] or 0, g f32 [rows, cols] or 0, dx f32 [rows, cols] or 0,
// stats f32 [rows, 2]]; ints [rows, cols, wdtype, withDx (1: w, g, dx given; 0: stats only)]; floats [eps, offset].
cudaError_t launch_rmsnorm_backward(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 5, 4, 2)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], cols = a.ints[1], wdtype = a.ints[2];
  const bool withDx = a.ints[3] != 0;
  if (rows < 0 || cols < 1 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  if (withDx && (!rmas::rows::float_param(wdtype) || !a.ptrs[1] || !a.ptrs[2] || !a.ptrs[3])) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const int threads = rmas::rows::row_threads(cols);
  rmsnorm_backward_kernel<<<static_cast<unsigned>(rows), threads, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const void>(a, 1), wdtype, rmas::ptr<const float>(a, 2),
      withDx ? rmas::ptr<float>(a, 3) : nullptr, rmas::ptr<float>(a, 4), cols, static_cast<float>(a.floats[0]),
      static_cast<float>(a.floats[1]));
  return cudaGetLastError();
}

// "norm_param_grad": ptrs [g f32 [rows, cols], x f32 [rows, cols], stats f32 [rows, 2], part f32 [nblk * K * cols]
// (scratch, K = gamma + beta; 0 when rows = 0), dgamma f32 [cols] or 0, dbeta f32 [cols] or 0];
// ints [rows, cols, gamma (0/1), beta (0/1), rowsPerBlock]; floats []. nblk = ceil(rows / rowsPerBlock).
// Deterministic: rows are summed in order inside a block, then the blocks in order.
cudaError_t launch_norm_param_grad(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 6, 5, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], cols = a.ints[1], rb = a.ints[4];
  const int gamma = a.ints[2] != 0, beta = a.ints[3] != 0;
  if (rows < 0 || cols < 1 || rb < 1 || !(gamma || beta)) return cudaErrorInvalidValue;
  if ((gamma && !a.ptrs[4]) || (beta && !a.ptrs[5])) return cudaErrorInvalidValue;
  const int64_t nblk = (rows + rb - 1) / rb;
  if (nblk > 65535 || (nblk > 0 && !a.ptrs[3])) return cudaErrorInvalidValue;
  const unsigned colBlocks = static_cast<unsigned>((cols + kGradThreads - 1) / kGradThreads);
  if (nblk > 0) {
    norm_param_grad_partial<<<dim3(colBlocks, static_cast<unsigned>(nblk)), kGradThreads, 0, a.stream>>>(
        rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<float>(a, 3),
        rows, cols, rb, gamma, beta);
  }
  norm_param_grad_final<<<colBlocks, kGradThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 3), rmas::ptr<float>(a, 4),
                                                                   rmas::ptr<float>(a, 5), cols, nblk, gamma, beta);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("rmsnorm", launch_rmsnorm);
RMAS_KERNEL("rmsnorm_backward", launch_rmsnorm_backward);
RMAS_KERNEL("norm_param_grad", launch_norm_param_grad);
