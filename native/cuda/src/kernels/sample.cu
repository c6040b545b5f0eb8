// Token selection, one block per row of logits: argmax, and the seeded sampler with temperature,
// top-k and top-p whose definition src/kernels/sample/cpu.ts writes out (the same seed picks the same
// token up to rounding at near-ties).
//
// Without a sort: values are compared through the order-preserving key of the f32 logit (rowops.cuh).
// Dividing by a temperature T > 0 keeps the order of distinct f32 values (the reference divides in
// f64), so thresholds are found on the logits' own keys, exactly, whatever T is. Thresholds come
// from an MSD radix select over the keys, 4 bits a pass: top-k counts (goal k), top-p sums the
// weights exp(z - max z) of the top-k set (goal p * their sum); each pass descends into the highest
// bin where the running total reaches the goal, so the result is the largest value whose count
// (mass) at or above it reaches the goal, the reference's t_k and t_p. Weights are exp of the f64
// difference rounded to f32; every sum is f64 in a fixed order (deterministic, close to the
// reference's f64 sums). The pick walks per-thread contiguous chunks, so the running sum is in
// index order like the reference's.
#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::order_key;
using rmas::rows::order_unkey;

constexpr int kArgmaxThreads = 256;
constexpr int kSampleThreads = 512;
constexpr int kBins = 16;
constexpr uint32_t kNone = 0xffffffffu;

/** PCG-RXS-M-XS 32-bit output hash, as pcgHash in cpu.ts (u32 arithmetic wraps like Math.imul). */
__device__ __forceinline__ uint32_t pcg(uint32_t v) {
  const uint32_t s = v * 747796405u + 2891336453u;
  const uint32_t w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
  return (w >> 22u) ^ w;
}

/** (key, index) a beats b: larger key, or the same key and a lower index; index kNone never wins. */
__device__ __forceinline__ bool beats(uint32_t ka, uint32_t ia, uint32_t kb, uint32_t ib) {
  if (ia == kNone) return false;
  if (ib == kNone) return true;
  return ka > kb || (ka == kb && ia < ib);
}

/** Best (key, index) of the block, returned to every thread. smem: 2 * kMaxWarps u32. */
__device__ __forceinline__ void block_best(uint32_t& k, uint32_t& i, uint32_t* smem) {
  for (int s = 16; s > 0; s >>= 1) {
    const uint32_t k2 = __shfl_xor_sync(0xffffffffu, k, s), i2 = __shfl_xor_sync(0xffffffffu, i, s);
    if (beats(k2, i2, k, i)) {
      k = k2;
      i = i2;
    }
  }
  const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    smem[2 * warp] = k;
    smem[2 * warp + 1] = i;
  }
  __syncthreads();
  k = smem[0];
  i = smem[1];
  for (int w = 1; w < nwarps; w++) {
    if (beats(smem[2 * w], smem[2 * w + 1], k, i)) {
      k = smem[2 * w];
      i = smem[2 * w + 1];
    }
  }
  __syncthreads();
}

// Largest value, lowest index among equal maxima (-0 equals +0); NaN is never picked; -1 when the
// row holds only NaN (argmaxRow in cpu.ts).
__global__ void argmax_kernel(const float* __restrict__ x, int32_t* __restrict__ ids, int64_t V) {
  __shared__ uint32_t red[2 * rmas::rows::kMaxWarps];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * V;
  uint32_t bk = 0, bi = kNone;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float v = row[i];
    if (isnan(v)) continue;
    const uint32_t k = order_key(v);
    if (bi == kNone || k > bk) {
      bk = k;
      bi = static_cast<uint32_t>(i);
    }
  }
  block_best(bk, bi, red);
  if (threadIdx.x == 0) ids[blockIdx.x] = bi == kNone ? -1 : static_cast<int32_t>(bi);
}

