// A CPU emulation of the part of NVIDIA cuBLASLt that our addon calls (src/cublaslt.h lists the entry points and the
// ABI values; src/gemm_lt.cu is the caller). Built as a plain shared library with g++ and no CUDA headers
// (scripts/build-cuda-emu.mjs does this):
//
//   g++ -std=c++17 -O2 -fPIC -shared -ffp-contract=off -o libcublasLt_emu.so native/cuda/emu/cublaslt_emu.cc
//
// (on glibc older than 2.34 add -pthread: large products use std::thread). The emulated addon loads it from beside
// itself; RMAS_CUBLASLT=<path> points any build at it. "Device" pointers are host pointers here and every call runs
// synchronously on the calling thread (as the emulator's streams do); the stream argument is ignored.
//
// What it computes: D = alpha * op(A) * op(B) + beta * C (+ bias[row] with the BIAS epilogue), column-major, strided
// batches. Every product is exact in double (f32, f16, bf16 and TF32 values all fit), each dot product is summed in
// double in increasing k and rounded to f32 once, after alpha, beta * C and the bias are added (also in double).
// The GPU accumulates in f32, in an order that depends on the algorithm (split-K, tensor-core fragments), and rounds
// at each step, so compare against the GPU with a tolerance; results here are deterministic.
//
// What it refuses, to make a wrong use fail here as it would (or worse, silently) on a GPU:
//  - INVALID_VALUE (7): a null or destroyed descriptor; an attribute buffer of the wrong size; ld < rows; a zero
//    dimension or batch count < 1 (the addon never sends them; real versions differ on empty shapes); op(A), op(B),
//    C, D dimensions or batch counts that disagree; requestedAlgoCount < 1; null alpha/beta/A/B/D, or null C with
//    beta != 0; a pointer not aligned to its element size (the GPU would fault with a misaligned address); an algo
//    from our heuristic for another problem, or computed for a larger MIN_ALIGNMENT_*_BYTES (or bias-pointer
//    alignment) than the pointer now given has; the BIAS epilogue with a null bias pointer; C == D with layouts
//    that differ. Stricter than the real library (which leaves these undefined): D overlapping A, B, the bias or
//    (when beta != 0) a different C, and batch entries of D that overlap one another (e.g. stride 0 with batch > 1).
//  - NOT_SUPPORTED (15): compute types other than CUBLAS_COMPUTE_32F (68) and 32F_FAST_TF32 (77), a scale type other
//    than CUDA_R_32F, pointer modes other than host, TRANSC != N, TRANSA/TRANSB = CUBLAS_OP_C (2; the real library
//    may take it as T for real types, we never send it), epilogues other than DEFAULT (1) and BIAS (4), a bias data
//    type other than f32, matrix orders other than column-major, element types other than f32/f16/bf16, A and B of
//    different types, C or D not f32, half inputs with FAST_TF32, search modes other than best fit, a preferred
//    alignment smaller than an element (no kernel could run), and descriptor attributes we do not model (so a new
//    use shows up here instead of being silently ignored).
// A heuristic that refuses sets *returnAlgoCount = 0; one that accepts returns one algorithm (its data names the
// problem and the alignments it assumed, workspaceSize 0, wavesCount 1). A null preference is INVALID_VALUE.
// Preference attributes other than SEARCH_MODE, MAX_WORKSPACE_BYTES and MIN_ALIGNMENT_*_BYTES are accepted
// (4 or 8 bytes) and ignored; unknown layout attributes are NOT_SUPPORTED. cublasLtMatmul with a null algo picks
// its own (any alignment from the element size up).
//
// Test switch: CUBLASLT_EMU_NO_BIAS_EPILOGUE=1 makes the heuristic find no algorithm for the BIAS epilogue (as
// happens for some shapes and GPUs), to exercise the caller's fallback.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <vector>

#define LT_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0, kNotInitialized = 1, kAllocFailed = 3, kInvalidValue = 7, kNotSupported = 15;
constexpr int kR32F = 0, kR16F = 2, kR16BF = 14;               // cudaDataType_t
constexpr int kCompute32F = 68, kCompute32FFastTF32 = 77;      // cublasComputeType_t
constexpr uint32_t kEpiDefault = 1, kEpiBias = 4;              // cublasLtEpilogue_t
constexpr uint64_t kAlgoMagic = 0x554d454c54534c42ull;          // "BLSTLEMU": an algo we filled

