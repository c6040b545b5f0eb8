// Reductions (sum / mean / sum of squares over rows of `cols` values), their backward, and global
// gradient-norm clipping in place; the semantics are src/kernels/reduce/cpu.ts. Deterministic two-stage
// sums as on WebGPU (reduce/plan.ts): stage 1 gives each (row, segment) one block summing a contiguous
// segment with a fixed thread stride and a fixed tree; stage 2 sums a row's partials the same way. The
// segment counts come from the TypeScript side (splitsFor), so the partition depends on sizes only.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::block_sum;
using rmas::rows::grid_for;
using rmas::rows::kMaxWarps;
constexpr int kThreads = 256;
/** Tensors per clip_grad_norm launch: the table below stays under the classic 4 KiB of kernel parameters. */
constexpr int kClipTable = 128;

/** Sum of (squared when `square`) x[begin, end) over the block; every thread gets it. */
__device__ __forceinline__ float segment_sum(const float* __restrict__ x, int64_t begin, int64_t end, int square) {
  __shared__ float red[kMaxWarps];
  float s[1] = {0.f};
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    const float v = x[j];
    s[0] += square ? v * v : v;
  }
  block_sum(s, red);
  return s[0];
}

// Block w = (row w / splits, segment w % splits): dst[w] = alpha * sum of that segment. Also stage 2,
// with x = the partials, cols = splits, splits = 1.
__global__ void reduce_partial_kernel(const float* __restrict__ x, float* __restrict__ dst, int64_t rows, int64_t cols, int64_t splits,
                                      int square, float alpha) {
  const int64_t seg = (cols + splits - 1) / splits;
  for (int64_t w = blockIdx.x; w < rows * splits; w += gridDim.x) {
    const int64_t r = w / splits, k = w % splits;
    const int64_t begin = r * cols + k * seg;
    const int64_t end = r * cols + min(cols, (k + 1) * seg);
    const float s = segment_sum(x, begin, end, square);
    if (threadIdx.x == 0) dst[w] = s * alpha;
  }
}

inline unsigned block_grid(int64_t n) { return static_cast<unsigned>(n < (int64_t{1} << 30) ? n : (int64_t{1} << 30)); }

// ptrs [x, out, partials] (f32; partials holds rows * splits values, 0 when splits <= 1);
// ints [rows, cols, splits, square (0 | 1)]; floats [alpha] (1, or 1 / cols for a mean: Infinity when cols is 0).
// out[r] = alpha * sum_c f(x[r * cols + c]); an empty row gives 0 * alpha (NaN for a mean, as in torch).
cudaError_t launch_reduce(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 4, 1)) return cudaErrorInvalidValue;
  const int64_t rows = args.ints[0], cols = args.ints[1], splits = args.ints[2];
  const int square = args.ints[3] != 0;
  const float alpha = static_cast<float>(args.floats[0]);
  if (rows < 0 || cols < 0 || splits < 0 || (cols > 0 && splits < 1) || (splits > 1 && args.ptrs[2] == 0)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const auto x = rmas::ptr<const float>(args, 0);
  const auto out = rmas::ptr<float>(args, 1);
  if (splits <= 1) {
    reduce_partial_kernel<<<block_grid(rows), kThreads, 0, args.stream>>>(x, out, rows, cols, 1, square, alpha);
  } else {
    const auto part = rmas::ptr<float>(args, 2);
    reduce_partial_kernel<<<block_grid(rows * splits), kThreads, 0, args.stream>>>(x, part, rows, cols, splits, square, 1.f);
    reduce_partial_kernel<<<block_grid(rows), kThreads, 0, args.stream>>>(part, out, rows, splits, 1, 0, alpha);
  }
  return cudaGetLastError();
}

// dx[i] = alpha * g[i / cols] * (square ? 2 x[i] : 1), in f64 like the CPU reference
__global__ void reduce_backward_kernel(const float* __restrict__ g, const float* __restrict__ x, float* __restrict__ dx, int64_t n,
                                       int64_t cols, double alpha) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double gi = alpha * static_cast<double>(g[i / cols]);
    dx[i] = static_cast<float>(x ? gi * 2.0 * static_cast<double>(x[i]) : gi);
  }
}

// ptrs [g, x or 0, dx] (f32; x only for sumsq); ints [n = numel(dx), cols >= 1]; floats [alpha].
cudaError_t launch_reduce_backward(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 2, 1)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0], cols = args.ints[1];
  if (n < 0 || cols < 1) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  reduce_backward_kernel<<<grid_for(n, kThreads), kThreads, 0, args.stream>>>(
      rmas::ptr<const float>(args, 0), rmas::ptr<const float>(args, 1), rmas::ptr<float>(args, 2), n, cols, args.floats[0]);
  return cudaGetLastError();
}

