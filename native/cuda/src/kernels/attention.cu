// Causal grouped-query attention on f32 activations (src/kernels/attention/{index,kv}.ts pick the launches):
//   attention_fwd / attention_combine — flash-attention forward with online softmax, optionally split along the
//       keys (flash-decoding) and merged by the combine kernel;
//   attention_row_dot, attention_bwd_q, attention_bwd_kv — the flash-attention backward from the saved
//       logsumexp: di = rowsum(dO∘O), dQ per block of query rows, dK/dV per block of keys (each output element
//       is owned by one thread and summed in a fixed order: no atomics, deterministic);
//   kv_append — copies new k/v rows into a preallocated cache.
// Shapes as in src/kernels/attention/cpu.ts: q [T, Hq, D], k/v [S, Hkv, D] with kvLen valid rows, query t at
// position past + t (past = kvLen − T) sees key j iff j ≤ past + t and, with a window W > 0, past + t − j < W;
// query head h reads kv head h / (Hq / Hkv). A "row" below is one (query, head) pair of one kv head:
// r = t·group + g for head kh·group + g, so the query heads that share a kv head share its key tiles.
// head_dim D ≤ 256: each lane owns dims lane, lane + 32, … (DPL = ceil(D / 32) of them, rounded up to 1/2/4/8).
#include <cmath>

#include "../registry.h"

namespace {

constexpr int WARPS = 4;           // warps per block
constexpr int RPW = 4;             // query rows (or keys, in bwd_kv) per warp
constexpr int ROWS = WARPS * RPW;  // rows per block
constexpr int KT = 32;             // keys per shared-memory tile (one per lane)
constexpr int MAX_D = 256;

struct Dims {
  int64_t T, S, kvLen, past, window;
  int Hq, Hkv, D, group;
  float scale;
};

/** Reads [T, S, Hq, Hkv, D, kvLen, window] + [scale]; false when the shape is invalid. */
bool read_dims(const rmas::LaunchArgs& a, Dims& d) {
  const int64_t* x = a.ints;
  d.T = x[0];
  d.S = x[1];
  d.Hq = static_cast<int>(x[2]);
  d.Hkv = static_cast<int>(x[3]);
  d.D = static_cast<int>(x[4]);
  d.kvLen = x[5];
  d.window = x[6];
  d.scale = static_cast<float>(a.floats[0]);
  if (d.T < 0 || d.S < 0 || d.Hq < 0 || d.Hkv < 1 || d.D < 1 || d.D > MAX_D || d.Hq % d.Hkv != 0) return false;
  if (d.kvLen < d.T || d.kvLen > d.S || d.window < 0) return false;
  d.past = d.kvLen - d.T;
  d.group = d.Hq / d.Hkv;
  return true;
}

__device__ inline int64_t key_lo(const Dims& p, int64_t t) {
  const int64_t pos = p.past + t;
  return p.window > 0 && pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
}
__device__ inline int64_t key_hi(const Dims& p, int64_t t) { return p.past + t + 1; }

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/** Dynamic shared memory above the 48 KiB default needs an opt-in per kernel. */
template <typename K>
cudaError_t allow_smem(K kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

/** Copies rows [r0, r0 + n) of q-shaped `src` (rows of one kv head) into shared `dst` with row stride `ld`. */
__device__ inline void load_rows(float* dst, int ld, const float* src, const Dims& p, int kh, int64_t r0, int n, int64_t R) {
  for (int i = threadIdx.x; i < n * p.D; i += blockDim.x) {
    const int rr = i / p.D, d = i % p.D;
    const int64_t r = r0 + rr;
    float v = 0.f;
    if (r < R) {
      const int64_t t = r / p.group, h = kh * p.group + r % p.group;
      v = src[(t * p.Hq + h) * p.D + d];
    }
    dst[rr * ld + d] = v;
  }
}

/** Copies keys [j0, j0 + n) of kv head kh from k/v-shaped `src` into shared `dst` (row stride ld); zero past `end`. */
__device__ inline void load_keys(float* dst, int ld, const float* src, const Dims& p, int kh, int64_t j0, int n, int64_t end) {
  for (int i = threadIdx.x; i < n * p.D; i += blockDim.x) {
    const int jj = i / p.D, d = i % p.D;
    const int64_t j = j0 + jj;
    dst[jj * ld + d] = j < end ? src[(j * p.Hkv + kh) * p.D + d] : 0.f;
  }
}

// ---------------------------------------------------------------------------------------------------
// Forward. Block (row block, kv head, split z) walks keys [kbeg, kend) in tiles of KT: lane l scores key
// j0 + l against each of its warp's RPW rows, then the row's running max m, sum l and output accumulator are
// rescaled (online softmax) and the tile's probabilities broadcast lane by lane into the accumulator.
// Shared memory: q rows [ROWS][D], keys [KT][D + 1] (padded: lane l reads row l), values [KT][D].
template <int DPL>
__global__ void __launch_bounds__(WARPS * 32)
    attention_fwd_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, float* __restrict__ o,
                         float* __restrict__ lse, Dims p, int64_t splitBase, int64_t splitLen) {
  extern __shared__ float smem[];
  const int D = p.D;
  float* qs = smem;
  float* ks = qs + ROWS * D;
  float* vs = ks + KT * (D + 1);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kh = blockIdx.y, z = blockIdx.z;
  const int64_t R = p.T * p.group;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * ROWS;
  const int64_t rLast = (r0 + ROWS < R ? r0 + ROWS : R) - 1;

  // this split's keys, clipped to what the block's rows can see
  int64_t kbeg = splitBase + z * splitLen, kend = kbeg + splitLen;
  const int64_t lo0 = key_lo(p, r0 / p.group), hi1 = key_hi(p, rLast / p.group);
  if (kbeg < lo0) kbeg = lo0;
  if (kend > hi1) kend = hi1;

  load_rows(qs, D, q, p, kh, r0, ROWS, R);

  int64_t lo[RPW], hi[RPW];
  float m[RPW], l[RPW], acc[RPW][DPL];
#pragma unroll
  for (int i = 0; i < RPW; i++) {
    const int64_t r = r0 + warp * RPW + i;
    const int64_t t = r / p.group;
    lo[i] = r < R ? (key_lo(p, t) > kbeg ? key_lo(p, t) : kbeg) : 0;
    hi[i] = r < R ? (key_hi(p, t) < kend ? key_hi(p, t) : kend) : 0;
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int c = 0; c < DPL; c++) acc[i][c] = 0.f;
  }

