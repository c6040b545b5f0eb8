// cast: storage conversion to f32, f16 or bf16 from f32, f16, bf16, q8_0 or q4_0 (dequantized); the same
// dtype copies the bytes. The semantics are src/kernels/cast/cpu.ts; conversions are done on bits
// (storage_bits.cuh), so results equal formats/dtype.ts bit for bit.
#include "../registry.h"
#include "rowops.cuh"
#include "storage_bits.cuh"

namespace {

using rmas::rows::grid_for;
namespace bits = rmas::bits;
constexpr int kThreads = 256;

#define GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <int64_t FROM, int64_t TO>
__global__ void cast_kernel(const void* __restrict__ x, void* __restrict__ out, int64_t n, int64_t cols) {
  GRID_STRIDE(i, n) {
    const uint32_t v = __float_as_uint(bits::load_value<FROM>(x, cols, i));
    if (TO == rmas::F32) static_cast<uint32_t*>(out)[i] = v;
    else static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(TO == rmas::F16 ? bits::f32_to_f16(v) : bits::f32_to_bf16(v));
  }
}

template <typename T>
__global__ void copy_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t n) {
  GRID_STRIDE(i, n) dst[i] = src[i];
}

template <int64_t FROM>
cudaError_t launch_from(const rmas::LaunchArgs& args, int64_t to, int64_t n, int64_t cols) {
  const void* x = rmas::ptr<const void>(args, 0);
  void* out = rmas::ptr<void>(args, 1);
  const unsigned grid = grid_for(n, kThreads);
  switch (to) {
    case rmas::F32: cast_kernel<FROM, rmas::F32><<<grid, kThreads, 0, args.stream>>>(x, out, n, cols); break;
    case rmas::F16: cast_kernel<FROM, rmas::F16><<<grid, kThreads, 0, args.stream>>>(x, out, n, cols); break;
    case rmas::BF16: cast_kernel<FROM, rmas::BF16><<<grid, kThreads, 0, args.stream>>>(x, out, n, cols); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// ptrs [x, out]; ints [n (elements), cols (last dim; 1 for a scalar), from, to (DType codes), bytes (of x)];
// floats []. from == to copies `bytes` bytes (any dtype); otherwise to is f32 | f16 | bf16 and from is
// f32 | f16 | bf16 | q8_0 | q4_0 (quantized: cols a multiple of 32).
cudaError_t launch_cast(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 2, 5, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0], cols = args.ints[1], from = args.ints[2], to = args.ints[3], bytes = args.ints[4];
  if (n < 0 || cols < 0 || bytes < 0) return cudaErrorInvalidValue;
  if (from == to) {
    if (bytes == 0) return cudaSuccess;
    const auto s = args.ptrs[0], d = args.ptrs[1];
    if (!(bytes & 3) && !(s & 3) && !(d & 3)) {
      copy_kernel<<<grid_for(bytes / 4, kThreads), kThreads, 0, args.stream>>>(rmas::ptr<const uint32_t>(args, 0),
                                                                               rmas::ptr<uint32_t>(args, 1), bytes / 4);
    } else {
      copy_kernel<<<grid_for(bytes, kThreads), kThreads, 0, args.stream>>>(rmas::ptr<const uint8_t>(args, 0), rmas::ptr<uint8_t>(args, 1),
                                                                           bytes);
    }
    return cudaGetLastError();
  }
  if (n == 0) return cudaSuccess;
  switch (from) {
    case rmas::F32: return launch_from<rmas::F32>(args, to, n, cols);
    case rmas::F16: return launch_from<rmas::F16>(args, to, n, cols);
    case rmas::BF16: return launch_from<rmas::BF16>(args, to, n, cols);
    case rmas::Q8_0: return cols % bits::kQK || cols == 0 ? cudaErrorInvalidValue : launch_from<rmas::Q8_0>(args, to, n, cols);
    case rmas::Q4_0: return cols % bits::kQK || cols == 0 ? cudaErrorInvalidValue : launch_from<rmas::Q4_0>(args, to, n, cols);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

RMAS_KERNEL("cast", launch_cast);
