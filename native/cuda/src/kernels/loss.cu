// Training losses, each a masked mean over rows (src/kernels/loss/cpu.ts): cross-entropy with an
// ignore index, cosine distance with torch 1.13's eps clamp, MSE; and their backward kernels.
// A row pass (one block per row) writes per-row losses and weights into scratch, one block folds
// them into the mean in a fixed order (f64), so the loss is deterministic. A mean over no included
// rows is 0 with scale 0. A label outside [0, V) cannot raise on the device: it poisons loss and
// gradient with NaN instead (the CPU reference throws).
#include <cfloat>

#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::block_sum;

constexpr float kCosEps2 = 1e-16f;  // (torch's cosine_similarity eps 1e-8)^2, applied to squared norms
constexpr int kThreads = 256;
constexpr int kMeanThreads = 1024;

__device__ __forceinline__ float nan_f32() { return __uint_as_float(0x7fc00000u); }

// Cross-entropy rows: an online max / sum-exp per thread (one pass), merged over the block.
__global__ void ce_rows_kernel(const float* __restrict__ x, const int32_t* __restrict__ labels, float* __restrict__ lse,
                               float* __restrict__ rowLoss, float* __restrict__ weight, int64_t V, int32_t ignore) {
  __shared__ float sm[rmas::rows::kMaxWarps], ss[rmas::rows::kMaxWarps];
  const int64_t r = blockIdx.x;
  const float* row = x + r * V;
  float m = -FLT_MAX, s = 0.f;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    const float v = row[j];
    if (v > m) {
      s = s * expf(m - v) + 1.f;
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  // merge (m, s) pairs: xor partners compute the same sum, so all lanes agree bitwise
  for (int k = 16; k > 0; k >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, k), s2 = __shfl_xor_sync(0xffffffffu, s, k);
    const float mm = fmaxf(m, m2);
    s = s * expf(m - mm) + s2 * expf(m2 - mm);
    m = mm;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  m = sm[0];
  s = ss[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); w++) {
    const float mm = fmaxf(m, sm[w]);
    s = s * expf(m - mm) + ss[w] * expf(sm[w] - mm);
    m = mm;
  }
  const float l = m + logf(s);
  lse[r] = l;
  const int32_t lab = labels[r];
  if (lab == ignore) {
    rowLoss[r] = 0.f;
    weight[r] = 0.f;
  } else if (lab < 0 || lab >= V) {
    rowLoss[r] = nan_f32();
    weight[r] = 1.f;
  } else {
    rowLoss[r] = l - row[lab];
    weight[r] = 1.f;
  }
}

// loss = sum w l / (div sum w) over rows with w != 0, scale = 1 / (div sum w); both 0 when sum w = 0.
// weight null: every row weighs 1. One block; fixed strides and order, sums in f64 like the reference.
__global__ void masked_mean_kernel(const float* __restrict__ rowLoss, const float* __restrict__ weight, int64_t n, double div,
                                   float* __restrict__ loss, float* __restrict__ scale) {
  __shared__ double red[2 * rmas::rows::kMaxWarps];
  double acc[2] = {0.0, 0.0};
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float w = weight ? weight[j] : 1.f;
    if (w != 0.f) {
      acc[0] += static_cast<double>(w) * rowLoss[j];
      acc[1] += w;
    }
  }
  block_sum(acc, red);
  if (threadIdx.x != 0) return;
  if (acc[1] == 0.0) {
    *loss = 0.f;
    *scale = 0.f;
  } else {
    const double den = acc[1] * div;
    *loss = static_cast<float>(acc[0] / den);
    *scale = static_cast<float>(1.0 / den);
  }
}

// dx = g scale (exp(x - lse) - onehot(label)), 0 on ignored rows. Block (row, column slice).
__global__ void ce_backward_kernel(const float* __restrict__ x, const int32_t* __restrict__ labels, const float* __restrict__ lse,
                                   const float* __restrict__ scale, const float* __restrict__ g, float* __restrict__ dx, int64_t V,
                                   int32_t ignore) {
  const int64_t r = blockIdx.x;
  const int32_t lab = labels[r];
  const bool skip = lab == ignore, bad = !skip && (lab < 0 || lab >= V);
  const float k = g[0] * scale[0], l = lse[r];
  const int64_t base = r * V;
  for (int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < V; j += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    float v;
    if (skip) v = 0.f;
    else if (bad) v = nan_f32();
    else v = (expf(x[base + j] - l) - (j == lab ? 1.f : 0.f)) * k;
    dx[base + j] = v;
  }
}