struct Algo { uint64_t data[8]; };  // cublasLtMatmulAlgo_t
struct HeuristicResult {             // cublasLtMatmulHeuristicResult_t
  Algo algo;
  size_t workspaceSize;
  int state;
  float wavesCount;
  int reserved[4];
};

struct Handle { int unused = 0; };
struct Desc {
  int32_t compute, scale, pointerMode = 0, transA = 0, transB = 0, transC = 0, fillMode = 2, smTarget = 0, biasType = -1;
  uint32_t epilogue = kEpiDefault;
  const void* bias = nullptr;
  int64_t biasStride = 0;
};
struct Layout {
  uint32_t type;
  int32_t order = 0;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0, planeOffset = 0;
};
struct Pref {
  uint32_t searchMode = 0;
  uint64_t maxWorkspace = 0;
  uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D
};

// Live objects by kind, so a destroyed or foreign pointer is refused instead of read.
enum Kind { kHandle, kDesc, kLayout, kPref };
std::mutex g_mu;
std::unordered_map<const void*, Kind> g_live;

template <typename T>
T* live(const void* p, Kind k) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_live.find(p);
  return p && it != g_live.end() && it->second == k ? static_cast<T*>(const_cast<void*>(p)) : nullptr;
}
template <typename T, typename... Args>
int make(T** out, Kind k, Args&&... args) {
  if (!out) return kInvalidValue;
  T* p = new (std::nothrow) T{std::forward<Args>(args)...};
  if (!p) return kAllocFailed;
  std::lock_guard<std::mutex> lock(g_mu);
  g_live[p] = k;
  *out = p;
  return kSuccess;
}
template <typename T>
int destroy(void* p, Kind k) {
  if (!p) return kSuccess;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_live.find(p);
    if (it == g_live.end() || it->second != k) return kInvalidValue;
    g_live.erase(it);
  }
  delete static_cast<T*>(p);
  return kSuccess;
}

// An attribute value of exactly sizeof(T) bytes.
template <typename T>
int read(const void* buf, size_t size, T& out) {
  if (!buf || size != sizeof(T)) return kInvalidValue;
  std::memcpy(&out, buf, sizeof(T));
  return kSuccess;
}

int elemSize(uint32_t t) { return t == kR32F ? 4 : 2; }
// The largest power of two dividing p, at most 256 (null counts as 256, as the heuristic sees a probe pointer).
uint32_t alignOf(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a) a >>= 1;
  return a;
}

// Decoders. f16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; bf16: the top half of an f32.
float f16(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(float(1024 + m), e - 25);
  return (h & 0x8000) ? -v : v;
}
float bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// f32 -> TF32 (10 mantissa bits), round to nearest with ties away from zero like cvt.rna.tf32.f32; inf/nan kept.
// (A GPU kernel that feeds raw f32 to the tensor cores truncates instead: either way within one TF32 ulp.)
float tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &u, 4);
  return x;
}
float load(const void* base, uint32_t type, int64_t i, bool roundTf32) {
  if (type == kR16F) return f16(static_cast<const uint16_t*>(base)[i]);
  if (type == kR16BF) return bf16(static_cast<const uint16_t*>(base)[i]);
  const float v = static_cast<const float*>(base)[i];
  return roundTf32 ? tf32(v) : v;
}

// One layout on its own: column-major, a type we decode, ld >= rows, non-empty.
int checkLayout(const Layout& l) {
  if (l.order != 0 || l.planeOffset != 0) return kNotSupported;
  if (l.type != kR32F && l.type != kR16F && l.type != kR16BF) return kNotSupported;
  if (l.rows == 0 || l.cols == 0 || l.batch < 1 || l.ld < 0 || uint64_t(l.ld) < l.rows) return kInvalidValue;
  if (l.rows > INT32_MAX || l.cols > INT32_MAX) return kNotSupported;
  return kSuccess;
}

struct Problem {
  const Desc* desc;
  const Layout *a, *b, *c, *d;
  int64_t m, n, k;
  bool ta, tb;
  uint64_t fingerprint;
};