struct SampleParams {
  int64_t V;
  uint32_t topK;  // 0: off (also when >= V)
  double topP;    // >= 1: off
  double invT;    // 1 / temperature, temperature > 0
  uint32_t seed, step;
};

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(const float* __restrict__ x, int32_t* __restrict__ ids, SampleParams p) {
  __shared__ double red[kBins * rmas::rows::kMaxWarps];
  __shared__ double chunkBefore[kSampleThreads];
  __shared__ double chunkTotal;
  __shared__ int lastChunk;
  __shared__ uint32_t redU[2 * rmas::rows::kMaxWarps];
  const int t = threadIdx.x;
  const uint32_t row = blockIdx.x;
  const float* xr = x + static_cast<int64_t>(row) * p.V;

  // max key (NaN has key 0: it never is the max unless the row is all NaN, an unspecified case)
  uint32_t mk = 0, mi = kNone;
  for (int64_t i = t; i < p.V; i += blockDim.x) {
    const uint32_t k = order_key(xr[i]);
    if (mi == kNone || k > mk) {
      mk = k;
      mi = static_cast<uint32_t>(i);
    }
  }
  block_best(mk, mi, redU);
  const double xm = order_unkey(mk);
  // w = exp(z - max z) with z = x / T: the difference in f64 (x - max x is exact there), then exp in f32
  auto weight = [&](float v) { return expf(static_cast<float>((static_cast<double>(v) - xm) * p.invT)); };

  // radix select: passes 0-7 top-k (count, goal k), 8-15 top-p (mass over the top-k set, goal p * S)
  uint32_t floorKey = 0, prefix = 0;
  double acc = 0.0, goal = static_cast<double>(p.topK);
  const int first = p.topK == 0 ? 8 : 0;
  const int last = p.topP >= 1.0 ? 8 : 16;
  for (int it = first; it < last; it++) {
    const int ps = it & 7;
    const bool mass = it >= 8;
    if (it == 8) {
      floorKey = prefix;
      prefix = 0;
      acc = 0.0;
    }
    const int shift = 28 - 4 * ps;
    const uint32_t hiMask = ~(((1u << shift) << 4) - 1u);  // the digits above this pass (none in pass 0)
    double bins[kBins];
#pragma unroll
    for (int d = 0; d < kBins; d++) bins[d] = 0.0;
    for (int64_t i = t; i < p.V; i += blockDim.x) {
      const float v = xr[i];
      const uint32_t k = order_key(v);
      if (k < floorKey || (k & hiMask) != prefix) continue;
      const int d = (k >> shift) & (kBins - 1);
      if (!mass) {
        bins[d] += 1.0;
      } else {
        const float w = weight(v);
        if (w > 0.f) bins[d] += w;  // NaN and underflowed weights are dropped, as in the reference
      }
    }
    rmas::rows::block_sum(bins, red);
    if (it == 8) {
      double s = 0.0;
      for (int d = 0; d < kBins; d++) s += bins[d];
      goal = p.topP * s;
    }
    // every thread runs this on the same sums, so all reach the same prefix; when rounding leaves the
    // total short of the goal it descends into the lowest non-empty bin
    double run = acc, chosenAcc = acc, lowAcc = acc;
    int chosen = -1, low = 0;
    for (int d = kBins - 1; d >= 0; d--) {
      const double b = bins[d];
      if (chosen >= 0 || !(b > 0.0)) continue;
      if (run + b >= goal) {
        chosen = d;
        chosenAcc = run;
      } else {
        low = d;
        lowAcc = run;
        run += b;
      }
    }
    if (chosen < 0) {
      chosen = low;
      chosenAcc = lowAcc;
    }
    acc = chosenAcc;
    prefix |= static_cast<uint32_t>(chosen) << shift;
  }
  const uint32_t keepKey = first < last ? prefix : 0u;

  // inverse CDF in index order over contiguous per-thread chunks
  const int64_t chunk = (p.V + blockDim.x - 1) / blockDim.x;
  const int64_t lo = t * chunk < p.V ? t * chunk : p.V;
  const int64_t hi = lo + chunk < p.V ? lo + chunk : p.V;
  double c = 0.0;
  for (int64_t i = lo; i < hi; i++) {
    const float v = xr[i];
    if (order_key(v) < keepKey) continue;
    const float w = weight(v);
    if (w > 0.f) c += w;
  }
  chunkBefore[t] = c;
  __syncthreads();
  if (t == 0) {
    double s = 0.0;
    int lastT = 0;
    for (int j = 0; j < static_cast<int>(blockDim.x); j++) {
      const double cj = chunkBefore[j];
      chunkBefore[j] = s;
      s += cj;
      if (cj > 0.0) lastT = j;
    }
    chunkTotal = s;
    lastChunk = lastT;
  }
  __syncthreads();
  const double before = chunkBefore[t], after = before + c, total = chunkTotal;
  const uint32_t h = pcg(pcg(pcg(p.seed) + p.step) + row);
  const double g = static_cast<double>(h >> 8) * (1.0 / 16777216.0) * total;
  bool mine = (before <= g && g < after) || (t == lastChunk && g >= after);
  if (!(total > 0.0)) mine = t == 0;
  if (!mine) return;
  double run = before;
  int32_t pick = -1, lastKept = -1;
  for (int64_t i = lo; i < hi; i++) {
    const float v = xr[i];
    if (order_key(v) < keepKey) continue;
    const float w = weight(v);
    if (!(w > 0.f)) continue;
    run += w;
    lastKept = static_cast<int32_t>(i);
    if (run > g) {
      pick = lastKept;
      break;
    }
  }
  ids[row] = pick >= 0 ? pick : lastKept;
}

constexpr int64_t kMaxVocab = int64_t{1} << 24;

// "argmax": ptrs [logits f32 [rows, V], ids i32 [rows]]; ints [rows, V]; floats [].
cudaError_t launch_argmax(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 2, 0)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], V = a.ints[1];
  if (rows < 0 || rows > 0x7fffffff || V < 1 || V >= kMaxVocab) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  argmax_kernel<<<static_cast<unsigned>(rows), kArgmaxThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<int32_t>(a, 1), V);
  return cudaGetLastError();
}

// "sample": ptrs [logits f32 [rows, V], ids i32 [rows]]; ints [rows, V, topK (0: off; values >= V also off),
// seed (u32), step (u32)]; floats [temperature (> 0; temperature 0 is "argmax"), topP (in (0, 1]; 1: off)].
// Row r draws u = uniformFor(seed, step, r) of cpu.ts.
cudaError_t launch_sample(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 5, 2)) return cudaErrorInvalidValue;
  const int64_t rows = a.ints[0], V = a.ints[1], topK = a.ints[2], seed = a.ints[3], step = a.ints[4];
  const double temperature = a.floats[0], topP = a.floats[1];
  if (rows < 0 || rows > 0x7fffffff || V < 1 || V >= kMaxVocab || topK < 0) return cudaErrorInvalidValue;
  if (seed < 0 || seed > 0xffffffffLL || step < 0 || step > 0xffffffffLL) return cudaErrorInvalidValue;
  if (!(temperature > 0.0) || !(topP > 0.0 && topP <= 1.0)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  SampleParams p;
  p.V = V;
  p.topK = topK >= V ? 0u : static_cast<uint32_t>(topK);
  p.topP = topP;
  p.invT = 1.0 / temperature;
  p.seed = static_cast<uint32_t>(seed);
  p.step = static_cast<uint32_t>(step);
  sample_kernel<<<static_cast<unsigned>(rows), kSampleThreads, 0, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<int32_t>(a, 1), p);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("argmax", launch_argmax);
RMAS_KERNEL("sample", launch_sample);