/** Up to kClipTable gradients of one clip launch: pointers, sizes and their first block (prefix of splits). */
struct ClipTable {
  float* g[kClipTable];
  int64_t n[kClipTable];
  int64_t first[kClipTable + 1];
  int count;
};

/** The table entry that block b belongs to (first[t] <= b < first[t + 1]). */
__device__ __forceinline__ int clip_entry(const ClipTable& t, int64_t b) {
  int lo = 0, hi = t.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (t.first[mid] <= b) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Block b: partials[base + b] = sum of squares of its gradient's segment
__global__ void clip_partial_kernel(const __grid_constant__ ClipTable t, float* __restrict__ partials, int64_t base) {
  const int64_t b = blockIdx.x;
  const int e = clip_entry(t, b);
  const int64_t splits = t.first[e + 1] - t.first[e], k = b - t.first[e], n = t.n[e];
  const int64_t seg = (n + splits - 1) / splits;
  const float s = segment_sum(t.g[e], k * seg, min(n, (k + 1) * seg), 1);
  if (threadIdx.x == 0) partials[base + b] = s;
}

// total[0] = sqrt(sum of partials[0, count))
__global__ void clip_total_kernel(const float* __restrict__ partials, int64_t count, float* __restrict__ total) {
  const float s = segment_sum(partials, 0, count, 0);
  if (threadIdx.x == 0) total[0] = sqrtf(s);
}

// g *= min(1, maxNorm / (total + 1e-6)) over block b's segment (torch multiplies even by 1: NaN spreads)
__global__ void clip_scale_kernel(const __grid_constant__ ClipTable t, const float* __restrict__ total, double max_norm) {
  const int64_t b = blockIdx.x;
  const int e = clip_entry(t, b);
  const int64_t splits = t.first[e + 1] - t.first[e], k = b - t.first[e], n = t.n[e];
  const int64_t seg = (n + splits - 1) / splits;
  const double q = max_norm / (static_cast<double>(total[0]) + 1e-6);
  const float coef = static_cast<float>(q < 1.0 || q != q ? q : 1.0);  // Math.min: a NaN norm gives NaN, fmin would give 1
  float* g = t.g[e];
  for (int64_t i = k * seg + threadIdx.x; i < min(n, (k + 1) * seg); i += blockDim.x) g[i] *= coef;
}

// ptrs [total, partials, g_0, ..., g_{k-1}] (f32; total [1]; partials holds sum of splits_i values, 0 when
// that sum is 0; the gradients are scaled in place); ints [n_0, splits_0, ..., n_{k-1}, splits_{k-1}]
// (splits_i = 0 exactly when n_i = 0, at most 2^20); floats [maxNorm].
cudaError_t launch_clip_grad_norm(const rmas::LaunchArgs& args) {
  const int k = args.nptrs - 2;
  if (k < 1 || args.nints != 2 * k || args.nfloats != 1) return cudaErrorInvalidValue;
  int64_t total_splits = 0;
  for (int i = 0; i < k; i++) {
    const int64_t n = args.ints[2 * i], s = args.ints[2 * i + 1];
    if (n < 0 || s < 0 || (n == 0) != (s == 0) || s > n || s > (int64_t{1} << 20)) return cudaErrorInvalidValue;
    total_splits += s;
  }
  if (total_splits > 0 && args.ptrs[1] == 0) return cudaErrorInvalidValue;
  const auto total = rmas::ptr<float>(args, 0);
  const auto partials = rmas::ptr<float>(args, 1);
  // tables of up to kClipTable non-empty gradients, in input order, each with its own run of partials
  auto for_tables = [&](auto&& fn) {
    ClipTable t{};
    int64_t base = 0;
    auto flush = [&]() {
      if (!t.count) return;
      fn(t, base);
      base += t.first[t.count];
      t = ClipTable{};
    };
    for (int i = 0; i < k; i++) {
      const int64_t n = args.ints[2 * i], s = args.ints[2 * i + 1];
      if (!n) continue;
      t.g[t.count] = rmas::ptr<float>(args, 2 + i);
      t.n[t.count] = n;
      t.first[t.count + 1] = t.first[t.count] + s;
      if (++t.count == kClipTable) flush();
    }
    flush();
  };
  for_tables([&](const ClipTable& t, int64_t base) {
    clip_partial_kernel<<<static_cast<unsigned>(t.first[t.count]), kThreads, 0, args.stream>>>(t, partials, base);
  });
  clip_total_kernel<<<1, kThreads, 0, args.stream>>>(partials, total_splits, total);
  const double max_norm = args.floats[0];
  for_tables([&](const ClipTable& t, int64_t) {
    clip_scale_kernel<<<static_cast<unsigned>(t.first[t.count]), kThreads, 0, args.stream>>>(t, total, max_norm);
  });
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("reduce", launch_reduce);
RMAS_KERNEL("reduce_backward", launch_reduce_backward);
RMAS_KERNEL("clip_grad_norm", launch_clip_grad_norm);
