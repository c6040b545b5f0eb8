// Rotary position embedding, half-split layout (GPT-NeoX / Hugging Face rotate_half); semantics in
// src/kernels/rope/cpu.ts. x [T, H, D]: dims i and i + half (i < half) rotate by pos[t] freq[i]; dims
// 2 half .. D pass through. The backward is the same launch with sign -1.
#include "../registry.h"
#include "rowops.cuh"

namespace {

// One thread per work item: W = D - half items per head (half rotated pairs, D - 2 half copies).
__global__ void rope_kernel(const float* __restrict__ x, const int32_t* __restrict__ pos, const float* __restrict__ freq,
                            float* __restrict__ out, int64_t n, int64_t heads, int64_t dim, int64_t half, double sign, double scale) {
  const int64_t w = dim - half;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t th = i / w;  // token * heads + head
    const int64_t j = i - th * w;
    const int64_t base = th * dim;
    if (j < half) {
      // the angle is the f32 product, as the reference (Math.fround(pos * freq)) and PyTorch round it;
      // cos/sin are evaluated in f64 on that f32 angle, like the reference, whatever the math flags
      const float angle = __fmul_rn(static_cast<float>(pos[th / heads]), freq[j]);
      double s, c;
      sincos(static_cast<double>(angle), &s, &c);
      // then the rotation in f64 without contraction, operation for operation as the reference
      c = __dmul_rn(c, scale);
      s = __dmul_rn(__dmul_rn(sign, s), scale);
      const double x0 = x[base + j], x1 = x[base + j + half];
      out[base + j] = static_cast<float>(__dsub_rn(__dmul_rn(x0, c), __dmul_rn(x1, s)));
      out[base + j + half] = static_cast<float>(__dadd_rn(__dmul_rn(x1, c), __dmul_rn(x0, s)));
    } else {
      out[base + j + half] = x[base + j + half];
    }
  }
}

// "rope": ptrs [x f32 [T, H, D], pos i32 [T], freq f32 [half], out f32 [T, H, D]];
// ints [T, H, D, half] (1 <= half, 2 half <= D); floats [sign (+1 forward, -1 backward), scale].
cudaError_t launch_rope(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 4, 2)) return cudaErrorInvalidValue;
  const int64_t T = a.ints[0], H = a.ints[1], D = a.ints[2], half = a.ints[3];
  if (T < 0 || H < 0 || half < 1 || 2 * half > D) return cudaErrorInvalidValue;
  const int64_t n = T * H * (D - half);
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  rope_kernel<<<rmas::rows::grid_for(n, kThreads), kThreads, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const int32_t>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<float>(a, 3), n, H, D,
      half, a.floats[0], a.floats[1]);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("rope", launch_rope);
