// The causal depthwise conv1d of Qwen3.5's Gated DeltaNet and its backward to x and to w; the semantics are
// src/kernels/conv1d/cpu.ts: out[t, c] = sum_j w[c, j] * xs[t + j, c] with xs = state (K - 1 rows, or zeros) ++ x.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::grid_for;
constexpr int kThreads = 256;

#define GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void conv_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ state,
                            float* __restrict__ out, int64_t T, int64_t C, int64_t K) {
  GRID_STRIDE(i, T * C) {
    const int64_t t = i / C, c = i % C;
    float s = 0.f;
    for (int64_t j = 0; j < K; j++) {
      const int64_t u = t + j - (K - 1);  // x's row, or the state's row u + K - 1 when negative
      if (u >= 0) s += w[c * K + j] * x[u * C + c];
      else if (state) s += w[c * K + j] * state[(u + K - 1) * C + c];
    }
    out[i] = s;
  }
}

__global__ void conv_backward_kernel(const float* __restrict__ g, const float* __restrict__ w, float* __restrict__ dx,
                                     int64_t T, int64_t C, int64_t K) {
  GRID_STRIDE(i, T * C) {
    const int64_t u = i / C, c = i % C;
    float s = 0.f;
    for (int64_t j = 0; j < K; j++) {
      const int64_t t = u + K - 1 - j;
      if (t < T) s += w[c * K + j] * g[t * C + c];
    }
    dx[i] = s;
  }
}

__global__ void conv_backward_w_kernel(const float* __restrict__ g, const float* __restrict__ x, const float* __restrict__ state,
                                       float* __restrict__ dw, int64_t T, int64_t C, int64_t K) {
  GRID_STRIDE(i, C * K) {
    const int64_t c = i / K, j = i % K;
    float s = 0.f;
    for (int64_t t = 0; t < T; t++) {
      const int64_t u = t + j - (K - 1);
      if (u >= 0) s += g[t * C + c] * x[u * C + c];
      else if (state) s += g[t * C + c] * state[(u + K - 1) * C + c];
    }
    dw[i] = s;
  }
}

// "causal_conv1d": ptrs [x f32 [T, C], w f32 [C, K], state f32 [K - 1, C] or 0, out f32 [T, C]]; ints [T, C, K]; floats [].
cudaError_t launch_conv(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 3, 0)) return cudaErrorInvalidValue;
  const int64_t T = a.ints[0], C = a.ints[1], K = a.ints[2];
  if (T < 0 || C < 0 || K < 1) return cudaErrorInvalidValue;
  if (T * C == 0) return cudaSuccess;
  conv_kernel<<<grid_for(T * C, kThreads), kThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1),
                                                                  rmas::ptr<const float>(a, 2), rmas::ptr<float>(a, 3), T, C, K);
  return cudaGetLastError();
}

// "causal_conv1d_backward": ptrs [g f32 [T, C], w f32 [C, K], dx f32 [T, C]]; ints [T, C, K]; floats [].
cudaError_t launch_conv_backward(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 3, 3, 0)) return cudaErrorInvalidValue;
  const int64_t T = a.ints[0], C = a.ints[1], K = a.ints[2];
  if (T < 0 || C < 0 || K < 1) return cudaErrorInvalidValue;
  if (T * C == 0) return cudaSuccess;
  conv_backward_kernel<<<grid_for(T * C, kThreads), kThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1),
                                                                           rmas::ptr<float>(a, 2), T, C, K);
  return cudaGetLastError();
}

// "causal_conv1d_backward_w": ptrs [g f32 [T, C], x f32 [T, C], state f32 [K - 1, C] or 0, dw f32 [C, K]]; ints [T, C, K]; floats [].
cudaError_t launch_conv_backward_w(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 3, 0)) return cudaErrorInvalidValue;
  const int64_t T = a.ints[0], C = a.ints[1], K = a.ints[2];
  if (T < 0 || C < 0 || K < 1) return cudaErrorInvalidValue;
  if (C * K == 0) return cudaSuccess;
  conv_backward_w_kernel<<<grid_for(C * K, kThreads), kThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1),
                                                                             rmas::ptr<const float>(a, 2), rmas::ptr<float>(a, 3), T, C, K);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("causal_conv1d", launch_conv);
RMAS_KERNEL("causal_conv1d_backward", launch_conv_backward);
RMAS_KERNEL("causal_conv1d_backward_w", launch_conv_backward_w);
