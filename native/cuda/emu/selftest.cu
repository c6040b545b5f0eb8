// The emulator's self-test kernels: built into the emulator only (scripts/build-cuda-emu.mjs compiles
// native/cuda/emu/*.cu; the nvcc build never sees this file), registered as "emu_selftest_*", and
// launched by test/cuda-emu-runtime.test.ts. Each is either a correct reference or a deliberate bug of
// the kind the emulator claims to catch (emu.h, runtime.cc), so that the test proves the check fires:
//
//   emu_selftest_block_sum          correct: shared memory + __syncthreads + __shfl_xor_sync block sum
//   emu_selftest_divergent_barrier  BUG: __syncthreads in a branch half the warp skips     -> barrier deadlock
//   emu_selftest_exited_lanes       BUG: half the lanes return before a full-mask shuffle  -> exited lanes
//   emu_selftest_write_past_end     BUG: `i <= n` writes one element past the output       -> illegal address
//   emu_selftest_dyn_smem           64 KiB of dynamic shared memory, with or without the opt-in attribute
//   emu_selftest_copy               correct copy: shows that never-written memory reads as NaN (0xff)
//   emu_selftest_missing_sync       BUG (ints[0] = 0): a missing __syncthreads, exposed by RMAS_CUDA_EMU_ORDER
//   emu_selftest_split_barrier      BUG: if/else with a __syncthreads on each side             -> divergent barriers
//   emu_selftest_shared_unwritten   BUG (ints[0] = 0): reads a static __shared__ slot no thread wrote -> NaN
//   emu_selftest_read_at            reads src[i] for a given i: past the end (beyond the tail guard bytes) -> illegal address
//
// Every launch function returns cudaGetLastError(), as the addon's kernels do, so a failed launch
// throws from launch() with the runtime's code and reason.
#ifndef RMAS_CUDA_EMU
#error "selftest.cu is part of the CUDA emulator build only (scripts/build-cuda-emu.mjs)"
#endif

#include "registry.h"

namespace {

// ---- a correct reference: one block sums x[0, n) ----

// Each thread sums a strided slice, each warp reduces with an xor butterfly, lane 0 of every warp puts
// the warp's sum in shared memory, and after the barrier thread 0 adds the warp sums in warp order.
__global__ void block_sum_kernel(const float* x, float* out, int n) {
  __shared__ float warp_sums[32];
  float v = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
  for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int w = 0; w < int(blockDim.x >> 5); w++) s += warp_sums[w];
    out[0] = s;
  }
}

// ptrs [x, out (1 float)]; ints [n, threads]. One block of `threads` threads (2048 is over the limit:
// cudaErrorInvalidConfiguration; a count that is not a multiple of 32 makes the full-mask shuffle fail).
cudaError_t launch_block_sum(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 2, 0)) return cudaErrorInvalidValue;
  block_sum_kernel<<<1, static_cast<unsigned>(a.ints[1]), 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<float>(a, 1),
                                                                         static_cast<int>(a.ints[0]));
  return cudaGetLastError();
}

// ---- BUG: a divergent barrier ----

// Launched with one warp. Lanes 0..15 wait at __syncthreads, which lanes 16..31 skip to go on to the
// warp reduction, where they wait for lanes 0..15: neither barrier can complete. On a GPU this hangs (or
// silently misbehaves); the emulator reports "barrier deadlock".
__global__ void divergent_barrier_kernel(const float* x, float* out) {
  float v = x[threadIdx.x];
  if (threadIdx.x < 16) __syncthreads();  // BUG: only half the block reaches this barrier
  for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
  if (threadIdx.x == 0) out[0] = v;
}

// ptrs [x (32 floats), out (1 float)]
cudaError_t launch_divergent_barrier(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 0, 0)) return cudaErrorInvalidValue;
  divergent_barrier_kernel<<<1, 32, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<float>(a, 1));
  return cudaGetLastError();
}

// ---- BUG: a full-mask shuffle after some lanes returned ----