  for (int64_t j0 = kbeg; j0 < kend; j0 += KT) {
    __syncthreads();  // the previous tile is consumed (and, first time round, the q rows are stored)
    load_keys(ks, D + 1, k, p, kh, j0, KT, kend);
    load_keys(vs, D, v, p, kh, j0, KT, kend);
    __syncthreads();
    const int64_t j = j0 + lane;
    float dot[RPW] = {};
    for (int d = 0; d < D; d++) {
      const float kv = ks[lane * (D + 1) + d];
#pragma unroll
      for (int i = 0; i < RPW; i++) dot[i] = fmaf(qs[(warp * RPW + i) * D + d], kv, dot[i]);
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
      const bool vis = j >= lo[i] && j < hi[i];
      const float s = vis ? dot[i] * p.scale : -INFINITY;
      const float mNew = fmaxf(m[i], warp_max(s));
      if (mNew == -INFINITY) continue;  // nothing visible to this row yet (warp-uniform)
      const float alpha = expf(m[i] - mNew);  // 0 when m was -inf
      const float pr = vis ? expf(s - mNew) : 0.f;
      l[i] = l[i] * alpha + warp_sum(pr);
      m[i] = mNew;
#pragma unroll
      for (int c = 0; c < DPL; c++) acc[i][c] *= alpha;
      for (int jj = 0; jj < KT; jj++) {
        const float pj = __shfl_sync(0xffffffffu, pr, jj);
#pragma unroll
        for (int c = 0; c < DPL; c++) {
          const int d = lane + 32 * c;
          if (d < D) acc[i][c] = fmaf(pj, vs[jj * D + d], acc[i][c]);
        }
      }
    }
  }

