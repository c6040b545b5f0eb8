// Row ops on f32 tensors: sliceRows, concatRows and placeRows, all copies of whole dim-0 rows; the
// semantics are src/kernels/rows/cpu.ts. Offsets and counts are in elements (rows x row elements), so the
// kernels see flat copies; 16-byte vectors where both sides are aligned alike.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::grid_for;
constexpr int kThreads = 256;

#define GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

__global__ void copy_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = src[i];
}

__global__ void copy4_kernel(const float4* __restrict__ src, float4* __restrict__ dst, int64_t n4) {
  GRID_STRIDE(i, n4) dst[i] = src[i];
}

/** dst[0, n) = src[0, n) on `stream`. */
cudaError_t copy_floats(const float* src, float* dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const auto sa = reinterpret_cast<uintptr_t>(src), da = reinterpret_cast<uintptr_t>(dst);
  int64_t head = 0;
  if ((sa & 15) == (da & 15) && !(sa & 3)) {
    head = static_cast<int64_t>(((16 - (sa & 15)) & 15) / 4);  // scalars before both reach 16 bytes
    if (head > n) head = n;
    const int64_t n4 = (n - head) / 4;
    if (n4 > 0) copy4_kernel<<<grid_for(n4, kThreads), kThreads, 0, stream>>>(reinterpret_cast<const float4*>(src + head),
                                                                               reinterpret_cast<float4*>(dst + head), n4);
    const int64_t done = head + 4 * n4;
    if (done < n) copy_kernel<<<1, kThreads, 0, stream>>>(src + done, dst + done, n - done);
    if (head > 0) copy_kernel<<<1, kThreads, 0, stream>>>(src, dst, head);
    return cudaGetLastError();
  }
  copy_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, dst, n);
  return cudaGetLastError();
}

// ptrs [x, out] (f32); ints [count, offset]: out[0, count) = x[offset, offset + count), count = n rows x row
// elements, offset = start x row elements; floats [].
cudaError_t launch_slice_rows(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 2, 2, 0)) return cudaErrorInvalidValue;
  const int64_t count = args.ints[0], offset = args.ints[1];
  if (count < 0 || offset < 0) return cudaErrorInvalidValue;
  return copy_floats(rmas::ptr<const float>(args, 0) + offset, rmas::ptr<float>(args, 1), count, args.stream);
}

// ptrs [out, x_0, ..., x_{k-1}] (f32); ints [count_0, ..., count_{k-1}] (elements of each input, rows x row
// elements); floats []. The inputs are copied one after another into out.
cudaError_t launch_concat_rows(const rmas::LaunchArgs& args) {
  const int k = args.nptrs - 1;
  if (k < 1 || args.nints != k || args.nfloats != 0) return cudaErrorInvalidValue;
  for (int i = 0; i < k; i++) {
    if (args.ints[i] < 0) return cudaErrorInvalidValue;
  }
  float* out = rmas::ptr<float>(args, 0);
  int64_t at = 0;
  for (int i = 0; i < k; i++) {
    const cudaError_t e = copy_floats(rmas::ptr<const float>(args, 1 + i), out + at, args.ints[i], args.stream);
    if (e != cudaSuccess) return e;
    at += args.ints[i];
  }
  return cudaSuccess;
}

// out[i] = g[i - offset] inside [offset, offset + count), 0 elsewhere: one pass writes every element
__global__ void place_kernel(const float* __restrict__ g, float* __restrict__ out, int64_t total, int64_t offset, int64_t count) {
  GRID_STRIDE(i, total) {
    const int64_t j = i - offset;
    out[i] = j >= 0 && j < count ? g[j] : 0.f;
  }
}

// ptrs [g, out] (f32); ints [total, offset, count]: out has total elements (rows x row elements), g's count
// elements go at element offset (start x row elements), zeros elsewhere; floats [].
cudaError_t launch_place_rows(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 2, 3, 0)) return cudaErrorInvalidValue;
  const int64_t total = args.ints[0], offset = args.ints[1], count = args.ints[2];
  if (total < 0 || offset < 0 || count < 0 || offset + count > total) return cudaErrorInvalidValue;
  if (total == 0) return cudaSuccess;
  place_kernel<<<grid_for(total, kThreads), kThreads, 0, args.stream>>>(rmas::ptr<const float>(args, 0), rmas::ptr<float>(args, 1), total,
                                                                        offset, count);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("slice_rows", launch_slice_rows);
RMAS_KERNEL("concat_rows", launch_concat_rows);
RMAS_KERNEL("place_rows", launch_place_rows);
