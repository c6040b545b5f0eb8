// The contract between the addon (addon.cc) and the CUDA kernel files (kernels/*.cu).
//
// Every kernel file registers launch functions by name with RMAS_KERNEL; the addon's launch(name, ptrs,
// ints, floats) looks the name up and calls the function on the backend's stream. A launch function
// checks its argument counts (return cudaErrorInvalidValue on a mismatch), enqueues its work on
// args.stream and returns the launch status (cudaGetLastError()); it never synchronizes.
//
// Conventions: tensors are row-major and contiguous; ptrs are device addresses of element 0; ints are
// shapes, strides, flags and dtype codes (DType below); floats are scalars (eps, scales, ...), passed
// as double and narrowed by the kernel. f16/bf16 are IEEE half / bfloat16 bits as stored by
// src/formats/dtype.ts; q8_0/q4_0 use dtype.ts's row layout too (per row: the quantized bytes of its
// 32-value blocks first, then the blocks' f16 scales, padded to 4 bytes), not GGML's interleaved blocks.
#pragma once
#include <cuda_runtime.h>
#include <cstdint>

namespace rmas {

/** Storage dtypes, as the TypeScript side (src/tensor/cuda.ts) encodes them in ints. */
enum DType : int64_t { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3, Q4_0 = 4, I32 = 5 };

struct LaunchArgs {
  cudaStream_t stream;
  const uint64_t* ptrs;
  int nptrs;
  const int64_t* ints;
  int nints;
  const double* floats;
  int nfloats;
  /** Compute capability of the current device (8.0 = A100, 9.0 = H100/H200). */
  int cc_major;
  int cc_minor;
};

using KernelFn = cudaError_t (*)(const LaunchArgs&);

/** Registers `fn` under `name` at load time (static initialisation of the addon). */
struct KernelRegistrar {
  KernelRegistrar(const char* name, KernelFn fn);
};

/** The launch function registered under `name`, or nullptr. */
KernelFn find_kernel(const char* name);

/** Calls visit(name, user) for every registered kernel, in name order. */
void list_kernels(void (*visit)(const char* name, void* user), void* user);

/** Typed pointer from a launch argument. */
template <typename T>
inline T* ptr(const LaunchArgs& a, int i) { return reinterpret_cast<T*>(static_cast<uintptr_t>(a.ptrs[i])); }

/** True when the counts match; launch functions start with `if (!rmas::counts(a, 3, 2, 1)) return cudaErrorInvalidValue;`. */
inline bool counts(const LaunchArgs& a, int nptrs, int nints, int nfloats) {
  return a.nptrs == nptrs && a.nints == nints && a.nfloats == nfloats;
}

}  // namespace rmas

#define RMAS_CONCAT_(a, b) a##b
#define RMAS_CONCAT(a, b) RMAS_CONCAT_(a, b)
/** RMAS_KERNEL("rmsnorm", launch_rmsnorm); at namespace scope in a kernel file. */
#define RMAS_KERNEL(name, fn) static ::rmas::KernelRegistrar RMAS_CONCAT(rmas_registrar_, __LINE__)(name, fn)