// Per row of a, b [rows, d]: cosine stats [dot, |a|^2, |b|^2] and 1 - cos (stats non-null), or
// sum (a - b)^2 for MSE (stats null).
__global__ void pair_rows_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ rowLoss,
                                 float* __restrict__ stats, int64_t d) {
  __shared__ float red[3 * rmas::rows::kMaxWarps];
  const int64_t r = blockIdx.x;
  const int64_t base = r * d;
  float acc[3] = {0.f, 0.f, 0.f};
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float x = a[base + j], y = b[base + j];
    if (stats) {
      acc[0] += x * y;
      acc[1] += x * x;
      acc[2] += y * y;
    } else {
      const float e = x - y;
      acc[0] += e * e;
    }
  }
  block_sum(acc, red);
  if (threadIdx.x != 0) return;
  if (stats) {
    stats[3 * r] = acc[0];
    stats[3 * r + 1] = acc[1];
    stats[3 * r + 2] = acc[2];
    rowLoss[r] = 1.f - acc[0] / sqrtf(fmaxf(acc[1], kCosEps2) * fmaxf(acc[2], kCosEps2));
  } else {
    rowLoss[r] = acc[0];
  }
}

// Cosine gradient w.r.t. x (y the other operand; `which` 1: x is a, 2: x is b):
// dx = -g scale w (y / D - cos x / Sx), D = sqrt(Sx Sy), the clamp treated as the identity.
__global__ void cos_backward_kernel(const float* __restrict__ x, const float* __restrict__ y, const float* __restrict__ stats,
                                    const float* __restrict__ weight, const float* __restrict__ scale, const float* __restrict__ g,
                                    float* __restrict__ dx, int64_t d, int which) {
  const int64_t r = blockIdx.x;
  const float w = weight ? weight[r] : 1.f;
  const float sx = fmaxf(stats[3 * r + which], kCosEps2), sy = fmaxf(stats[3 * r + 3 - which], kCosEps2);
  const float D = sqrtf(sx * sy);
  const float c = stats[3 * r] / D;
  const float k = -g[0] * scale[0] * w;
  const int64_t base = r * d;
  for (int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < d; j += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    dx[base + j] = w == 0.f ? 0.f : k * (y[base + j] / D - c * x[base + j] / sx);
  }
}

// MSE gradient: dx = sign 2 g scale w (a - b).
__global__ void mse_backward_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ weight,
                                    const float* __restrict__ scale, const float* __restrict__ g, float* __restrict__ dx, int64_t d,
                                    float sign) {
  const int64_t r = blockIdx.x;
  const float w = weight ? weight[r] : 1.f;
  const float k = sign * 2.f * g[0] * scale[0] * w;
  const int64_t base = r * d;
  for (int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < d; j += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    dx[base + j] = w == 0.f ? 0.f : k * (a[base + j] - b[base + j]);
  }
}

/** Grid of (rows, column slices) for the per-element backward kernels. */
dim3 row_grid(int64_t rows, int64_t cols) {
  const int64_t slices = (cols + kThreads - 1) / kThreads;
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(slices < 1 ? 1 : slices > 65535 ? 65535 : slices));
}

bool rows_ok(int64_t rows, int64_t cols) { return rows >= 0 && rows <= 0x7fffffff && cols >= 1; }

// "cross_entropy": ptrs [logits f32 [rows, V], labels i32 [rows], loss f32 [1], lse f32 [rows], scale f32 [1],
// work f32 [2 rows] (scratch: row losses, then row weights; may be any valid address when rows = 0)];
// ints [rows, V, ignoreIndex]; floats [].
cudaError_t launch_cross_entropy(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 6, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], V = a.ints[1];
  if (!rows_ok(rows, V) || V > 0x7fffffff) return cudaErrorInvalidValue;
  float* work = rmas::ptr<float>(a, 5);
  if (rows > 0) {
    ce_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<const int32_t>(a, 1),
                                                                         rmas::ptr<float>(a, 3), work, work + rows, V,
                                                                         static_cast<int32_t>(a.ints[2]));
  }
  masked_mean_kernel<<<1, kMeanThreads, 0, a.stream>>>(work, work + rows, rows, 1.0, rmas::ptr<float>(a, 2), rmas::ptr<float>(a, 4));
  return cudaGetLastError();
}

// "cross_entropy_backward": ptrs [logits f32 [rows, V], labels i32 [rows], lse f32 [rows], scale f32 [1], g f32 [1],
// dx f32 [rows, V]]; ints [rows, V, ignoreIndex]; floats [].
cudaError_t launch_cross_entropy_backward(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 6, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], V = a.ints[1];
  if (!rows_ok(rows, V) || V > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  ce_backward_kernel<<<row_grid(rows, V), kThreads, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const int32_t>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<const float>(a, 3),
      rmas::ptr<const float>(a, 4), rmas::ptr<float>(a, 5), V, static_cast<int32_t>(a.ints[2]));
  return cudaGetLastError();
}