uint64_t fnv(uint64_t h, int64_t v) {
  for (int i = 0; i < 8; i++) h = (h ^ uint64_t((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}

// Everything the heuristic and the matmul check before any pointer is looked at.
int checkProblem(const void* descP, const void* aP, const void* bP, const void* cP, const void* dP, Problem& p) {
  p.desc = live<Desc>(descP, kDesc);
  p.a = live<Layout>(aP, kLayout), p.b = live<Layout>(bP, kLayout), p.c = live<Layout>(cP, kLayout), p.d = live<Layout>(dP, kLayout);
  if (!p.desc || !p.a || !p.b || !p.c || !p.d) return kInvalidValue;
  const Desc& s = *p.desc;
  if (s.pointerMode != 0 || s.transC != 0 || (s.epilogue != kEpiDefault && s.epilogue != kEpiBias)) return kNotSupported;
  if (s.biasType != -1 && s.biasType != kR32F) return kNotSupported;
  for (const Layout* l : {p.a, p.b, p.c, p.d})
    if (int st = checkLayout(*l)) return st;
  if (p.a->type != p.b->type || p.c->type != kR32F || p.d->type != kR32F) return kNotSupported;
  if (s.compute == kCompute32FFastTF32 && p.a->type != kR32F) return kNotSupported;
  p.ta = s.transA == 1, p.tb = s.transB == 1;
  p.m = p.ta ? p.a->cols : p.a->rows, p.k = p.ta ? p.a->rows : p.a->cols;
  const int64_t kb = p.tb ? p.b->cols : p.b->rows;
  p.n = p.tb ? p.b->rows : p.b->cols;
  if (kb != p.k) return kInvalidValue;
  for (const Layout* l : {p.c, p.d})
    if (int64_t(l->rows) != p.m || int64_t(l->cols) != p.n) return kInvalidValue;
  if (p.b->batch != p.a->batch || p.c->batch != p.a->batch || p.d->batch != p.a->batch) return kInvalidValue;
  uint64_t h = 0xcbf29ce484222325ull;
  for (int64_t v : {p.m, p.n, p.k, int64_t(p.a->batch), int64_t(p.a->type), int64_t(p.ta), int64_t(p.tb), int64_t(s.compute),
                    int64_t(s.epilogue)})
    h = fnv(h, v);
  p.fingerprint = h;
  return kSuccess;
}

bool noBiasEpilogue() {
  const char* v = std::getenv("CUBLASLT_EMU_NO_BIAS_EPILOGUE");
  return v && std::strcmp(v, "1") == 0;
}

// Byte range [lo, hi) a strided batch of matrices touches.
struct Span { uintptr_t lo, hi; };
Span spanOf(const void* p, const Layout& l, int64_t es) {
  int64_t lo = 0, hi = (int64_t(l.cols) - 1) * l.ld + int64_t(l.rows);
  (l.stride < 0 ? lo : hi) += (l.batch - 1) * l.stride;
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  return {base + uintptr_t(lo * es), base + uintptr_t(hi * es)};
}
bool overlap(Span x, Span y) { return x.lo < y.hi && y.lo < x.hi; }

// Whether two entries of a strided batch share an element: entries t apart start d = t*|stride| elements apart and
// overlap when some column offset q (|q| < cols) brings d within a column (|d - q*ld| < rows); as ld >= rows only
// q = floor(d/ld) and the next one can, and only d below the matrix span matters.
bool batchSelfOverlap(const Layout& l) {
  const int64_t s = l.stride < 0 ? -l.stride : l.stride, rows = l.rows, cols = l.cols, ld = l.ld;
  const int64_t extent = (cols - 1) * ld + rows;
  for (int64_t t = 1; t < l.batch && t * s < extent; t++) {
    const int64_t d = t * s, q0 = d / ld;
    for (int64_t q = q0; q <= q0 + 1; q++)
      if (q < cols && std::llabs(d - q * ld) < rows) return true;
  }
  return false;
}

// The product of batch entry `batch`, columns [j0, j1) of D.
void compute(const Problem& p, float alpha, float beta, const void* A, const void* B, const float* C, float* D, const float* bias,
             int64_t batch, int64_t j0, int64_t j1) {
  const bool round = p.desc->compute == kCompute32FFastTF32;
  const Layout &la = *p.a, &lb = *p.b, &lc = *p.c, &ld = *p.d;
  const int64_t m = p.m, k = p.k, oa = batch * la.stride, ob = batch * lb.stride;
  // op(A) by rows and op(B) by columns, decoded, so each dot product reads two contiguous rows
  std::vector<float> ra(static_cast<size_t>(m * k)), cb(static_cast<size_t>(k));
  for (int64_t i = 0; i < m; i++)
    for (int64_t q = 0; q < k; q++) ra[size_t(i * k + q)] = load(A, la.type, oa + (p.ta ? q + i * la.ld : i + q * la.ld), round);
  for (int64_t j = j0; j < j1; j++) {
    for (int64_t q = 0; q < k; q++) cb[size_t(q)] = load(B, lb.type, ob + (p.tb ? j + q * lb.ld : q + j * lb.ld), round);
    float* dcol = D + batch * ld.stride + j * ld.ld;
    const float* ccol = C ? C + batch * lc.stride + j * lc.ld : nullptr;
    for (int64_t i = 0; i < m; i++) {
      const float* r = &ra[size_t(i * k)];
      double acc = 0;
      for (int64_t q = 0; q < k; q++) acc += double(r[q]) * double(cb[size_t(q)]);
      double v = double(alpha) * acc;
      if (beta != 0.f) v += double(beta) * double(ccol[i]);  // beta == 0: C is not read, so NaN there stays out
      if (bias) v += double(bias[batch * p.desc->biasStride + i]);
      dcol[i] = float(v);
    }
  }
}

}  // namespace

LT_API int cublasLtCreate(Handle** handle) { return make<Handle>(handle, kHandle); }
LT_API int cublasLtDestroy(Handle* handle) {
  if (!live<Handle>(handle, kHandle)) return kNotInitialized;
  return destroy<Handle>(handle, kHandle);
}
// 13.99.99 in cuBLAS's major*10000 + minor*100 + patch: no real release, so a version check can tell the emulation.
LT_API size_t cublasLtGetVersion() { return 139999; }

LT_API int cublasLtMatmulDescCreate(Desc** desc, int computeType, int scaleType) {
  if (!desc) return kInvalidValue;
  if (computeType != kCompute32F && computeType != kCompute32FFastTF32) return kNotSupported;
  if (scaleType != kR32F) return kNotSupported;
  return make<Desc>(desc, kDesc, computeType, scaleType);
}
LT_API int cublasLtMatmulDescDestroy(Desc* desc) { return destroy<Desc>(desc, kDesc); }
LT_API int cublasLtMatmulDescSetAttribute(Desc* descP, int attr, const void* buf, size_t size) {
  Desc* d = live<Desc>(descP, kDesc);
  if (!d) return kInvalidValue;
  int32_t i32 = 0;
  int st;
  switch (attr) {
    case 0:  // COMPUTE_TYPE
      if ((st = read(buf, size, i32))) return st;
      if (i32 != kCompute32F && i32 != kCompute32FFastTF32) return kNotSupported;
      d->compute = i32;
      return kSuccess;
    case 1:  // SCALE_TYPE
      if ((st = read(buf, size, i32))) return st;
      if (i32 != kR32F) return kNotSupported;
      d->scale = i32;
      return kSuccess;
    case 2: return read(buf, size, d->pointerMode);  // checked at use: host only
    case 3:  // TRANSA
    case 4:  // TRANSB
      if ((st = read(buf, size, i32))) return st;
      if (i32 == 2) return kNotSupported;  // CUBLAS_OP_C
      if (i32 != 0 && i32 != 1) return kInvalidValue;
      (attr == 3 ? d->transA : d->transB) = i32;
      return kSuccess;
    case 5: return read(buf, size, d->transC);      // checked at use: N only
    case 6: return read(buf, size, d->fillMode);    // ignored (full matrices)
    case 7: return read(buf, size, d->epilogue);    // checked at use: DEFAULT or BIAS
    case 8: return read(buf, size, d->bias);        // BIAS_POINTER
    case 10: return read(buf, size, d->biasStride); // BIAS_BATCH_STRIDE (elements)
    case 15: return read(buf, size, d->smTarget);   // SM_COUNT_TARGET, ignored
    case 26: return read(buf, size, d->biasType);   // BIAS_DATA_TYPE: -1 (= D's type) or f32
    default: return kNotSupported;
  }
}

LT_API int cublasLtMatrixLayoutCreate(Layout** layout, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  return make<Layout>(layout, kLayout, uint32_t(type), 0, rows, cols, ld);
}
LT_API int cublasLtMatrixLayoutDestroy(Layout* layout) { return destroy<Layout>(layout, kLayout); }
LT_API int cublasLtMatrixLayoutSetAttribute(Layout* layoutP, int attr, const void* buf, size_t size) {
  Layout* l = live<Layout>(layoutP, kLayout);
  if (!l) return kInvalidValue;
  switch (attr) {
    case 0: return read(buf, size, l->type);
    case 1: return read(buf, size, l->order);  // checked at use: column-major only
    case 2: return read(buf, size, l->rows);
    case 3: return read(buf, size, l->cols);
    case 4: return read(buf, size, l->ld);
    case 5: return read(buf, size, l->batch);
    case 6: return read(buf, size, l->stride);
    case 7: return read(buf, size, l->planeOffset);
    default: return kNotSupported;
  }
}

LT_API int cublasLtMatmulPreferenceCreate(Pref** pref) { return make<Pref>(pref, kPref); }
LT_API int cublasLtMatmulPreferenceDestroy(Pref* pref) { return destroy<Pref>(pref, kPref); }
LT_API int cublasLtMatmulPreferenceSetAttribute(Pref* prefP, int attr, const void* buf, size_t size) {
  Pref* p = live<Pref>(prefP, kPref);
  if (!p) return kInvalidValue;
  switch (attr) {
    case 0: return read(buf, size, p->searchMode);
    case 1: return read(buf, size, p->maxWorkspace);
    case 5: case 6: case 7: case 8: return read(buf, size, p->align[attr - 5]);
    case 3: case 9: case 12:  // REDUCTION_SCHEME_MASK (u32), MAX_WAVES_COUNT (float), IMPL_MASK (u64): ignored
      return buf && size == (attr == 12 ? 8u : 4u) ? kSuccess : kInvalidValue;
    default: return buf && (size == 4 || size == 8) ? kSuccess : kInvalidValue;
  }
}

LT_API int cublasLtMatmulAlgoGetHeuristic(Handle* handle, Desc* desc, Layout* a, Layout* b, Layout* c, Layout* d, Pref* prefP,
                                          int requested, HeuristicResult* results, int* returned) {
  if (!live<Handle>(handle, kHandle)) return kNotInitialized;
  if (returned) *returned = 0;
  if (requested < 1 || !results || !returned) return kInvalidValue;
  const Pref* pref = live<Pref>(prefP, kPref);
  if (!pref) return kInvalidValue;
  Problem p;
  if (int st = checkProblem(desc, a, b, c, d, p)) return st;
  if (pref->searchMode != 0) return kNotSupported;
  const uint32_t need[4] = {uint32_t(elemSize(p.a->type)), uint32_t(elemSize(p.b->type)), 4, 4};
  for (int i = 0; i < 4; i++)
    if (pref->align[i] < need[i]) return kNotSupported;  // no kernel reads elements below their own alignment
  if (p.desc->epilogue == kEpiBias && noBiasEpilogue()) return kNotSupported;
  HeuristicResult& r = results[0];
  std::memset(&r, 0, sizeof r);
  // What the algo was chosen for: the problem, and the pointer alignments it may assume (capped at 256, the most
  // alignOf reports). The bias pointer is not dereferenced here; its value gives the alignment, as in cuBLASLt.
  r.algo.data[0] = kAlgoMagic;
  r.algo.data[1] = p.fingerprint;
  for (int i = 0; i < 4; i++) r.algo.data[2] |= uint64_t(std::min<uint32_t>(pref->align[i], 256)) << (16 * i);
  r.algo.data[3] = p.desc->epilogue == kEpiBias ? alignOf(p.desc->bias) : 0;
  r.algo.data[4] = uint64_t(p.m), r.algo.data[5] = uint64_t(p.n), r.algo.data[6] = uint64_t(p.k), r.algo.data[7] = uint64_t(p.a->batch);
  r.workspaceSize = 0;
  r.state = kSuccess;
  r.wavesCount = 1.f;
  *returned = 1;
  return kSuccess;
}

LT_API int cublasLtMatmul(Handle* handle, Desc* desc, const void* alphaP, const void* A, Layout* aL, const void* B, Layout* bL,
                          const void* betaP, const void* Cv, Layout* cL, void* Dv, Layout* dL, const Algo* algo, void* workspace,
                          size_t workspaceBytes, void* /*stream*/) {
  if (!live<Handle>(handle, kHandle)) return kNotInitialized;
  Problem p;
  if (int st = checkProblem(desc, aL, bL, cL, dL, p)) return st;
  if (!alphaP || !betaP || !A || !B || !Dv) return kInvalidValue;
  if (!workspace && workspaceBytes) return kInvalidValue;
  const float alpha = *static_cast<const float*>(alphaP), beta = *static_cast<const float*>(betaP);
  const float* C = beta != 0.f ? static_cast<const float*>(Cv) : nullptr;
  float* D = static_cast<float*>(Dv);
  if (beta != 0.f && !C) return kInvalidValue;
  const bool withBias = p.desc->epilogue == kEpiBias;
  const float* bias = withBias ? static_cast<const float*>(p.desc->bias) : nullptr;
  if (withBias && !bias) return kInvalidValue;
  // element alignment: below it the GPU faults (misaligned address)
  const int esA = elemSize(p.a->type), esB = elemSize(p.b->type);
  if (alignOf(A) < uint32_t(esA) || alignOf(B) < uint32_t(esB) || alignOf(D) < 4 || (C && alignOf(C) < 4) ||
      (bias && alignOf(bias) < 4))
    return kInvalidValue;
  if (algo) {
    if (algo->data[0] != kAlgoMagic || algo->data[1] != p.fingerprint) return kInvalidValue;
    const void* ptrs[4] = {A, B, Cv, D};
    for (int i = 0; i < 4; i++) {
      if (i == 2 && !C) continue;
      if (alignOf(ptrs[i]) < ((algo->data[2] >> (16 * i)) & 0xffff)) return kInvalidValue;  // the kernel assumed more
    }
    if (bias && alignOf(bias) < algo->data[3]) return kInvalidValue;
  } else if (withBias && noBiasEpilogue()) {
    return kNotSupported;
  }
  // in place only as C == D with one layout; no other aliasing of the output
  const Layout &la = *p.a, &lb = *p.b, &lc = *p.c, &ld = *p.d;
  const Span sd = spanOf(D, ld, 4);
  if (Cv == Dv) {
    if (lc.type != ld.type || lc.rows != ld.rows || lc.cols != ld.cols || lc.ld != ld.ld || lc.order != ld.order ||
        lc.batch != ld.batch || lc.stride != ld.stride)
      return kInvalidValue;
  } else if (C && overlap(sd, spanOf(C, lc, 4))) {
    return kInvalidValue;
  }
  if (overlap(sd, spanOf(A, la, esA)) || overlap(sd, spanOf(B, lb, esB))) return kInvalidValue;
  if (bias) {
    const int64_t bs = p.desc->biasStride, lo = std::min<int64_t>(0, (la.batch - 1) * bs),
                  hi = std::max<int64_t>(0, (la.batch - 1) * bs) + p.m;
    const uintptr_t base = reinterpret_cast<uintptr_t>(bias);
    if (overlap(sd, {base + uintptr_t(lo * 4), base + uintptr_t(hi * 4)})) return kInvalidValue;
  }
  if (batchSelfOverlap(ld)) return kInvalidValue;

  // RMAS_CUDA_EMU_DRYRUN=1 (the emulator's dry run): everything above is checked, nothing is computed
  static const bool dryRun = [] {
    const char* v = std::getenv("RMAS_CUDA_EMU_DRYRUN");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (dryRun) return kSuccess;

  // Columns of D are independent; large products split them over threads (each element's sum order is unchanged).
  const int64_t batches = la.batch, n = p.n;
  const double work = double(p.m) * double(n) * double(p.k);  // per batch entry
  const int threads = work < double(1 << 22) ? 1 : int(std::max(1u, std::min(std::thread::hardware_concurrency(), 32u)));
  for (int64_t bt = 0; bt < batches; bt++) {
    if (threads == 1 || n < 2) {
      compute(p, alpha, beta, A, B, C, D, bias, bt, 0, n);
      continue;
    }
    const int use = int(std::min<int64_t>(threads, n));
    std::vector<std::thread> pool;
    for (int t = 0; t < use; t++)
      pool.emplace_back(compute, std::cref(p), alpha, beta, A, B, C, D, bias, bt, n * t / use, n * (t + 1) / use);
    for (auto& th : pool) th.join();
  }
  return kSuccess;
}
