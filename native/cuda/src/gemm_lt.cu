// "gemm_lt": the large matmuls through cuBLASLt.
//
// Row-major, batched with element strides:  C[b] = alpha * op(A[b]) * op(B[b]) (+ bias[N]) (+ C[b] when accumulate)
//   ptrs   [A, B, C, bias or 0]
//   ints   [M, N, K, batch, transA, transB, lda, ldb, ldc, strideA, strideB, strideC, dtypeA, dtypeB, accumulate, split]
//           op(A) is [M, K] (A stored [M, K] with row stride lda, or [K, M] when transA = 1);
//           op(B) is [K, N] (B stored [K, N] with row stride ldb, or [N, K] when transB = 1, i.e. a [out, in] weight);
//           C is [M, N] with row stride ldc; strides step from one batch entry to the next (0 broadcasts);
//           dtypeA: F32 (or the same half type as B); dtypeB: F32, F16 or BF16 (rmas::DType codes); C and bias are F32.
//           split: 0 or 1, see below (only F32 A with half B uses it).
//   floats [alpha]
// Half B: A is converted to B's dtype in a workspace and the product runs bf16/f16 x bf16/f16 -> f32 with
// CUBLAS_COMPUTE_32F, so A carries 8 (bf16) or 11 (f16) significant bits, as upstream's bf16 training does.
// With split = 1, A is carried as a sum of halves, each the rounding of what the previous ones leave (p0 = half(A),
// p1 = half(A - p0), ...), one product per part accumulating into C: three bf16 parts hold all 24 bits of an f32
// (the product is an f32 product up to summation order), two f16 parts 22 bits. That is 3 (bf16) or 2 (f16) times
// the tensor-core work. (f16's range still applies: |A| over 65504 overflows, and the low part loses bits below
// f16's subnormals.)
// F32 B: CUBLAS_COMPUTE_32F (exact f32); RMAS_CUDA_TF32=1 in the environment allows TF32.
// The bias goes through the BIAS epilogue, or a small kernel when no algorithm offers that epilogue.
//
// cuBLASLt is column-major: row-major C[M,N] is column-major C^T[N,M], so we compute C^T = op(B)^T op(A)^T,
// handing cuBLASLt our B as its "A" and our A as its "B".
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <map>

#include "cublaslt.h"
#include "registry.h"