  // split z writes its own slice of o/lse for the combine kernel; with one split, slice 0 is o and lse themselves
#pragma unroll
  for (int i = 0; i < RPW; i++) {
    const int64_t r = r0 + warp * RPW + i;
    if (r >= R) continue;
    const int64_t t = r / p.group, h = static_cast<int64_t>(kh) * p.group + r % p.group;
    float* orow = o + (static_cast<int64_t>(z) * p.T * p.Hq + t * p.Hq + h) * D;
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
#pragma unroll
    for (int c = 0; c < DPL; c++) {
      const int d = lane + 32 * c;
      if (d < D) orow[d] = acc[i][c] * inv;
    }
    if (lane == 0) lse[static_cast<int64_t>(z) * p.Hq * p.T + h * p.T + t] = l[i] > 0.f ? m[i] + logf(l[i]) : -INFINITY;
  }
}

template <int DPL>
cudaError_t launch_fwd_t(const rmas::LaunchArgs& a, const Dims& p, int64_t base, int64_t len, int64_t n) {
  const size_t bytes = sizeof(float) * (ROWS * p.D + KT * (p.D + 1) + KT * p.D);
  cudaError_t e = allow_smem(attention_fwd_kernel<DPL>, bytes);
  if (e != cudaSuccess) return e;
  const int64_t blocks = (p.T * p.group + ROWS - 1) / ROWS;
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(p.Hkv), static_cast<unsigned>(n));
  attention_fwd_kernel<DPL><<<grid, WARPS * 32, bytes, a.stream>>>(rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1),
                                                                  rmas::ptr<const float>(a, 2), rmas::ptr<float>(a, 3),
                                                                  rmas::ptr<float>(a, 4), p, base, len);
  return cudaGetLastError();
}

/** F<DPL>(args…) for the smallest DPL in {1, 2, 4, 8} with 32·DPL ≥ D. */
#define BY_DPL(D, F, ...) \
  ((D) <= 32 ? F<1>(__VA_ARGS__) : (D) <= 64 ? F<2>(__VA_ARGS__) : (D) <= 128 ? F<4>(__VA_ARGS__) : F<8>(__VA_ARGS__))

// attention_fwd: o and lse of causal GQA attention. With n splits, split z covers keys
// [splitBase + z·splitLen, splitBase + (z + 1)·splitLen) and writes o slice z [T, Hq, D] (normalised by its own
// sum; zero where it saw no key) and lse slice z [Hq, T] (−inf where it saw no key) for attention_combine.
//   ptrs   [q f32, k f32, v f32, o f32 (n slices), lse f32 (n slices)]
//   ints   [T, S, Hq, Hkv, D, kvLen, window, splitBase, splitLen, n]
//   floats [scale]
cudaError_t launch_attention_fwd(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 5, 10, 1)) return cudaErrorInvalidValue;
  Dims p;
  if (!read_dims(a, p)) return cudaErrorInvalidValue;
  const int64_t base = a.ints[7], len = a.ints[8], n = a.ints[9];
  if (base < 0 || len < 1 || n < 1 || n > 65535) return cudaErrorInvalidValue;
  if (p.T == 0 || p.Hq == 0) return cudaSuccess;
  if ((p.T * p.group + ROWS - 1) / ROWS > 0x7fffffff || p.Hkv > 65535) return cudaErrorInvalidValue;
  return BY_DPL(p.D, launch_fwd_t, a, p, base, len, n);
}

// Merges n split slices: lse = log Σ_z exp(lse_z), o = Σ_z exp(lse_z − lse)·o_z. One thread per output element.
__global__ void attention_combine_kernel(const float* __restrict__ po, const float* __restrict__ pl, float* __restrict__ o,
                                         float* __restrict__ lse, int64_t T, int64_t Hq, int64_t D, int n) {
  const int64_t total = T * Hq * D;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = i % D, th = i / D, h = th % Hq, t = th / Hq;
    const int64_t li = h * T + t;
    float mx = -INFINITY;
    for (int z = 0; z < n; z++) mx = fmaxf(mx, pl[z * Hq * T + li]);
    float sum = 0.f, acc = 0.f;
    for (int z = 0; z < n; z++) {
      const float w = expf(pl[z * Hq * T + li] - mx);  // 0 for a slice that saw no key
      sum += w;
      acc = fmaf(w, po[z * total + i], acc);
    }
    o[i] = acc / sum;
    if (d == 0) lse[li] = mx + logf(sum);
  }
}