// Launched with one warp. Lanes 16..31 return early; lanes 0..15 then shuffle with mask 0xffffffff,
// which names the exited lanes (undefined on a GPU). The emulator reports a shuffle over exited lanes.
__global__ void exited_lanes_kernel(const float* x, float* out) {
  if (threadIdx.x >= 16) return;  // BUG: these lanes are still in the shuffle's mask below
  float v = x[threadIdx.x];
  for (int k = 16; k > 0; k >>= 1) v += __shfl_xor_sync(0xffffffffu, v, k);
  if (threadIdx.x == 0) out[0] = v;
}

// ptrs [x (32 floats), out (1 float)]
cudaError_t launch_exited_lanes(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 0, 0)) return cudaErrorInvalidValue;
  exited_lanes_kernel<<<1, 32, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<float>(a, 1));
  return cudaGetLastError();
}

// ---- BUG: an off-by-one write ----

// out[i] = i for i in [0, n] -- one element too many: out has n floats. The write lands in the guard
// bytes after the allocation, so the launch fails with the sticky cudaErrorIllegalAddress.
__global__ void write_past_end_kernel(float* out, int n) {
  for (int i = threadIdx.x; i <= n; i += blockDim.x) out[i] = float(i);  // BUG: `<=` should be `<`
}

// ptrs [out (n floats)]; ints [n]
cudaError_t launch_write_past_end(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 1, 1, 0)) return cudaErrorInvalidValue;
  write_past_end_kernel<<<1, 64, 0, a.stream>>>(rmas::ptr<float>(a, 0), static_cast<int>(a.ints[0]));
  return cudaGetLastError();
}

// ---- dynamic shared memory over 48 KiB ----

// Fills `count` floats of dynamic shared memory with their index, then (after the barrier) writes them
// out reversed: out[i] = count - 1 - i. A template launched with explicit arguments, so the emulator
// sees the kernel's address and can match it with cudaFuncSetAttribute's.
template <typename T>
__global__ void dyn_smem_kernel(T* out, int count) {
  extern __shared__ T buf[];
  for (int i = threadIdx.x; i < count; i += blockDim.x) buf[i] = T(i);
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) out[i] = buf[count - 1 - i];
}

// ptrs [out (bytes / 4 floats)]; ints [bytes of dynamic shared memory, opt in (0 | 1)]. With opt in,
// cudaFuncSetAttribute(MaxDynamicSharedMemorySize, bytes) first, and its failure is returned (taken with
// cudaGetLastError: a failed runtime call stays the pending error, which the next launch would report).
cudaError_t launch_dyn_smem(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 1, 2, 0)) return cudaErrorInvalidValue;
  const int64_t bytes = a.ints[0];
  if (a.ints[1] &&
      cudaFuncSetAttribute(dyn_smem_kernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)) != cudaSuccess)
    return cudaGetLastError();
  dyn_smem_kernel<float><<<1, 256, static_cast<size_t>(bytes), a.stream>>>(rmas::ptr<float>(a, 0), static_cast<int>(bytes / 4));
  return cudaGetLastError();
}

// ---- a correct copy (for the poison check) ----

__global__ void copy_kernel(const float* src, float* dst, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}

// ptrs [src, dst]; ints [n]
cudaError_t launch_copy(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 1, 0)) return cudaErrorInvalidValue;
  const int n = static_cast<int>(a.ints[0]);
  copy_kernel<<<(n + 127) / 128 > 0 ? (n + 127) / 128 : 1, 128, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<float>(a, 1), n);
  return cudaGetLastError();
}

// ---- BUG: a missing barrier (a race the fiber order exposes) ----