namespace {

using rmas::lt::Status;

constexpr size_t kLtWorkspace = 32u << 20;  // what cuBLASLt recommends on Hopper

struct DeviceState {
  rmas::lt::Handle handle = nullptr;
  void* workspace = nullptr;
  void* convert = nullptr;  // A converted to half
  size_t convertBytes = 0;
};

struct Plan {
  rmas::lt::MatmulDesc desc = nullptr;
  rmas::lt::MatrixLayout a = nullptr, b = nullptr, c = nullptr;
  rmas::lt::MatmulAlgo algo{};
  bool epilogueBias = false;
};

using Key = std::array<int64_t, 22>;
std::map<int, DeviceState> g_devices;
std::map<Key, Plan> g_plans;

bool tf32Allowed() {
  static const bool on = [] {
    const char* v = std::getenv("RMAS_CUDA_TF32");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

int alignmentOf(uint64_t p) {
  int a = 256;
  while (a > 1 && p % a) a >>= 1;
  return a;
}

cudaDataType_t cudaType(int64_t d) { return d == rmas::F16 ? CUDA_R_16F : d == rmas::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

template <typename T>
__device__ T fromFloat(float x);
template <>
__device__ __half fromFloat<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
__device__ inline float toFloat(__half h) { return __half2float(h); }
__device__ inline float toFloat(__nv_bfloat16 h) { return __bfloat162float(h); }

// parts (1 to kMaxParts) half copies of in, part p at out + p * stride elements: p0 = half(in), p1 = half(in - p0),
// ... (each remainder is exact in f32)
constexpr int kMaxParts = 3;
template <typename T>
__global__ void convertKernel(const float* __restrict__ in, T* __restrict__ out, int64_t stride, int parts, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    float x = in[i];
    for (int p = 0; p < parts; p++) {
      const T h = fromFloat<T>(x);
      out[p * stride + i] = h;
      x -= toFloat(h);
    }
  }
}

// C = (keep ? C : 0) + (bias ? bias[n] : 0) over batch x M x N (strided rows): the bias when no epilogue
// was available, and the whole result when K = 0.
__global__ void biasKernel(float* C, const float* bias, int64_t M, int64_t N, int64_t ldc, int64_t strideC, int64_t batch, int keep) {
  const int64_t total = batch * M * N;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t n = i % N, m = (i / N) % M, b = i / (N * M);
    float* p = C + b * strideC + m * ldc + n;
    *p = (keep ? *p : 0.f) + (bias ? bias[n] : 0.f);
  }
}

int blocksFor(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return (int)(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

cudaError_t ensure(void*& p, size_t& have, size_t want, cudaStream_t s) {
  if (have >= want) return cudaSuccess;
  if (p) cudaFreeAsync(p, s);
  p = nullptr;
  have = 0;
  cudaError_t e = cudaMallocAsync(&p, want, s);
  if (e == cudaSuccess) have = want;
  return e;
}

cudaError_t fail(Status st, const char* what) {
  rmas::lt::set_detail("cuBLASLt %s failed: %s (%d)", what, rmas::lt::status_name(st), st);
  if (st == 3) return cudaErrorMemoryAllocation;
  if (st == 7) return cudaErrorInvalidValue;
  if (st == 8 || st == 15) return cudaErrorNotSupported;
  return cudaErrorUnknown;
}

#define LT(call, what)                                     \
  do {                                                     \
    Status st_ = (call);                                   \
    if (st_ != rmas::lt::kSuccess) return fail(st_, what); \
  } while (0)

// Builds descriptors and picks an algorithm; with bias, prefers the BIAS epilogue.
cudaError_t makePlan(const rmas::lt::Api& lt, DeviceState& dev, const int64_t* v, int64_t opType, bool bias, const int* align, Plan& plan) {
  const int64_t M = v[0], N = v[1], K = v[2], batch = v[3], transA = v[4], transB = v[5];
  const int64_t lda = v[6], ldb = v[7], ldc = v[8], sA = v[9], sB = v[10], sC = v[11];
  const bool f32 = opType == rmas::F32;
  const int compute = f32 && tf32Allowed() ? rmas::lt::kCompute32FFastTF32 : rmas::lt::kCompute32F;
  LT(lt.matmulDescCreate(&plan.desc, compute, CUDA_R_32F), "MatmulDescCreate");
  const int32_t opA = transB ? rmas::lt::kOpT : rmas::lt::kOpN, opB = transA ? rmas::lt::kOpT : rmas::lt::kOpN;
  LT(lt.matmulDescSetAttribute(plan.desc, rmas::lt::kDescTransA, &opA, sizeof opA), "set TRANSA");
  LT(lt.matmulDescSetAttribute(plan.desc, rmas::lt::kDescTransB, &opB, sizeof opB), "set TRANSB");
  const cudaDataType_t t = cudaType(opType);
  LT(lt.matrixLayoutCreate(&plan.a, t, transB ? K : N, transB ? N : K, ldb), "layout B");
  LT(lt.matrixLayoutCreate(&plan.b, t, transA ? M : K, transA ? K : M, lda), "layout A");
  LT(lt.matrixLayoutCreate(&plan.c, CUDA_R_32F, N, M, ldc), "layout C");
  if (batch > 1) {
    const int32_t n = (int32_t)batch;
    const rmas::lt::MatrixLayout ls[3] = {plan.a, plan.b, plan.c};
    const int64_t strides[3] = {sB, sA, sC};
    for (int i = 0; i < 3; i++) {
      LT(lt.matrixLayoutSetAttribute(ls[i], rmas::lt::kLayoutBatchCount, &n, sizeof n), "set BATCH_COUNT");
      LT(lt.matrixLayoutSetAttribute(ls[i], rmas::lt::kLayoutStridedBatchOffset, &strides[i], sizeof strides[i]),
         "set STRIDED_BATCH_OFFSET");
    }
  }
  rmas::lt::Preference pref = nullptr;
  LT(lt.preferenceCreate(&pref), "PreferenceCreate");
  const uint64_t ws = kLtWorkspace;
  Status st = lt.preferenceSetAttribute(pref, rmas::lt::kPrefMaxWorkspaceBytes, &ws, sizeof ws);
  // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES = 5..8 (uint32): our B is cuBLASLt's A
  const uint32_t al[4] = {(uint32_t)align[1], (uint32_t)align[0], (uint32_t)align[2], (uint32_t)align[2]};
  for (int i = 0; i < 4 && st == rmas::lt::kSuccess; i++) st = lt.preferenceSetAttribute(pref, 5 + i, &al[i], sizeof al[i]);
  rmas::lt::HeuristicResult res{};
  int found = 0;
  if (st == rmas::lt::kSuccess && bias) {
    const uint32_t epi = rmas::lt::kEpilogueBias;
    const void* probe = reinterpret_cast<const void*>(uintptr_t(align[3]));  // alignment stand-in, replaced per call
    st = lt.matmulDescSetAttribute(plan.desc, rmas::lt::kDescEpilogue, &epi, sizeof epi);
    if (st == rmas::lt::kSuccess) st = lt.matmulDescSetAttribute(plan.desc, rmas::lt::kDescBiasPointer, &probe, sizeof probe);
    if (st == rmas::lt::kSuccess) st = lt.algoGetHeuristic(dev.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &res, &found);
    plan.epilogueBias = st == rmas::lt::kSuccess && found > 0 && res.state == rmas::lt::kSuccess;
    if (!plan.epilogueBias) {
      const uint32_t def = rmas::lt::kEpilogueDefault;
      st = lt.matmulDescSetAttribute(plan.desc, rmas::lt::kDescEpilogue, &def, sizeof def);
      found = 0;
    }
  }
  if (st == rmas::lt::kSuccess && !found)
    st = lt.algoGetHeuristic(dev.handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref, 1, &res, &found);
  lt.preferenceDestroy(pref);
  if (st != rmas::lt::kSuccess) return fail(st, "MatmulAlgoGetHeuristic");
  if (!found) return fail(15, "MatmulAlgoGetHeuristic (no algorithm for this shape and dtype)");
  if (res.state != rmas::lt::kSuccess) return fail(res.state, "MatmulAlgoGetHeuristic (its result)");
  plan.algo = res.algo;
  return cudaSuccess;
}

cudaError_t launchGemmLt(const rmas::LaunchArgs& a) {
  if (!rmas::counts(a, 4, 16, 1)) return cudaErrorInvalidValue;
  const int64_t* v = a.ints;
  const int64_t M = v[0], N = v[1], K = v[2], batch = v[3], transA = v[4], transB = v[5], lda = v[6], ldb = v[7], ldc = v[8];
  const int64_t sA = v[9], sB = v[10], sC = v[11], dtA = v[12], dtB = v[13], accumulate = v[14], split = v[15];
  const float alpha = (float)a.floats[0];
  float* C = rmas::ptr<float>(a, 2);
  const float* bias = rmas::ptr<const float>(a, 3);
  if (M < 0 || N < 0 || K < 0 || batch < 0) return cudaErrorInvalidValue;
  // row strides cover a row, batch strides are not negative (the conversion reads the span they describe)
  if (lda < (transA ? M : K) || ldb < (transB ? K : N) || ldc < N || sA < 0 || sB < 0 || sC < 0 || (split != 0 && split != 1)) {
    rmas::lt::set_detail("gemm_lt: lda %lld, ldb %lld, ldc %lld or a batch stride (%lld, %lld, %lld) does not fit "
                         "M %lld, N %lld, K %lld, or split %lld is not 0/1",
                         (long long)lda, (long long)ldb, (long long)ldc, (long long)sA, (long long)sB, (long long)sC, (long long)M,
                         (long long)N, (long long)K, (long long)split);
    return cudaErrorInvalidValue;
  }
  // batches of C must not overlap: the products of a batch run concurrently
  if (batch > 1 && M > 0 && N > 0 && sC < (M - 1) * ldc + N) {
    rmas::lt::set_detail("gemm_lt: strideC %lld makes the %lld batches of C [%lld, %lld] (ldc %lld) overlap", (long long)sC,
                         (long long)batch, (long long)M, (long long)N, (long long)ldc);
    return cudaErrorInvalidValue;
  }
  if (dtB != rmas::F32 && dtB != rmas::F16 && dtB != rmas::BF16) {
    rmas::lt::set_detail("gemm_lt: dtypeB %lld is not F32, F16 or BF16", (long long)dtB);
    return cudaErrorInvalidValue;
  }
  if (dtA != rmas::F32 && dtA != dtB) {
    rmas::lt::set_detail("gemm_lt: dtypeA %lld must be F32 or the dtype of B (%lld)", (long long)dtA, (long long)dtB);
    return cudaErrorInvalidValue;
  }
  if (!M || !N || !batch) return cudaSuccess;
  if (!K) {
    biasKernel<<<blocksFor(batch * M * N), 256, 0, a.stream>>>(C, bias, M, N, ldc, sC, batch, (int)accumulate);
    return cudaGetLastError();
  }
  const rmas::lt::Api* lt = rmas::lt::api();
  if (!lt) {
    rmas::lt::set_detail("gemm_lt needs cuBLASLt: %s", rmas::lt::load_error());
    return cudaErrorNotSupported;
  }
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  DeviceState& dev = g_devices[device];
  if (!dev.handle) LT(lt->create(&dev.handle), "Create");
  if (!dev.workspace) {
    size_t have = 0;
    if ((e = ensure(dev.workspace, have, kLtWorkspace, a.stream)) != cudaSuccess) return e;
  }

  // A in B's half type, same layout (lda, strideA) over the span the product reads; with split, every part of it,
  // each part 256-byte aligned
  const void* A = rmas::ptr<const void>(a, 0);
  const void* parts[kMaxParts] = {A, nullptr, nullptr};
  int nparts = 1;
  const int64_t opType = dtB;
  if (dtA == rmas::F32 && dtB != rmas::F32) {
    const int64_t rowsA = transA ? K : M, colsA = transA ? M : K;
    const int64_t span = (batch - 1) * sA + (rowsA - 1) * lda + colsA;
    const int64_t stride = (span + 127) / 128 * 128;  // elements: 256 bytes of halves
    nparts = split ? (dtB == rmas::BF16 ? 3 : 2) : 1;
    if ((e = ensure(dev.convert, dev.convertBytes, size_t(stride) * 2 * nparts, a.stream)) != cudaSuccess) return e;
    if (dtB == rmas::BF16)
      convertKernel<__nv_bfloat16><<<blocksFor(span), 256, 0, a.stream>>>(static_cast<const float*>(A),
                                                                          static_cast<__nv_bfloat16*>(dev.convert), stride, nparts, span);
    else
      convertKernel<__half><<<blocksFor(span), 256, 0, a.stream>>>(static_cast<const float*>(A), static_cast<__half*>(dev.convert), stride,
                                                                   nparts, span);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    for (int p = 0; p < nparts; p++) parts[p] = static_cast<const char*>(dev.convert) + size_t(p) * stride * 2;
    A = parts[0];
  }

  // the plan for operand A at `Aptr`, with or without the bias (the split's second product adds no bias)
  auto planFor = [&](const void* Aptr, bool withBias, Plan*& out) -> cudaError_t {
    const int align[4] = {alignmentOf(reinterpret_cast<uintptr_t>(Aptr)), alignmentOf(a.ptrs[1]), alignmentOf(a.ptrs[2]),
                          withBias ? alignmentOf(a.ptrs[3]) : 0};
    Key key{};
    for (int i = 0; i < 12; i++) key[i] = v[i];
    key[12] = opType, key[13] = withBias, key[14] = tf32Allowed(), key[15] = device;
    for (int i = 0; i < 4; i++) key[16 + i] = align[i];
    auto it = g_plans.find(key);
    if (it == g_plans.end()) {
      Plan plan;
      const cudaError_t pe = makePlan(*lt, dev, v, opType, withBias, align, plan);
      if (pe != cudaSuccess) {
        if (plan.desc) lt->matmulDescDestroy(plan.desc);
        for (auto l : {plan.a, plan.b, plan.c}) if (l) lt->matrixLayoutDestroy(l);
        return pe;
      }
      it = g_plans.emplace(key, plan).first;
    }
    out = &it->second;
    return cudaSuccess;
  };
  Plan* plan = nullptr;
  if ((e = planFor(A, bias != nullptr, plan)) != cudaSuccess) return e;
  if (plan->epilogueBias) LT(lt->matmulDescSetAttribute(plan->desc, rmas::lt::kDescBiasPointer, &bias, sizeof bias), "set BIAS_POINTER");
  const float beta = accumulate ? 1.f : 0.f;
  LT(lt->matmul(dev.handle, plan->desc, &alpha, rmas::ptr<const void>(a, 1), plan->a, A, plan->b, &beta, C, plan->c, C, plan->c,
                &plan->algo, dev.workspace, kLtWorkspace, a.stream),
     "Matmul");
  const bool biasPending = bias && !plan->epilogueBias;
  for (int p = 1; p < nparts; p++) {
    Plan* partPlan = nullptr;
    if ((e = planFor(parts[p], false, partPlan)) != cudaSuccess) return e;
    const float one = 1.f;
    LT(lt->matmul(dev.handle, partPlan->desc, &alpha, rmas::ptr<const void>(a, 1), partPlan->a, parts[p], partPlan->b, &one, C,
                  partPlan->c, C, partPlan->c, &partPlan->algo, dev.workspace, kLtWorkspace, a.stream),
       "Matmul (split, a lower part)");
  }
  if (biasPending) biasKernel<<<blocksFor(batch * M * N), 256, 0, a.stream>>>(C, bias, M, N, ldc, sC, batch, 1);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("gemm_lt", launchGemmLt);
