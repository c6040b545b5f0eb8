// Activations on f32 tensors, forward and backward: SiLU, exact (erf) GELU, tanh GELU and SwiGLU; the
// semantics are src/kernels/activation/cpu.ts. f32 math with the CPU's overflow-free forms: σ from
// exp(-|x|), GELU's Φ from erf near zero and erfc in the tails (no 1 - erfc cancellation), tanh GELU
// as x·σ(2u) with x clamped inside u (σ has saturated long before |x| = 30).
#include <type_traits>

#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::grid_for;
constexpr int kThreads = 256;

/** Activation codes in ints (src/kernels/activation/index.ts ACTIVATION_CODE). */
enum Act : int64_t { kSilu = 0, kGelu = 1, kGeluTanh = 2, kTanh = 3, kSigmoid = 4, kSoftplus = 5, kExp = 6 };

__device__ __forceinline__ float sigmoid(float x) {
  const float e = expf(-fabsf(x));
  const float s = 1.f / (1.f + e);
  return x >= 0.f ? s : e * s;
}

// Φ(x) = 0.5·(1 + erf(x/√2))
__device__ __forceinline__ float phi_cdf(float x) {
  const float z = x * 0.70710678118654752f;
  if (fabsf(z) < 0.75f) return 0.5f + 0.5f * erff(z);
  return z > 0.f ? 1.f - 0.5f * erfcf(z) : 0.5f * erfcf(-z);
}

__device__ __forceinline__ float tanh_u2(float x) {
  const float c = fminf(fmaxf(x, -30.f), 30.f);
  return 1.5957691216057308f * (c + 0.044715f * c * c * c);
}

template <int64_t A>
__device__ __forceinline__ float act_f(float x) {
  if (A == kSilu) return x * sigmoid(x);
  if (A == kGelu) return x * phi_cdf(x);
  if (A == kTanh) return tanhf(x);
  if (A == kSigmoid) return sigmoid(x);
  if (A == kSoftplus) return x > 20.f ? x : log1pf(expf(x));  // PyTorch's threshold 20
  if (A == kExp) return expf(x);
  return x * sigmoid(tanh_u2(x));
}

template <int64_t A>
__device__ __forceinline__ float act_df(float x) {
  if (A == kSilu) return sigmoid(x) * (1.f + x * sigmoid(-x));
  if (A == kTanh) {
    const float t = tanhf(x);
    return 1.f - t * t;
  }
  if (A == kSigmoid) return sigmoid(x) * sigmoid(-x);
  if (A == kSoftplus) return x > 20.f ? 1.f : sigmoid(x);
  if (A == kExp) return expf(x);
  if (A == kGelu) {
    const float c = fminf(fabsf(x), 20.f);  // the density has underflowed long before; keeps c² finite
    return phi_cdf(x) + x * 0.39894228040143268f * expf(-0.5f * c * c);
  }
  const float u2 = tanh_u2(x);
  const float s = sigmoid(u2);
  const float c = fminf(fmaxf(x, -30.f), 30.f);
  return s + x * s * sigmoid(-u2) * 1.5957691216057308f * (1.f + 0.134145f * c * c);
}