// One warp. Thread 0 initialises the shared slot to -1, everybody syncs, then thread 31 stores 31 and
// thread 0 reads the slot. Without the second barrier (ints[0] = 0) thread 0's read races thread 31's
// write: in the emulator's default order thread 0 runs first after the barrier and reads -1; with
// RMAS_CUDA_EMU_ORDER=reverse thread 31 runs first and thread 0 reads 31. With the barrier (ints[0] = 1)
// both orders give 31.
__global__ void missing_sync_kernel(float* out, int fixed) {
  __shared__ float slot;
  if (threadIdx.x == 0) slot = -1.f;
  __syncthreads();
  if (threadIdx.x == 31) slot = 31.f;
  if (fixed) __syncthreads();  // uniform condition: the correct version; leaving it out is the BUG
  if (threadIdx.x == 0) out[0] = slot;
}

// ptrs [out (1 float)]; ints [fixed (0 | 1)]
cudaError_t launch_missing_sync(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 1, 1, 0)) return cudaErrorInvalidValue;
  missing_sync_kernel<<<1, 32, 0, a.stream>>>(rmas::ptr<float>(a, 0), static_cast<int>(a.ints[0]));
  return cudaGetLastError();
}

// ---- BUG: both sides of a branch hold a barrier ----

// Even and odd threads wait at two different __syncthreads. Every thread arrives at *a* barrier, so no
// count of arrivals can tell; the emulator compares where they were called from.
__global__ void split_barrier_kernel(float* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
    out[threadIdx.x] = 0.f;
  } else {
    __syncthreads();
    out[threadIdx.x] = 1.f;
  }
}

// ptrs [out (64 floats)]; ints []
cudaError_t launch_split_barrier(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 1, 0, 0)) return cudaErrorInvalidValue;
  split_barrier_kernel<<<1, 64, 0, a.stream>>>(rmas::ptr<float>(a, 0));
  return cudaGetLastError();
}

// ---- BUG: a static __shared__ array read before any thread of the block wrote it ----

// Two blocks of 32. With ints[0] = 1, thread t writes slot[t] before the barrier and reads slot[31 - t]
// after it; with ints[0] = 0 the writes are skipped: on a GPU the reads see whatever the previous block
// or kernel left, in the emulator 0xff (NaN) in every block, the second block included.
__global__ void shared_unwritten_kernel(float* out, int write) {
  __shared__ float slot[32];
  if (write) slot[threadIdx.x] = float(blockIdx.x * 32 + threadIdx.x);
  __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = slot[31 - threadIdx.x];
}

// ptrs [out (64 floats)]; ints [write (0 | 1)]
cudaError_t launch_shared_unwritten(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 1, 1, 0)) return cudaErrorInvalidValue;
  shared_unwritten_kernel<<<2, 32, 0, a.stream>>>(rmas::ptr<float>(a, 0), static_cast<int>(a.ints[0]));
  return cudaGetLastError();
}

// ---- a read at any index: in bounds a copy, far past the end the BUG an inaccessible page catches ----

__global__ void read_at_kernel(const float* src, float* out, long long i) { out[threadIdx.x] = src[i + threadIdx.x]; }

// ptrs [src, out (32 floats)]; ints [i]: 32 threads read src[i .. i + 31]
cudaError_t launch_read_at(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 1, 0)) return cudaErrorInvalidValue;
  read_at_kernel<<<1, 32, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<float>(a, 1), static_cast<long long>(a.ints[0]));
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("emu_selftest_read_at", launch_read_at);
RMAS_KERNEL("emu_selftest_split_barrier", launch_split_barrier);
RMAS_KERNEL("emu_selftest_shared_unwritten", launch_shared_unwritten);
RMAS_KERNEL("emu_selftest_block_sum", launch_block_sum);
RMAS_KERNEL("emu_selftest_divergent_barrier", launch_divergent_barrier);
RMAS_KERNEL("emu_selftest_exited_lanes", launch_exited_lanes);
RMAS_KERNEL("emu_selftest_write_past_end", launch_write_past_end);
RMAS_KERNEL("emu_selftest_dyn_smem", launch_dyn_smem);
RMAS_KERNEL("emu_selftest_copy", launch_copy);
RMAS_KERNEL("emu_selftest_missing_sync", launch_missing_sync);