// attention_combine: merges the n slices attention_fwd wrote into o [T, Hq, D] and lse [Hq, T].
//   ptrs   [partO f32 [n, T, Hq, D], partLse f32 [n, Hq, T], o f32, lse f32]
//   ints   [T, Hq, D, n]
//   floats []
cudaError_t launch_attention_combine(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 4, 0)) return cudaErrorInvalidValue;
  const int64_t T = a.ints[0], Hq = a.ints[1], D = a.ints[2], n = a.ints[3];
  if (T < 0 || Hq < 0 || D < 1 || n < 1) return cudaErrorInvalidValue;
  const int64_t total = T * Hq * D;
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + 255) / 256;
  attention_combine_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<float>(a, 2), rmas::ptr<float>(a, 3), T, Hq, D,
      static_cast<int>(n));
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------------------------------
// Backward.

__global__ void attention_row_dot_kernel(const float* __restrict__ o, const float* __restrict__ dO, float* __restrict__ di,
                                         int64_t T, int64_t Hq, int64_t D) {
  const int lane = threadIdx.x % 32;
  const int64_t rows = T * Hq;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
    float s = 0.f;
    for (int64_t d = lane; d < D; d += 32) s = fmaf(dO[r * D + d], o[r * D + d], s);
    s = warp_sum(s);
    if (lane == 0) di[(r % Hq) * T + r / Hq] = s;  // row r = t·Hq + h
  }
}

// attention_row_dot: di[h, t] = Σ_d dO[t, h, d]·o[t, h, d]. One warp per row.
//   ptrs   [o f32 [T, Hq, D], dO f32 [T, Hq, D], di f32 [Hq, T]]
//   ints   [T, Hq, D]
//   floats []
cudaError_t launch_attention_row_dot(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 3, 3, 0)) return cudaErrorInvalidValue;
  const int64_t T = a.ints[0], Hq = a.ints[1], D = a.ints[2];
  if (T < 0 || Hq < 0 || D < 0) return cudaErrorInvalidValue;
  if (T * Hq == 0) return cudaSuccess;
  const int64_t blocks = (T * Hq + 7) / 8;
  attention_row_dot_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<float>(a, 2), T, Hq, D);
  return cudaGetLastError();
}