#define GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Calls launch(std::integral_constant<int64_t, A>{}) for the activation code `op`: the one list of codes the four
// launchers below share. An unknown code is an invalid value.
template <typename F>
cudaError_t by_act(int64_t op, F&& launch) {
  switch (op) {
    case kSilu: launch(std::integral_constant<int64_t, kSilu>{}); break;
    case kGelu: launch(std::integral_constant<int64_t, kGelu>{}); break;
    case kGeluTanh: launch(std::integral_constant<int64_t, kGeluTanh>{}); break;
    case kTanh: launch(std::integral_constant<int64_t, kTanh>{}); break;
    case kSigmoid: launch(std::integral_constant<int64_t, kSigmoid>{}); break;
    case kSoftplus: launch(std::integral_constant<int64_t, kSoftplus>{}); break;
    case kExp: launch(std::integral_constant<int64_t, kExp>{}); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <int64_t A>
__global__ void activation_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = act_f<A>(x[i]);
}

template <int64_t A>
__global__ void activation_backward_kernel(const float* __restrict__ x, const float* __restrict__ g, float* __restrict__ dx, int64_t n) {
  GRID_STRIDE(i, n) dx[i] = g[i] * act_df<A>(x[i]);
}

// ptrs [x, out] (f32); ints [n, op] (op: 0 silu, 1 gelu, 2 gelu_tanh, 3 tanh, 4 sigmoid, 5 softplus, 6 exp); floats [].
cudaError_t launch_activation(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 2, 2, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0], op = args.ints[1];
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const auto x = rmas::ptr<const float>(args, 0);
  const auto out = rmas::ptr<float>(args, 1);
  const unsigned grid = grid_for(n, kThreads);
  return by_act(op, [&](auto a) { activation_kernel<decltype(a)::value><<<grid, kThreads, 0, args.stream>>>(x, out, n); });
}

// ptrs [x, g, dx] (f32; x is the forward input); ints [n, op]; floats []. dx = g·f'(x).
cudaError_t launch_activation_backward(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 2, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0], op = args.ints[1];
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const auto x = rmas::ptr<const float>(args, 0), g = rmas::ptr<const float>(args, 1);
  const auto dx = rmas::ptr<float>(args, 2);
  const unsigned grid = grid_for(n, kThreads);
  return by_act(op, [&](auto a) { activation_backward_kernel<decltype(a)::value><<<grid, kThreads, 0, args.stream>>>(x, g, dx, n); });
}

template <int64_t A>
__global__ void glu_kernel(const float* __restrict__ gate, const float* __restrict__ up, float* __restrict__ out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = act_f<A>(gate[i]) * up[i];
}

// dgate = g·up·act'(gate), dup = g·act(gate); either output may be null
template <int64_t A>
__global__ void glu_backward_kernel(const float* __restrict__ gate, const float* __restrict__ up, const float* __restrict__ g,
                                    float* __restrict__ dgate, float* __restrict__ dup, int64_t n) {
  GRID_STRIDE(i, n) {
    const float x = gate[i];
    if (dgate) dgate[i] = g[i] * up[i] * act_df<A>(x);
    if (dup) dup[i] = g[i] * act_f<A>(x);
  }
}

// "glu": act(gate)·up (SwiGLU with act silu, GeGLU with gelu_tanh). ptrs [gate, up, out] (f32); ints [n, act]; floats [].
cudaError_t launch_glu(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 2, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0];
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const auto gate = rmas::ptr<const float>(args, 0);
  const auto up = rmas::ptr<const float>(args, 1);
  const auto out = rmas::ptr<float>(args, 2);
  const unsigned grid = grid_for(n, kThreads);
  return by_act(args.ints[1], [&](auto a) { glu_kernel<decltype(a)::value><<<grid, kThreads, 0, args.stream>>>(gate, up, out, n); });
}

// ptrs [gate, up, g, dgate or 0, dup or 0] (f32); ints [n, act]; floats [].
cudaError_t launch_glu_backward(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 5, 2, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0];
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0 || (args.ptrs[3] == 0 && args.ptrs[4] == 0)) return cudaSuccess;
  const auto gate = rmas::ptr<const float>(args, 0);
  const auto up = rmas::ptr<const float>(args, 1);
  const auto g = rmas::ptr<const float>(args, 2);
  const auto dg = rmas::ptr<float>(args, 3);
  const auto du = rmas::ptr<float>(args, 4);
  const unsigned grid = grid_for(n, kThreads);
  return by_act(args.ints[1], [&](auto a) {
    glu_backward_kernel<decltype(a)::value><<<grid, kThreads, 0, args.stream>>>(gate, up, g, dg, du, n);
  });
}

}  // namespace

RMAS_KERNEL("activation", launch_activation);
RMAS_KERNEL("activation_backward", launch_activation_backward);
RMAS_KERNEL("glu", launch_glu);
RMAS_KERNEL("glu_backward", launch_glu_backward);