// "cosine_loss": ptrs [a f32 [rows, d], b f32 [rows, d], mask f32 [rows] or 0, loss f32 [1], scale f32 [1],
// stats f32 [rows, 3], work f32 [rows] (scratch: row losses)]; ints [rows, d, hasMask]; floats [].
cudaError_t launch_cosine_loss(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 7, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], d = a.ints[1];
  const bool hasMask = a.ints[2] != 0;
  if (!rows_ok(rows, d) || (hasMask && !a.ptrs[2])) return cudaErrorInvalidValue;
  float* work = rmas::ptr<float>(a, 6);
  if (rows > 0) {
    pair_rows_kernel<<<static_cast<unsigned>(rows), rmas::rows::row_threads(d), 0, a.stream>>>(
        rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), work, rmas::ptr<float>(a, 5), d);
  }
  masked_mean_kernel<<<1, kMeanThreads, 0, a.stream>>>(work, hasMask ? rmas::ptr<const float>(a, 2) : nullptr, rows, 1.0,
                                                       rmas::ptr<float>(a, 3), rmas::ptr<float>(a, 4));
  return cudaGetLastError();
}

// "cosine_loss_backward": ptrs [x f32 [rows, d] (the operand differentiated), y f32 [rows, d] (the other),
// stats f32 [rows, 3], mask f32 [rows] or 0, scale f32 [1], g f32 [1], dx f32 [rows, d]];
// ints [rows, d, which (1: x is a, 2: x is b), hasMask]; floats [].
cudaError_t launch_cosine_loss_backward(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 7, 4, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], d = a.ints[1], which = a.ints[2];
  const bool hasMask = a.ints[3] != 0;
  if (!rows_ok(rows, d) || (which != 1 && which != 2) || (hasMask && !a.ptrs[3])) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  cos_backward_kernel<<<row_grid(rows, d), kThreads, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2),
      hasMask ? rmas::ptr<const float>(a, 3) : nullptr, rmas::ptr<const float>(a, 4), rmas::ptr<const float>(a, 5),
      rmas::ptr<float>(a, 6), d, static_cast<int>(which));
  return cudaGetLastError();
}

// "mse_loss": ptrs [a f32 [rows, d], b f32 [rows, d], mask f32 [rows] or 0, loss f32 [1], scale f32 [1],
// work f32 [rows] (scratch: row losses)]; ints [rows, d, hasMask]; floats []. The mean divides by d too.
cudaError_t launch_mse_loss(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 6, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], d = a.ints[1];
  const bool hasMask = a.ints[2] != 0;
  if (!rows_ok(rows, d) || (hasMask && !a.ptrs[2])) return cudaErrorInvalidValue;
  float* work = rmas::ptr<float>(a, 5);
  if (rows > 0) {
    pair_rows_kernel<<<static_cast<unsigned>(rows), rmas::rows::row_threads(d), 0, a.stream>>>(
        rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), work, nullptr, d);
  }
  masked_mean_kernel<<<1, kMeanThreads, 0, a.stream>>>(work, hasMask ? rmas::ptr<const float>(a, 2) : nullptr, rows,
                                                       static_cast<double>(d), rmas::ptr<float>(a, 3), rmas::ptr<float>(a, 4));
  return cudaGetLastError();
}

// "mse_loss_backward": ptrs [a f32 [rows, d], b f32 [rows, d], mask f32 [rows] or 0, scale f32 [1], g f32 [1],
// dx f32 [rows, d]]; ints [rows, d, hasMask]; floats [sign (+1: gradient of a, -1: of b)].
cudaError_t launch_mse_loss_backward(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 6, 3, 1)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], d = a.ints[1];
  const bool hasMask = a.ints[2] != 0;
  if (!rows_ok(rows, d) || (hasMask && !a.ptrs[2])) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  mse_backward_kernel<<<row_grid(rows, d), kThreads, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), hasMask ? rmas::ptr<const float>(a, 2) : nullptr,
      rmas::ptr<const float>(a, 3), rmas::ptr<const float>(a, 4), rmas::ptr<float>(a, 5), d, static_cast<float>(a.floats[0]));
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("cross_entropy", launch_cross_entropy);
RMAS_KERNEL("cross_entropy_backward", launch_cross_entropy_backward);
RMAS_KERNEL("cosine_loss", launch_cosine_loss);
RMAS_KERNEL("cosine_loss_backward", launch_cosine_loss_backward);
RMAS_KERNEL("mse_loss", launch_mse_loss);
RMAS_KERNEL("mse_loss_backward", launch_mse_loss_backward);