// dQ. Block (row block, kv head) walks the keys its rows see in tiles of KT; lane l recomputes P and dP for key
// j0 + l against each of its warp's rows, dS = P·(dP − di)·scale, then dq_row += Σ_j dS_j·k_j lane by lane.
// Shared memory: q rows and dO rows [ROWS][D], keys and values [KT][D + 1].
template <int DPL>
__global__ void __launch_bounds__(WARPS * 32)
    attention_bwd_q_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                           const float* __restrict__ lse, const float* __restrict__ di, const float* __restrict__ dO,
                           float* __restrict__ dq, Dims p) {
  extern __shared__ float smem[];
  const int D = p.D;
  float* qs = smem;
  float* dos = qs + ROWS * D;
  float* ks = dos + ROWS * D;
  float* vs = ks + KT * (D + 1);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kh = blockIdx.y;
  const int64_t R = p.T * p.group;
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * ROWS;
  const int64_t rLast = (r0 + ROWS < R ? r0 + ROWS : R) - 1;
  const int64_t kbeg = key_lo(p, r0 / p.group), kend = key_hi(p, rLast / p.group);

  load_rows(qs, D, q, p, kh, r0, ROWS, R);
  load_rows(dos, D, dO, p, kh, r0, ROWS, R);

  int64_t lo[RPW], hi[RPW];
  float rowLse[RPW], rowDi[RPW], acc[RPW][DPL];
#pragma unroll
  for (int i = 0; i < RPW; i++) {
    const int64_t r = r0 + warp * RPW + i;
    const int64_t t = r / p.group, h = static_cast<int64_t>(kh) * p.group + r % p.group;
    lo[i] = r < R ? key_lo(p, t) : 0;
    hi[i] = r < R ? key_hi(p, t) : 0;
    rowLse[i] = r < R ? lse[h * p.T + t] : 0.f;
    rowDi[i] = r < R ? di[h * p.T + t] : 0.f;
#pragma unroll
    for (int c = 0; c < DPL; c++) acc[i][c] = 0.f;
  }

  for (int64_t j0 = kbeg; j0 < kend; j0 += KT) {
    __syncthreads();
    load_keys(ks, D + 1, k, p, kh, j0, KT, kend);
    load_keys(vs, D + 1, v, p, kh, j0, KT, kend);
    __syncthreads();
    const int64_t j = j0 + lane;
    float dot[RPW] = {}, dp[RPW] = {};
    for (int d = 0; d < D; d++) {
      const float kd = ks[lane * (D + 1) + d], vd = vs[lane * (D + 1) + d];
#pragma unroll
      for (int i = 0; i < RPW; i++) {
        dot[i] = fmaf(qs[(warp * RPW + i) * D + d], kd, dot[i]);
        dp[i] = fmaf(dos[(warp * RPW + i) * D + d], vd, dp[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
      const bool vis = j >= lo[i] && j < hi[i];
      const float pr = vis ? expf(dot[i] * p.scale - rowLse[i]) : 0.f;
      // exactly 0 off the mask, whatever dp holds (a key slot past kvLen may hold anything, NaN included)
      const float ds = vis ? pr * (dp[i] - rowDi[i]) * p.scale : 0.f;
      for (int jj = 0; jj < KT; jj++) {
        const float dsj = __shfl_sync(0xffffffffu, ds, jj);
#pragma unroll
        for (int c = 0; c < DPL; c++) {
          const int d = lane + 32 * c;
          if (d < D) acc[i][c] = fmaf(dsj, ks[jj * (D + 1) + d], acc[i][c]);
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RPW; i++) {
    const int64_t r = r0 + warp * RPW + i;
    if (r >= R) continue;
    const int64_t t = r / p.group, h = static_cast<int64_t>(kh) * p.group + r % p.group;
#pragma unroll
    for (int c = 0; c < DPL; c++) {
      const int d = lane + 32 * c;
      if (d < D) dq[(t * p.Hq + h) * D + d] = acc[i][c];
    }
  }
}

// dK, dV. Block (key block of ROWS keys, kv head) walks the query rows (every head of the group) that see any
// of its keys, in tiles of 32 rows: lane l recomputes P and dS for row r0 + l against each of its warp's RPW
// keys, then dk_key += Σ_r dS_r·q_r and dv_key += Σ_r P_r·dO_r lane by lane. Keys no query sees (at or past
// kvLen, or outside every window) get zeros. Shared memory: keys and values [ROWS][D], q and dO rows
// [KT][D + 1], and the rows' lse and di [KT].
template <int DPL>
__global__ void __launch_bounds__(WARPS * 32)
    attention_bwd_kv_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                            const float* __restrict__ lse, const float* __restrict__ di, const float* __restrict__ dO,
                            float* __restrict__ dk, float* __restrict__ dv, Dims p) {
  extern __shared__ float smem[];
  const int D = p.D;
  float* ks = smem;
  float* vs = ks + ROWS * D;
  float* qs = vs + ROWS * D;
  float* dos = qs + KT * (D + 1);
  float* ls = dos + KT * (D + 1);
  float* dis = ls + KT;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int kh = blockIdx.y;
  const int64_t R = p.T * p.group;
  const int64_t j0 = static_cast<int64_t>(blockIdx.x) * ROWS;
  const int64_t jEnd = j0 + ROWS < p.S ? j0 + ROWS : p.S;

  load_keys(ks, D, k, p, kh, j0, ROWS, jEnd);
  load_keys(vs, D, v, p, kh, j0, ROWS, jEnd);

  // queries that can see a key of [j0, jEnd): pos ≥ j0, and with a window pos ≤ jEnd − 1 + W − 1
  int64_t tBeg = j0 - p.past > 0 ? j0 - p.past : 0;
  int64_t tEnd = p.T;
  if (p.window > 0 && jEnd - 1 + p.window - p.past < tEnd) tEnd = jEnd - 1 + p.window - p.past;
  if (tBeg > tEnd) tBeg = tEnd;

  float dkAcc[RPW][DPL], dvAcc[RPW][DPL];
#pragma unroll
  for (int i = 0; i < RPW; i++)
#pragma unroll
    for (int c = 0; c < DPL; c++) dkAcc[i][c] = dvAcc[i][c] = 0.f;

  for (int64_t r0 = tBeg * p.group; r0 < tEnd * p.group; r0 += KT) {
    __syncthreads();
    load_rows(qs, D + 1, q, p, kh, r0, KT, R);
    load_rows(dos, D + 1, dO, p, kh, r0, KT, R);
    if (threadIdx.x < KT) {
      const int64_t r = r0 + threadIdx.x;
      const int64_t t = r / p.group, h = static_cast<int64_t>(kh) * p.group + r % p.group;
      ls[threadIdx.x] = r < R ? lse[h * p.T + t] : 0.f;
      dis[threadIdx.x] = r < R ? di[h * p.T + t] : 0.f;
    }
    __syncthreads();
    const int64_t r = r0 + lane;
    const int64_t t = r / p.group;
    const int64_t lo = r < R ? key_lo(p, t) : 0, hi = r < R ? key_hi(p, t) : 0;
    float dot[RPW] = {}, dp[RPW] = {};
    for (int d = 0; d < D; d++) {
      const float qd = qs[lane * (D + 1) + d], od = dos[lane * (D + 1) + d];
#pragma unroll
      for (int i = 0; i < RPW; i++) {
        dot[i] = fmaf(qd, ks[(warp * RPW + i) * D + d], dot[i]);
        dp[i] = fmaf(od, vs[(warp * RPW + i) * D + d], dp[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
      const int64_t j = j0 + warp * RPW + i;
      const bool vis = j < jEnd && j >= lo && j < hi;
      const float pr = vis ? expf(dot[i] * p.scale - ls[lane]) : 0.f;
      // exactly 0 off the mask: keys past kvLen are loaded (up to S) and may hold anything, NaN included
      const float ds = vis ? pr * (dp[i] - dis[lane]) * p.scale : 0.f;
      for (int rr = 0; rr < KT; rr++) {
        const float prr = __shfl_sync(0xffffffffu, pr, rr), dsr = __shfl_sync(0xffffffffu, ds, rr);
#pragma unroll
        for (int c = 0; c < DPL; c++) {
          const int d = lane + 32 * c;
          if (d < D) {
            dkAcc[i][c] = fmaf(dsr, qs[rr * (D + 1) + d], dkAcc[i][c]);
            dvAcc[i][c] = fmaf(prr, dos[rr * (D + 1) + d], dvAcc[i][c]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < RPW; i++) {
    const int64_t j = j0 + warp * RPW + i;
    if (j >= jEnd) continue;
    const int64_t base = (j * p.Hkv + kh) * D;
#pragma unroll
    for (int c = 0; c < DPL; c++) {
      const int d = lane + 32 * c;
      if (d < D) {
        dk[base + d] = dkAcc[i][c];
        dv[base + d] = dvAcc[i][c];
      }
    }
  }
}

template <int DPL>
cudaError_t launch_bwd_q_t(const rmas::LaunchArgs& a, const Dims& p) {
  const size_t bytes = sizeof(float) * (2 * ROWS * p.D + 2 * KT * (p.D + 1));
  cudaError_t e = allow_smem(attention_bwd_q_kernel<DPL>, bytes);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((p.T * p.group + ROWS - 1) / ROWS), static_cast<unsigned>(p.Hkv));
  attention_bwd_q_kernel<DPL><<<grid, WARPS * 32, bytes, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<const float>(a, 3),
      rmas::ptr<const float>(a, 4), rmas::ptr<const float>(a, 5), rmas::ptr<float>(a, 6), p);
  return cudaGetLastError();
}

template <int DPL>
cudaError_t launch_bwd_kv_t(const rmas::LaunchArgs& a, const Dims& p) {
  const size_t bytes = sizeof(float) * (2 * ROWS * p.D + 2 * KT * (p.D + 1) + 2 * KT);
  cudaError_t e = allow_smem(attention_bwd_kv_kernel<DPL>, bytes);
  if (e != cudaSuccess) return e;
  const dim3 grid(static_cast<unsigned>((p.S + ROWS - 1) / ROWS), static_cast<unsigned>(p.Hkv));
  attention_bwd_kv_kernel<DPL><<<grid, WARPS * 32, bytes, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<const float>(a, 3),
      rmas::ptr<const float>(a, 4), rmas::ptr<const float>(a, 5), rmas::ptr<float>(a, 6), rmas::ptr<float>(a, 7), p);
  return cudaGetLastError();
}

// attention_bwd_q: dq [T, Hq, D] (every element written).
//   ptrs   [q, k, v, lse [Hq, T], di [Hq, T], dO [T, Hq, D], dq]   (all f32)
//   ints   [T, S, Hq, Hkv, D, kvLen, window]
//   floats [scale]
cudaError_t launch_attention_bwd_q(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 7, 7, 1)) return cudaErrorInvalidValue;
  Dims p;
  if (!read_dims(a, p)) return cudaErrorInvalidValue;
  if (p.T == 0 || p.Hq == 0) return cudaSuccess;
  if ((p.T * p.group + ROWS - 1) / ROWS > 0x7fffffff || p.Hkv > 65535) return cudaErrorInvalidValue;
  return BY_DPL(p.D, launch_bwd_q_t, a, p);
}

// attention_bwd_kv: dk, dv [S, Hkv, D] (every element written; rows no query sees, those at or past kvLen
// included, are zero).
//   ptrs   [q, k, v, lse [Hq, T], di [Hq, T], dO [T, Hq, D], dk, dv]   (all f32)
//   ints   [T, S, Hq, Hkv, D, kvLen, window]
//   floats [scale]
cudaError_t launch_attention_bwd_kv(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 8, 7, 1)) return cudaErrorInvalidValue;
  Dims p;
  if (!read_dims(a, p)) return cudaErrorInvalidValue;
  if (p.S == 0) return cudaSuccess;
  if ((p.S + ROWS - 1) / ROWS > 0x7fffffff || p.Hkv > 65535) return cudaErrorInvalidValue;
  return BY_DPL(p.D, launch_bwd_kv_t, a, p);
}

// ---------------------------------------------------------------------------------------------------
__global__ void kv_append_kernel(float* __restrict__ cache, const float* __restrict__ rows, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    cache[i] = rows[i];
  }
}

// kv_append: cache[at + i, :, :] = rows[i, :, :] for the n new rows; rowElems = Hkv·D.
//   ptrs   [cache f32 [maxS, Hkv, D], rows f32 [n, Hkv, D]]
//   ints   [at, n, rowElems]
//   floats []
cudaError_t launch_kv_append(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 2, 3, 0)) return cudaErrorInvalidValue;
  const int64_t at = a.ints[0], n = a.ints[1], rowElems = a.ints[2];
  if (at < 0 || n < 0 || rowElems < 0) return cudaErrorInvalidValue;
  const int64_t total = n * rowElems;
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + 255) / 256;
  kv_append_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0, a.stream>>>(
      rmas::ptr<float>(a, 0) + at * rowElems, rmas::ptr<const float>(a, 1), total);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("attention_fwd", launch_attention_fwd);
RMAS_KERNEL("attention_combine", launch_attention_combine);
RMAS_KERNEL("attention_row_dot", launch_attention_row_dot);
RMAS_KERNEL("attention_bwd_q", launch_attention_bwd_q);
RMAS_KERNEL("attention_bwd_kv", launch_attention_bwd_kv);
RMAS_KERNEL("kv_append", launch_kv_append);
