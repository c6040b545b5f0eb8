// embedding: rows of a [V, d] table (f32, f16, bf16, q8_0, q4_0) gathered by i32 ids into f32, and the
// scatter-add backward into a [V, d] f32 gradient; the semantics are src/kernels/embedding/cpu.ts.
// Out-of-range ids give zero rows and no gradient (the CPU reference throws; a kernel cannot).
//
// The backward is deterministic and sums each row's gradients in position order, exactly like the CPU
// loop, without float atomics: a counting sort by id (integer atomics only, whose results do not depend
// on order) puts every id's positions in a bucket; each position then finds its rank in its bucket by
// counting the smaller positions there (O(k^2) for a bucket of k, tiny for text), which sorts every bucket;
// finally one thread per output element (v, c) sums g over bucket v in that order and writes the total
// (0 for unused rows), so the output needs no clearing.
#include "../registry.h"
#include "rowops.cuh"
#include "storage_bits.cuh"

namespace {

using rmas::rows::grid_for;
namespace bits = rmas::bits;
constexpr int kThreads = 256;
constexpr int kScanThreads = 1024;

#define GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

template <int64_t DT>
__global__ void gather_kernel(const int32_t* __restrict__ ids, const void* __restrict__ table, float* __restrict__ out, int64_t n,
                              int64_t V, int64_t d) {
  GRID_STRIDE(i, n * d) {
    const int64_t id = ids[i / d];
    const int64_t c = i % d;
    out[i] = id >= 0 && id < V ? bits::load_value<DT>(table, d, id * d + c) : 0.f;
  }
}

// ptrs [ids (i32), table, out (f32)]; ints [n = numel(ids), V, d, dtype (of table)]; floats [].
// out[t, :] = table[ids[t], :] decoded to f32; q8_0/q4_0 need d a multiple of 32.
cudaError_t launch_embedding(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 3, 4, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0], V = args.ints[1], d = args.ints[2], dtype = args.ints[3];
  if (n < 0 || V < 0 || d < 0) return cudaErrorInvalidValue;
  if ((dtype == rmas::Q8_0 || dtype == rmas::Q4_0) && d % bits::kQK) return cudaErrorInvalidValue;
  if (n == 0 || d == 0) return cudaSuccess;
  const auto ids = rmas::ptr<const int32_t>(args, 0);
  const void* table = rmas::ptr<const void>(args, 1);
  const auto out = rmas::ptr<float>(args, 2);
  const unsigned grid = grid_for(n * d, kThreads);
  switch (dtype) {
    case rmas::F32: gather_kernel<rmas::F32><<<grid, kThreads, 0, args.stream>>>(ids, table, out, n, V, d); break;
    case rmas::F16: gather_kernel<rmas::F16><<<grid, kThreads, 0, args.stream>>>(ids, table, out, n, V, d); break;
    case rmas::BF16: gather_kernel<rmas::BF16><<<grid, kThreads, 0, args.stream>>>(ids, table, out, n, V, d); break;
    case rmas::Q8_0: gather_kernel<rmas::Q8_0><<<grid, kThreads, 0, args.stream>>>(ids, table, out, n, V, d); break;
    case rmas::Q4_0: gather_kernel<rmas::Q4_0><<<grid, kThreads, 0, args.stream>>>(ids, table, out, n, V, d); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

__device__ __forceinline__ bool in_range(int32_t id, int64_t V) { return id >= 0 && static_cast<int64_t>(id) < V; }

__global__ void histogram_kernel(const int32_t* __restrict__ ids, int32_t* __restrict__ count, int64_t n, int64_t V) {
  GRID_STRIDE(i, n) {
    const int32_t id = ids[i];
    if (in_range(id, V)) atomicAdd(&count[id], 1);
  }
}

// One block: offsets[v] = sum of count[0, v), offsets[V] = the total; count is zeroed for reuse as the
// placement cursor. Thread t owns the contiguous slice [t per, (t + 1) per) of both arrays.
__global__ void scan_kernel(int32_t* __restrict__ count, int32_t* __restrict__ offsets, int64_t V) {
  __shared__ int32_t part[kScanThreads];
  const int64_t per = (V + blockDim.x - 1) / blockDim.x;
  const int64_t lo = min(V, threadIdx.x * per), hi = min(V, lo + per);
  int32_t s = 0;
  for (int64_t v = lo; v < hi; v++) s += count[v];
  part[threadIdx.x] = s;
  __syncthreads();
  // inclusive Hillis-Steele scan of the per-thread totals
  for (int k = 1; k < blockDim.x; k <<= 1) {
    const int32_t add = threadIdx.x >= k ? part[threadIdx.x - k] : 0;
    __syncthreads();
    part[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t run = part[threadIdx.x] - s;
  for (int64_t v = lo; v < hi; v++) {
    offsets[v] = run;
    run += count[v];
    count[v] = 0;
  }
  if (threadIdx.x == blockDim.x - 1) offsets[V] = part[threadIdx.x];
}

// bucket[offsets[id] + cursor] = position (in arbitrary order within a bucket)
__global__ void place_kernel(const int32_t* __restrict__ ids, const int32_t* __restrict__ offsets, int32_t* __restrict__ cursor,
                             int32_t* __restrict__ bucket, int64_t n, int64_t V) {
  GRID_STRIDE(i, n) {
    const int32_t id = ids[i];
    if (in_range(id, V)) bucket[offsets[id] + atomicAdd(&cursor[id], 1)] = static_cast<int32_t>(i);
  }
}

// sorted[offsets[id] + rank] = position, rank = positions of the same id before it: buckets in position order
__global__ void rank_kernel(const int32_t* __restrict__ ids, const int32_t* __restrict__ offsets, const int32_t* __restrict__ bucket,
                            int32_t* __restrict__ sorted, int64_t n, int64_t V) {
  GRID_STRIDE(i, n) {
    const int32_t id = ids[i];
    if (!in_range(id, V)) continue;
    const int32_t b = offsets[id], e = offsets[id + 1];
    int32_t rank = 0;
    for (int32_t s = b; s < e; s++) rank += bucket[s] < i;
    sorted[b + rank] = static_cast<int32_t>(i);
  }
}

// out[v, c] = sum of g[p, c] over the positions p of bucket v, in position order (0 for an empty bucket)
__global__ void scatter_kernel(const int32_t* __restrict__ offsets, const int32_t* __restrict__ sorted, const float* __restrict__ g,
                               float* __restrict__ out, int64_t V, int64_t d) {
  GRID_STRIDE(i, V * d) {
    const int64_t v = i / d, c = i % d;
    const int32_t b = offsets[v], e = offsets[v + 1];
    float s = 0.f;
    for (int32_t k = b; k < e; k++) s = __fadd_rn(s, g[static_cast<int64_t>(sorted[k]) * d + c]);
    out[i] = s;
  }
}

// ptrs [ids (i32), g (f32 [n, d]), out (f32 [V, d]), work (i32 scratch of 2 V + 1 + 2 n values)];
// ints [n = numel(ids) < 2^31, V < 2^31, d]; floats []. Every element of out is written.
cudaError_t launch_embedding_backward(const rmas::LaunchArgs& args) {
  if (!rmas::counts(args, 4, 3, 0)) return cudaErrorInvalidValue;
  const int64_t n = args.ints[0], V = args.ints[1], d = args.ints[2];
  if (n < 0 || V < 0 || d < 0 || n >= (int64_t{1} << 31) || V >= (int64_t{1} << 31) || args.ptrs[3] == 0) return cudaErrorInvalidValue;
  if (V == 0 || d == 0) return cudaSuccess;
  const auto ids = rmas::ptr<const int32_t>(args, 0);
  const auto g = rmas::ptr<const float>(args, 1);
  const auto out = rmas::ptr<float>(args, 2);
  int32_t* count = rmas::ptr<int32_t>(args, 3);
  int32_t* offsets = count + V;
  int32_t* bucket = offsets + V + 1;
  int32_t* sorted = bucket + n;
  cudaError_t e = cudaMemsetAsync(count, 0, static_cast<size_t>(V) * sizeof(int32_t), args.stream);
  if (e != cudaSuccess) return e;
  if (n > 0) histogram_kernel<<<grid_for(n, kThreads), kThreads, 0, args.stream>>>(ids, count, n, V);
  scan_kernel<<<1, kScanThreads, 0, args.stream>>>(count, offsets, V);
  if (n > 0) {
    place_kernel<<<grid_for(n, kThreads), kThreads, 0, args.stream>>>(ids, offsets, count, bucket, n, V);
    rank_kernel<<<grid_for(n, kThreads), kThreads, 0, args.stream>>>(ids, offsets, bucket, sorted, n, V);
  }
  scatter_kernel<<<grid_for(V * d, kThreads), kThreads, 0, args.stream>>>(offsets, sorted, g, out, V, d);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("embedding", launch_embedding);
RMAS_KERNEL("embedding_backward", launch_embedding_backward);
