// AdamW over flat f32 buffers in place (torch.optim.AdamW, single-tensor path of torch 1.13; the
// reference is src/kernels/adamw/cpu.ts), and the in-place copy/add and fill that flat parameter
// buffers use. Element-wise, grid-stride over 64-bit indices. The update is computed in f64 (memory bound
// either way on A100/H100, whose f64 rate is half the f32 rate).
#include "../registry.h"
#include "rowops.cuh"

namespace {

constexpr int kThreads = 256;

struct AdamWScalars {
  double lrWd, b1, omb1, b2, omb2, stepSize, bc2sqrt, eps;
};

// Operation for operation the f64 reference (no contraction into FMAs), reading m and v back after
// their f32 store as the reference does, so a step rounds like the CPU backend's:
// p <- p (1 - lrWd mask); m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2; p <- p - stepSize m / (sqrt(v) / bc2sqrt + eps)
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v,
                             const float* __restrict__ mask, int64_t n, AdamWScalars s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double decay = mask ? __dmul_rn(s.lrWd, static_cast<double>(mask[i])) : s.lrWd;
    const double x = __dmul_rn(static_cast<double>(p[i]), __dsub_rn(1.0, decay));
    const double gi = g[i];
    const float mi = static_cast<float>(__dadd_rn(__dmul_rn(s.b1, static_cast<double>(m[i])), __dmul_rn(s.omb1, gi)));
    const float vi = static_cast<float>(__dadd_rn(__dmul_rn(s.b2, static_cast<double>(v[i])), __dmul_rn(__dmul_rn(s.omb2, gi), gi)));
    m[i] = mi;
    v[i] = vi;
    const double den = __dadd_rn(__ddiv_rn(__dsqrt_rn(static_cast<double>(vi)), s.bc2sqrt), s.eps);
    p[i] = static_cast<float>(__dsub_rn(x, __ddiv_rn(__dmul_rn(s.stepSize, static_cast<double>(mi)), den)));
  }
}

__global__ void assign_kernel(float* __restrict__ dst, const float* __restrict__ src, int64_t n, int add) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = add ? dst[i] + src[i] : src[i];
  }
}

__global__ void fill_kernel(float* __restrict__ dst, int64_t n, float value) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = value;
  }
}

// "adamw": ptrs [params f32 [n], grads f32 [n], m f32 [n], v f32 [n], decayMask f32 [n] or 0] (params, m, v updated
// in place); ints [n, hasMask]; floats [lr * weightDecay, beta1, 1 - beta1, beta2, 1 - beta2, lr / (1 - beta1^t),
// sqrt(1 - beta2^t), eps] (the per-step scalars computed once in f64 on the host, as adamwScalars does;
// kept in f64 here: the update is evaluated in f64 like the reference, then stored as f32).
cudaError_t launch_adamw(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 5, 2, 8)) return cudaErrorInvalidValue;
  const int64_t n = a.ints[0];
  const bool hasMask = a.ints[1] != 0;
  if (n < 0 || (hasMask && !a.ptrs[4])) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const double* f = a.floats;
  const AdamWScalars s{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]};
  adamw_kernel<<<rmas::rows::grid_for(n, kThreads), kThreads, 0, a.stream>>>(
      rmas::ptr<float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<float>(a, 2), rmas::ptr<float>(a, 3),
      hasMask ? rmas::ptr<const float>(a, 4) : nullptr, n, s);
  return cudaGetLastError();
}

// "assign": ptrs [dst f32 [n], src f32 [n]]; ints [n, add (0: dst <- src, 1: dst += src)]; floats [].
cudaError_t launch_assign(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 2, 0)) return cudaErrorInvalidValue;
  const int64_t n = a.ints[0];
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  assign_kernel<<<rmas::rows::grid_for(n, kThreads), kThreads, 0, a.stream>>>(rmas::ptr<float>(a, 0), rmas::ptr<const float>(a, 1), n,
                                                                             a.ints[1] != 0);
  return cudaGetLastError();
}

// "fill": ptrs [dst f32 [n]]; ints [n]; floats [value].
cudaError_t launch_fill(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 1, 1, 1)) return cudaErrorInvalidValue;
  const int64_t n = a.ints[0];
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  fill_kernel<<<rmas::rows::grid_for(n, kThreads), kThreads, 0, a.stream>>>(rmas::ptr<float>(a, 0), n, static_cast<float>(a.floats[0]));
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("adamw", launch_adamw);
RMAS_KERNEL("assign", launch_assign);
RMAS_KERNEL("fill", launch_fill);
