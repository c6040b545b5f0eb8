// Elementwise binary ops with a trailing-slice broadcast, alpha * a + beta, and column sums; the
// semantics are src/kernels/elementwise/cpu.ts. f32 throughout. add/sub/mul are single f32 operations
// (bit-equal to the CPU, which rounds the exact f64 result once); scale runs in f64 like the CPU.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::grid_for;
constexpr int kThreads = 256;

enum BinaryOp { kAdd, kSub, kMul };

// out[i] = a[i] op b[i % bn]; 32-bit index math where n fits (the modulo is the costly part)
template <BinaryOp OP, typename I>
__global__ void binary_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, I n, I bn) {
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * blockDim.x) {
    const float x = a[i];
    const float y = b[bn == n ? i : i % bn];
    out[i] = OP == kAdd ? __fadd_rn(x, y) : OP == kSub ? __fsub_rn(x, y) : __fmul_rn(x, y);
  }
}

// ptrs [a, b, out] (f32); ints [n = numel(a), bn = numel(b) >= 1]; floats [].
template <BinaryOp OP>
cudaError_t launch_binary(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 2, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0], bn = args.ints[1];
  if (n < 0 || bn < 1 || n % bn) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const auto a = rmas::ptr<const float>(args, 0), b = rmas::ptr<const float>(args, 1);
  const auto out = rmas::ptr<float>(args, 2);
  if (n < (int64_t{1} << 31)) {
    binary_kernel<OP, uint32_t><<<grid_for(n, kThreads), kThreads, 0, args.stream>>>(a, b, out, static_cast<uint32_t>(n),
                                                                                      static_cast<uint32_t>(bn));
  } else {
    binary_kernel<OP, int64_t><<<grid_for(n, kThreads), kThreads, 0, args.stream>>>(a, b, out, n, bn);
  }
  return cudaGetLastError();
}

// out[i] = alpha * a[i] + beta in f64 (two roundings, no fma), like the CPU reference
__global__ void scale_kernel(const float* __restrict__ a, float* __restrict__ out, int64_t n, double alpha, double beta) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<float>(__dadd_rn(__dmul_rn(alpha, static_cast<double>(a[i])), beta));
  }
}

// ptrs [a, out] (f32); ints [n]; floats [alpha, beta].
cudaError_t launch_scale(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 2, 1, 2)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0];
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  scale_kernel<<<grid_for(n, kThreads), kThreads, 0, args.stream>>>(rmas::ptr<const float>(args, 0), rmas::ptr<float>(args, 1), n,
                                                                     args.floats[0], args.floats[1]);
  return cudaGetLastError();
}

// Thread per column c of segment s (blockIdx.y): sums rows [s * seg, min(rows, (s + 1) * seg)) in row
// order into dst[s * cols + c]. With one segment this is the CPU's own order, so the result is bit-equal.
__global__ void sum_rows_kernel(const float* __restrict__ a, float* __restrict__ dst, int64_t rows, int64_t cols, int64_t seg) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * seg;
  const int64_t r1 = min(rows, r0 + seg);
  float s = 0.f;
  for (int64_t r = r0; r < r1; r++) s = __fadd_rn(s, a[r * cols + c]);
  dst[static_cast<int64_t>(blockIdx.y) * cols + c] = s;
}

// ptrs [a, out, partials] (f32; partials holds segs * cols values, 0 when segs == 1);
// ints [rows, cols, segs] with 1 <= segs <= 65535 (segs = 1 gives the CPU's exact sum); floats [].
// out[c] = sum over rows of a[r * cols + c]; rows == 0 writes zeros.
cudaError_t launch_sum_rows(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 3, 0)) return cudaErrorInvalidValue;
  const int64_t rows = args.ints[0], cols = args.ints[1], segs = args.ints[2];
  if (rows < 0 || cols < 0 || segs < 1 || segs > 65535 || (segs > 1 && args.ptrs[2] == 0)) return cudaErrorInvalidValue;
  if (cols == 0) return cudaSuccess;
  const auto a = rmas::ptr<const float>(args, 0);
  const auto out = rmas::ptr<float>(args, 1);
  const int64_t seg = segs == 1 ? rows : (rows + segs - 1) / segs;
  const unsigned bx = static_cast<unsigned>((cols + kThreads - 1) / kThreads);
  if (segs == 1) {
    sum_rows_kernel<<<dim3(bx, 1), kThreads, 0, args.stream>>>(a, out, rows, cols, seg);
  } else {
    const auto part = rmas::ptr<float>(args, 2);
    sum_rows_kernel<<<dim3(bx, static_cast<unsigned>(segs)), kThreads, 0, args.stream>>>(a, part, rows, cols, seg);
    sum_rows_kernel<<<dim3(bx, 1), kThreads, 0, args.stream>>>(part, out, segs, cols, segs);
  }
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("binary_add", launch_binary<kAdd>);
RMAS_KERNEL("binary_sub", launch_binary<kSub>);
RMAS_KERNEL("binary_mul", launch_binary<kMul>);
RMAS_KERNEL("scale", launch_scale);
RMAS_KERNEL("sum_rows", launch_sum_rows);
