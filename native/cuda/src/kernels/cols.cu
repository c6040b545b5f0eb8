// Column ops on f32 tensors seen as rows x columns (the last dim): sliceCols and concatCols, one thread per output
// element; the semantics are src/kernels/cols/cpu.ts.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::grid_for;
constexpr int kThreads = 256;
// as src/kernels/cols/index.ts MAX_CONCAT_COLS (WebGPU's 8 storage buffers a stage, less the output, less one spare)
constexpr int kMaxParts = 6;

#define GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void slice_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t R, int64_t C, int64_t start, int64_t W) {
  GRID_STRIDE(i, R * W) out[i] = x[(i / W) * C + start + i % W];
}

/** The inputs of one concat, passed by value. */
struct Parts {
  const float* p[kMaxParts];
  int64_t w[kMaxParts];
  int n;
};

__global__ void concat_kernel(Parts parts, float* __restrict__ out, int64_t R, int64_t C) {
  GRID_STRIDE(i, R * C) {
    const int64_t r = i / C;
    int64_t col = i % C;
    int k = 0;
    while (k < parts.n - 1 && col >= parts.w[k]) col -= parts.w[k++];  // the last part takes what is left
    out[i] = parts.p[k][r * parts.w[k] + col];
  }
}

// "slice_cols": ptrs [x f32 [R, C], out f32 [R, W]]; ints [R, C, start, W]: out = x columns [start, start + W); floats [].
cudaError_t launch_slice(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 4, 0)) return cudaErrorInvalidValue;
  const int64_t R = a.ints[0], C = a.ints[1], start = a.ints[2], W = a.ints[3];
  if (R < 0 || C < 0 || start < 0 || W < 0 || start + W > C) return cudaErrorInvalidValue;
  if (R * W == 0) return cudaSuccess;
  slice_kernel<<<grid_for(R * W, kThreads), kThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<float>(a, 1), R, C, start, W);
  return cudaGetLastError();
}

// "concat_cols": ptrs [out f32 [R, sum w_k], p_0 f32 [R, w_0], ..., p_{n-1}] with 1 <= n <= 6; ints [R, w_0, ..., w_{n-1}];
// floats []. The inputs' rows side by side, in order.
cudaError_t launch_concat(const rmas::LaunchArgs& a) {
  const int n = a.nptrs - 1;
  if (n < 1 || n > kMaxParts || a.nints != n + 1 || a.nfloats != 0) return cudaErrorInvalidValue;
  const int64_t R = a.ints[0];
  if (R < 0) return cudaErrorInvalidValue;
  Parts parts{};
  parts.n = n;
  int64_t C = 0;
  for (int k = 0; k < n; k++) {
    parts.p[k] = rmas::ptr<const float>(a, 1 + k);
    parts.w[k] = a.ints[1 + k];
    if (parts.w[k] < 0) return cudaErrorInvalidValue;
    C += parts.w[k];
  }
  if (R * C == 0) return cudaSuccess;
  concat_kernel<<<grid_for(R * C, kThreads), kThreads, 0, a.stream>>>(parts, rmas::ptr<float>(a, 0), R, C);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("slice_cols", launch_slice);
RMAS_KERNEL("concat_cols", launch_concat);
