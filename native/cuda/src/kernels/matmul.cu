// matmul kernels that cuBLASLt does not cover (src/kernels/matmul/index.ts picks the launch):
//   matmul_gemv_q  — q8_0/q4_0 weights [N, K] against a few activation rows (decode), one warp per weight row;
//   matmul_tiled   — any strided problem with B in f32/f16/bf16/q8_0/q4_0, dequantized as tiles are loaded:
//                    quantized prefill, transposed outputs cuBLASLt cannot express, K = 0, forced `path: 'tiled'`.
// Both accumulate in f32. Quantized rows follow src/formats/dtype.ts: a row of `cols` elements holds its
// quant bytes (cols int8, or cols/2 bytes of nibbles: byte j of block b has element j in its low nibble and
// element j + 16 in its high one), then cols/32 f16 scales, then padding to 4 bytes.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../registry.h"

namespace {

using rmas::DType;

constexpr int QK = 32;

__host__ __device__ inline int64_t quant_bytes(int dt, int64_t cols) { return dt == rmas::Q8_0 ? cols : cols / 2; }
__host__ __device__ inline int64_t row_bytes(int dt, int64_t cols) { return quant_bytes(dt, cols) + (((cols / QK) * 2 + 3) & ~int64_t(3)); }

__device__ inline float f16_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/** B's stored element (row, col) as f32; `cols` is B's last dim. */
template <int DT>
__device__ inline float load_b(const void* b, int64_t row, int64_t col, int64_t cols) {
  if constexpr (DT == rmas::F32) {
    return static_cast<const float*>(b)[row * cols + col];
  } else if constexpr (DT == rmas::F16) {
    return f16_bits(static_cast<const uint16_t*>(b)[row * cols + col]);
  } else if constexpr (DT == rmas::BF16) {
    return __bfloat162float(__ushort_as_bfloat16(static_cast<const uint16_t*>(b)[row * cols + col]));
  } else {
    const uint8_t* r = static_cast<const uint8_t*>(b) + row * row_bytes(DT, cols);
    const int64_t blk = col / QK;
    const int j = static_cast<int>(col % QK);
    const float d = f16_bits(reinterpret_cast<const uint16_t*>(r + quant_bytes(DT, cols))[blk]);
    if constexpr (DT == rmas::Q8_0) {
      return static_cast<float>(static_cast<int8_t>(r[col])) * d;
    } else {
      const uint8_t byte = r[blk * (QK / 2) + (j & 15)];
      return static_cast<float>((j < 16 ? byte & 15 : byte >> 4) - 8) * d;
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Tiled GEMM: a 64×64 tile of C per block, 256 threads with 4×4 outputs each, K in steps of 16.
constexpr int TM = 64, TN = 64, TK = 16, TILED_THREADS = 256;

struct TiledArgs {
  const float* a;
  const void* b;
  float* c;
  const float* bias;
  int64_t batch, M, N, K;
  int64_t asb, asm_, ask;  // A(b, m, k) = a[b*asb + m*asm + k*ask]
  int64_t bsbr, cols;      // B(b, k, n) = stored[b*bsbr + (transB ? n : k), transB ? k : n]
  int transB;
  int64_t csb, csm, csn;   // C(b, m, n) = c[b*csb + m*csm + n*csn]
};

template <int DT>
__global__ void __launch_bounds__(TILED_THREADS) matmul_tiled_kernel(TiledArgs p) {
  __shared__ float as[TK][TM + 4];
  __shared__ float bs[TK][TN + 4];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  // coalesce along whichever of A's and B's dims is contiguous in memory
  const bool aAlongK = p.ask == 1;
  const bool bAlongK = p.transB != 0;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * TN;
  for (int64_t m0 = static_cast<int64_t>(blockIdx.y) * TM; m0 < p.M; m0 += static_cast<int64_t>(gridDim.y) * TM) {
    for (int64_t bi = blockIdx.z; bi < p.batch; bi += gridDim.z) {
      float acc[4][4] = {};
      const float* a = p.a + bi * p.asb;
      const int64_t bRow0 = bi * p.bsbr;
      for (int64_t k0 = 0; k0 < p.K; k0 += TK) {
        for (int l = tid; l < TM * TK; l += TILED_THREADS) {
          const int mm = aAlongK ? l / TK : l % TM;
          const int kk = aAlongK ? l % TK : l / TM;
          const int64_t m = m0 + mm, k = k0 + kk;
          as[kk][mm] = m < p.M && k < p.K ? a[m * p.asm_ + k * p.ask] : 0.f;
        }
        for (int l = tid; l < TN * TK; l += TILED_THREADS) {
          const int nn = bAlongK ? l / TK : l % TN;
          const int kk = bAlongK ? l % TK : l / TN;
          const int64_t n = n0 + nn, k = k0 + kk;
          float v = 0.f;
          if (n < p.N && k < p.K) v = bAlongK ? load_b<DT>(p.b, bRow0 + n, k, p.cols) : load_b<DT>(p.b, bRow0 + k, n, p.cols);
          bs[kk][nn] = v;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk++) {
          float av[4], bv[4];
#pragma unroll
          for (int i = 0; i < 4; i++) av[i] = as[kk][ty + 16 * i];
#pragma unroll
          for (int j = 0; j < 4; j++) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
          for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int64_t m = m0 + ty + 16 * i;
        if (m >= p.M) continue;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const int64_t n = n0 + tx + 16 * j;
          if (n >= p.N) continue;
          p.c[bi * p.csb + m * p.csm + n * p.csn] = acc[i][j] + (p.bias ? p.bias[n] : 0.f);
        }
      }
    }
  }
}

template <int DT>
cudaError_t launch_tiled_t(const TiledArgs& p, cudaStream_t s) {
  const int64_t nt = (p.N + TN - 1) / TN, mt = (p.M + TM - 1) / TM;
  if (nt > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(nt), static_cast<unsigned>(mt < 65535 ? mt : 65535),
                  static_cast<unsigned>(p.batch < 65535 ? p.batch : 65535));
  matmul_tiled_kernel<DT><<<grid, TILED_THREADS, 0, s>>>(p);
  return cudaGetLastError();
}

// matmul_tiled: C(b, m, n) = Σ_k A(b, m, k)·B(b, k, n) (+ bias[n]), every operand addressed as in MatmulPlan
// (src/kernels/matmul/plan.ts); K = 0 writes bias (or zeros).
//   ptrs   [A f32, B (dtypeB), C f32, bias f32 or 0]
//   ints   [batch, M, N, K, aSb, aSm, aSk, bSbr, bCols, transB, cSb, cSm, cSn, dtypeB]
//   floats []
cudaError_t launch_matmul_tiled(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 14, 0)) return cudaErrorInvalidValue;
  const int64_t* x = a.ints;
  TiledArgs p{rmas::ptr<const float>(a, 0), rmas::ptr<const void>(a, 1), rmas::ptr<float>(a, 2), rmas::ptr<const float>(a, 3),
              x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], static_cast<int>(x[9]), x[10], x[11], x[12]};
  if (p.batch < 0 || p.M < 0 || p.N < 0 || p.K < 0 || p.cols < 1) return cudaErrorInvalidValue;
  if (p.batch == 0 || p.M == 0 || p.N == 0) return cudaSuccess;
  switch (x[13]) {
    case rmas::F32: return launch_tiled_t<rmas::F32>(p, a.stream);
    case rmas::F16: return launch_tiled_t<rmas::F16>(p, a.stream);
    case rmas::BF16: return launch_tiled_t<rmas::BF16>(p, a.stream);
    case rmas::Q8_0: return p.cols % QK ? cudaErrorInvalidValue : launch_tiled_t<rmas::Q8_0>(p, a.stream);
    case rmas::Q4_0: return p.cols % QK ? cudaErrorInvalidValue : launch_tiled_t<rmas::Q4_0>(p, a.stream);
    default: return cudaErrorInvalidValue;
  }
}

// ---------------------------------------------------------------------------------------------------
// Quantized GEMV: C[m, n] = Σ_k A[m, k]·W[n, k] for up to GEMV_MR rows m. One warp per weight row n; lane l
// takes blocks l, l + 32, … of the row, so a warp reads 32 consecutive blocks per step; each block's 32 quants
// are unpacked once and used for every row of A. The block sum Σ q·a is scaled by d once (the CPU reference
// sums (q·d)·a; the results differ only by f32 rounding).
constexpr int GEMV_MR = 8, GEMV_WARPS = 8;

template <int DT, bool VEC>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    matmul_gemv_q_kernel(const float* __restrict__ a, const uint8_t* __restrict__ w, float* __restrict__ c,
                         const float* __restrict__ bias, int rows, int64_t N, int64_t K, int64_t lda, int64_t ldc) {
  const int lane = threadIdx.x % 32;
  const int64_t n = static_cast<int64_t>(blockIdx.x) * GEMV_WARPS + threadIdx.x / 32;
  if (n >= N) return;
  const uint8_t* row = w + n * row_bytes(DT, K);
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(row + quant_bytes(DT, K));
  float acc[GEMV_MR] = {};
  const int64_t nblk = K / QK;
  for (int64_t blk = lane; blk < nblk; blk += 32) {
    float q[QK];
    if constexpr (DT == rmas::Q8_0) {
      const uint32_t* words = reinterpret_cast<const uint32_t*>(row + blk * QK);
#pragma unroll
      for (int i = 0; i < QK / 4; i++) {
        const uint32_t v = words[i];
#pragma unroll
        for (int j = 0; j < 4; j++) q[4 * i + j] = static_cast<float>(static_cast<int8_t>((v >> (8 * j)) & 0xff));
      }
    } else {
      const uint32_t* words = reinterpret_cast<const uint32_t*>(row + blk * (QK / 2));
#pragma unroll
      for (int i = 0; i < QK / 8; i++) {
        const uint32_t v = words[i];
#pragma unroll
        for (int j = 0; j < 4; j++) {
          const uint32_t byte = (v >> (8 * j)) & 0xff;
          q[4 * i + j] = static_cast<float>(static_cast<int>(byte & 15) - 8);
          q[4 * i + j + 16] = static_cast<float>(static_cast<int>(byte >> 4) - 8);
        }
      }
    }
    const float d = f16_bits(scales[blk]);
#pragma unroll
    for (int m = 0; m < GEMV_MR; m++) {
      if (m >= rows) break;
      const float* ar = a + m * lda + blk * QK;
      float s = 0.f;
      if constexpr (VEC) {
#pragma unroll
        for (int i = 0; i < QK / 4; i++) {
          const float4 v = reinterpret_cast<const float4*>(ar)[i];
          s = fmaf(q[4 * i], v.x, s);
          s = fmaf(q[4 * i + 1], v.y, s);
          s = fmaf(q[4 * i + 2], v.z, s);
          s = fmaf(q[4 * i + 3], v.w, s);
        }
      } else {
#pragma unroll
        for (int i = 0; i < QK; i++) s = fmaf(q[i], ar[i], s);
      }
      acc[m] = fmaf(s, d, acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < GEMV_MR; m++) {
    if (m >= rows) break;
    float s = acc[m];
#pragma unroll
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) c[m * ldc + n] = s + (bias ? bias[n] : 0.f);
  }
}

template <int DT>
cudaError_t launch_gemv_t(const rmas::LaunchArgs& a, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldc) {
  const float* A = rmas::ptr<const float>(a, 0);
  const uint8_t* W = rmas::ptr<const uint8_t>(a, 1);
  float* C = rmas::ptr<float>(a, 2);
  const float* bias = rmas::ptr<const float>(a, 3);
  if ((reinterpret_cast<uintptr_t>(W) & 3) != 0) return cudaErrorMisalignedAddress;
  const bool vec = lda % 4 == 0 && (reinterpret_cast<uintptr_t>(A) & 15) == 0;
  const int64_t blocks = (N + GEMV_WARPS - 1) / GEMV_WARPS;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  // more than GEMV_MR rows (a forced `path: 'gemv'`): one pass per GEMV_MR rows, the weights come from L2 again
  for (int64_t m0 = 0; m0 < M; m0 += GEMV_MR) {
    const int rows = static_cast<int>(M - m0 < GEMV_MR ? M - m0 : GEMV_MR);
    if (vec) {
      matmul_gemv_q_kernel<DT, true><<<static_cast<unsigned>(blocks), GEMV_WARPS * 32, 0, a.stream>>>(A + m0 * lda, W, C + m0 * ldc, bias,
                                                                                                      rows, N, K, lda, ldc);
    } else {
      matmul_gemv_q_kernel<DT, false><<<static_cast<unsigned>(blocks), GEMV_WARPS * 32, 0, a.stream>>>(A + m0 * lda, W, C + m0 * ldc, bias,
                                                                                                       rows, N, K, lda, ldc);
    }
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// matmul_gemv_q: C[m, n] = Σ_k A[m, k]·W[n, k] (+ bias[n]) for a quantized weight W [N, K] (transB layout);
// A rows are contiguous (A[m, k] = a[m*lda + k]), C[m, n] = c[m*ldc + n]; K a multiple of 32; B 4-byte aligned.
//   ptrs   [A f32, W (q8_0 | q4_0), C f32, bias f32 or 0]
//   ints   [M, N, K, lda, ldc, dtypeB]
//   floats []
cudaError_t launch_matmul_gemv_q(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 6, 0)) return cudaErrorInvalidValue;
  const int64_t M = a.ints[0], N = a.ints[1], K = a.ints[2], lda = a.ints[3], ldc = a.ints[4];
  if (M < 0 || N < 0 || K < 0 || K % QK != 0 || lda < K || ldc < N) return cudaErrorInvalidValue;
  if (M == 0 || N == 0) return cudaSuccess;
  switch (a.ints[5]) {
    case rmas::Q8_0: return launch_gemv_t<rmas::Q8_0>(a, M, N, K, lda, ldc);
    case rmas::Q4_0: return launch_gemv_t<rmas::Q4_0>(a, M, N, K, lda, ldc);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

RMAS_KERNEL("matmul_tiled", launch_matmul_tiled);
RMAS_KERNEL("matmul_gemv_q", launch_matmul_gemv_q);
