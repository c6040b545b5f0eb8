// Self-check of the cuBLASLt emulation (cublaslt_emu.cc). It dlopen()s the library and resolves the 14 entry points
// by name with the signatures of rmas::lt::Api (src/cublaslt.h), as the addon does, then checks numbers and errors.
//
//   g++ -std=c++17 -O2 -fPIC -shared -ffp-contract=off -o /tmp/libcublasLt_emu.so native/cuda/emu/cublaslt_emu.cc
//   g++ -std=c++17 -O2 -ffp-contract=off -o /tmp/cublaslt_emu_check native/cuda/emu/cublaslt_emu_check.cc -ldl
//   /tmp/cublaslt_emu_check /tmp/libcublasLt_emu.so
//
// Prints one line per check; exits 1 when any fails.
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// ABI values (see src/cublaslt.h)
enum { OK = 0, NOT_INITIALIZED = 1, INVALID = 7, NOT_SUPPORTED = 15 };
enum { R32F = 0, R16F = 2, R16BF = 14, C32F = 68, C32F_TF32 = 77 };
enum { D_COMPUTE = 0, D_TRANSA = 3, D_TRANSB = 4, D_EPILOGUE = 7, D_BIAS = 8 };
enum { L_ORDER = 1, L_BATCH = 5, L_STRIDE = 6 };
enum { P_WORKSPACE = 1, P_ALIGN_A = 5 };
constexpr uint32_t EPI_DEFAULT = 1, EPI_BIAS = 4;

using H = void*;
struct Algo { uint64_t data[8]; };
struct Result { Algo algo; size_t workspaceSize; int state; float wavesCount; int reserved[4]; };

struct Api {
  int (*create)(H*);
  int (*destroy)(H);
  size_t (*getVersion)();
  int (*descCreate)(H*, int, int);
  int (*descDestroy)(H);
  int (*descSet)(H, int, const void*, size_t);
  int (*layoutCreate)(H*, int, uint64_t, uint64_t, int64_t);
  int (*layoutDestroy)(H);
  int (*layoutSet)(H, int, const void*, size_t);
  int (*prefCreate)(H*);
  int (*prefDestroy)(H);
  int (*prefSet)(H, int, const void*, size_t);
  int (*heuristic)(H, H, H, H, H, H, H, int, Result*, int*);
  int (*matmul)(H, H, const void*, const void*, H, const void*, H, const void*, const void*, H, void*, H, const Algo*, void*, size_t,
                void*);
} lt;

int g_failed = 0;
void check(bool ok, const char* what) {
  std::printf("%s  %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) g_failed++;
}
void checkStatus(int got, int want, const char* what) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (status %d, want %d)", what, got, want);
  check(got == want, buf);
}

// 256-aligned buffers, like cudaMalloc's
template <typename T>
struct Buf {
  T* p;
  explicit Buf(size_t n, T fill = T()) : p(static_cast<T*>(std::aligned_alloc(256, ((n * sizeof(T) + 255) / 256 + 1) * 256))) {
    for (size_t i = 0; i < n; i++) p[i] = fill;
  }
  ~Buf() { std::free(p); }
  T& operator[](size_t i) { return p[i]; }
};

H layout(int type, uint64_t rows, uint64_t cols, int64_t ld, int32_t batch = 1, int64_t stride = 0) {
  H l = nullptr;
  lt.layoutCreate(&l, type, rows, cols, ld);
  if (batch != 1 || stride) {
    lt.layoutSet(l, L_BATCH, &batch, sizeof batch);
    lt.layoutSet(l, L_STRIDE, &stride, sizeof stride);
  }
  return l;
}
H desc(int compute = C32F, int32_t ta = 0, int32_t tb = 0, uint32_t epi = EPI_DEFAULT, const void* bias = nullptr) {
  H d = nullptr;
  lt.descCreate(&d, compute, R32F);
  lt.descSet(d, D_TRANSA, &ta, sizeof ta);
  lt.descSet(d, D_TRANSB, &tb, sizeof tb);
  lt.descSet(d, D_EPILOGUE, &epi, sizeof epi);
  if (bias) lt.descSet(d, D_BIAS, &bias, sizeof bias);
  return d;
}

H g_handle;

// heuristic (default preference: 256-byte alignment, 32 MiB workspace) then matmul with its algo
int run(H d, const void* A, H la, const void* B, H lb, const float* C, H lc, float* D, H ldd, float alpha, float beta,
        bool useAlgo = true) {
  H pref = nullptr;
  lt.prefCreate(&pref);
  const uint64_t ws = 32u << 20;
  lt.prefSet(pref, P_WORKSPACE, &ws, sizeof ws);
  Result r{};
  int found = 0;
  int st = lt.heuristic(g_handle, d, la, lb, lc, ldd, pref, 1, &r, &found);
  lt.prefDestroy(pref);
  if (st != OK) return st;
  if (found != 1 || r.state != OK) return -1;
  return lt.matmul(g_handle, d, &alpha, A, la, B, lb, &beta, C, lc, D, ldd, useAlgo ? &r.algo : nullptr, nullptr, 0, nullptr);
}

// naive column-major reference in double
void reference(int64_t m, int64_t n, int64_t k, bool ta, bool tb, const float* A, int64_t lda, const float* B, int64_t ldb, const float* C,
               int64_t ldc, float* D, int64_t ldd, float alpha, float beta) {
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++) {
      double acc = 0;
      for (int64_t q = 0; q < k; q++) acc += double(ta ? A[q + i * lda] : A[i + q * lda]) * double(tb ? B[j + q * ldb] : B[q + j * ldb]);
      D[i + j * ldd] = float(double(alpha) * acc + (beta != 0 ? double(beta) * C[i + j * ldc] : 0.0));
    }
}

float lcg(uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return float(int((s >> 9) % 2001) - 1000) / 256.f;  // multiples of 1/256 in [-3.9, 3.9]
}

bool near(float a, float b) { return std::fabs(a - b) <= 1e-6f * std::max(1.f, std::fabs(b)); }

void handPicked() {
  // A = [1 2 3; 4 5 6] (2x3), B = [7 8; 9 10; 11 12] (3x2), column-major; A*B = [58 64; 139 154]
  Buf<float> A(6), B(6), D(4, NAN);
  const float a[] = {1, 4, 2, 5, 3, 6}, b[] = {7, 9, 11, 8, 10, 12};
  std::memcpy(A.p, a, sizeof a), std::memcpy(B.p, b, sizeof b);
  H la = layout(R32F, 2, 3, 2), lb = layout(R32F, 3, 2, 3), lc = layout(R32F, 2, 2, 2), d = desc();
  int st = run(d, A.p, la, B.p, lb, nullptr, lc, D.p, lc, 1.f, 0.f);
  check(st == OK && D[0] == 58 && D[1] == 139 && D[2] == 64 && D[3] == 154, "2x3 * 3x2 f32 by hand = [58 64; 139 154]");

  // BIAS epilogue: + [100, 200] per row of D
  Buf<float> bias(2);
  bias[0] = 100, bias[1] = 200;
  H db = desc(C32F, 0, 0, EPI_BIAS, bias.p);
  st = run(db, A.p, la, B.p, lb, nullptr, lc, D.p, lc, 1.f, 0.f);
  check(st == OK && D[0] == 158 && D[1] == 339 && D[2] == 164 && D[3] == 354, "BIAS epilogue adds bias[row] to every column");

  // beta = 0: C full of NaN is not read
  Buf<float> C(4, NAN);
  st = run(d, A.p, la, B.p, lb, C.p, lc, D.p, lc, 2.f, 0.f);
  check(st == OK && D[0] == 116 && D[1] == 278 && D[2] == 128 && D[3] == 308, "beta = 0 ignores NaN in C (alpha = 2)");

  // beta = 1, in place (C == D): accumulates
  for (int i = 0; i < 4; i++) D[i] = 1000.f * (i + 1);
  st = run(d, A.p, la, B.p, lb, D.p, lc, D.p, lc, 1.f, 1.f);
  check(st == OK && D[0] == 1058 && D[1] == 2139 && D[2] == 3064 && D[3] == 4154, "beta = 1 in place accumulates into D");

  // beta = 0.5 out of place with bias
  for (int i = 0; i < 4; i++) C[i] = 2.f;
  st = run(db, A.p, la, B.p, lb, C.p, lc, D.p, lc, 1.f, 0.5f);
  check(st == OK && D[0] == 159 && D[1] == 340 && D[2] == 165 && D[3] == 355, "alpha*AB + beta*C + bias");
  for (H l : {la, lb, lc}) lt.layoutDestroy(l);
  lt.descDestroy(d), lt.descDestroy(db);
}

void transposes() {
  const int64_t m = 3, n = 4, k = 5;
  uint32_t seed = 1;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      // stored shapes with padded leading dimensions
      const int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
      const int64_t lda = ra + 2, ldb = rb + 1, ldc = m + 3;
      Buf<float> A(lda * ca), B(ldb * cb), C(ldc * n), D(ldc * n, NAN), R(ldc * n, NAN);
      for (int64_t i = 0; i < lda * ca; i++) A[i] = lcg(seed);
      for (int64_t i = 0; i < ldb * cb; i++) B[i] = lcg(seed);
      for (int64_t i = 0; i < ldc * n; i++) C[i] = lcg(seed);
      H la = layout(R32F, ra, ca, lda), lb = layout(R32F, rb, cb, ldb), lc = layout(R32F, m, n, ldc), d = desc(C32F, ta, tb);
      const int st = run(d, A.p, la, B.p, lb, C.p, lc, D.p, lc, 1.5f, -0.5f);
      reference(m, n, k, ta, tb, A.p, lda, B.p, ldb, C.p, ldc, R.p, ldc, 1.5f, -0.5f);
      bool ok = st == OK;
      for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++) ok = ok && near(D[i + j * ldc], R[i + j * ldc]);
      for (int64_t j = 0; j < n; j++)  // padding rows of D untouched
        for (int64_t i = m; i < ldc; i++) ok = ok && std::isnan(D[i + j * ldc]);
      char what[96];
      std::snprintf(what, sizeof what, "op pair (%s, %s) 3x5 * 5x4 with padded ld matches the reference", ta ? "T" : "N", tb ? "T" : "N");
      check(ok, what);
      for (H l : {la, lb, lc}) lt.layoutDestroy(l);
      lt.descDestroy(d);
    }
}

void batched() {
  // batch 3: A broadcast (stride 0), B and D strided with gaps
  const int64_t m = 4, n = 3, k = 2, batch = 3, sB = k * n + 5, sD = m * n + 7;
  uint32_t seed = 7;
  Buf<float> A(m * k), B(sB * batch), D(sD * batch, NAN), R(sD * batch, NAN);
  for (int64_t i = 0; i < m * k; i++) A[i] = lcg(seed);
  for (int64_t i = 0; i < sB * batch; i++) B[i] = lcg(seed);
  H la = layout(R32F, m, k, m, batch, 0), lb = layout(R32F, k, n, k, batch, sB), ld = layout(R32F, m, n, m, batch, sD), d = desc();
  const int st = run(d, A.p, la, B.p, lb, nullptr, ld, D.p, ld, 1.f, 0.f);
  bool ok = st == OK;
  for (int64_t b = 0; b < batch; b++) {
    reference(m, n, k, false, false, A.p, m, B.p + b * sB, k, nullptr, m, R.p + b * sD, m, 1.f, 0.f);
    for (int64_t i = 0; i < m * n; i++) ok = ok && near(D[b * sD + i], R[b * sD + i]);
    for (int64_t i = m * n; i < sD; i++) ok = ok && std::isnan(D[b * sD + i]);  // gaps untouched
  }
  check(ok, "strided batch of 3 with A broadcast (stride 0)");
  // D stride 0 with batch > 1: every entry writes the same matrix
  H lz = layout(R32F, m, n, m, batch, 0);
  checkStatus(run(d, A.p, la, B.p, lb, nullptr, lz, D.p, lz, 1.f, 0.f), INVALID, "D batch entries overlapping (stride 0) refused");
  // batch counts that disagree
  H l2 = layout(R32F, m, n, m, 2, sD);
  checkStatus(run(d, A.p, la, B.p, lb, nullptr, l2, D.p, l2, 1.f, 0.f), INVALID, "batch count of D differs from A and B");
  for (H l : {la, lb, ld, lz, l2}) lt.layoutDestroy(l);
  lt.descDestroy(d);
}

// m = patterns, k = 1, B = [1]: D[i] = decoded pattern i (a -0 comes out +0: sums start at +0, as on the GPU)
void decode(int type, const std::vector<uint16_t>& bits, const std::vector<float>& want, const char* what) {
  const int64_t m = int64_t(bits.size());
  Buf<uint16_t> A(m), B(1, uint16_t(type == R16F ? 0x3c00 : 0x3f80));
  Buf<float> D(m, 12345.f);
  for (int64_t i = 0; i < m; i++) A[i] = bits[i];
  H la = layout(type, m, 1, m), lb = layout(type, 1, 1, 1), ld = layout(R32F, m, 1, m), d = desc();
  const int st = run(d, A.p, la, B.p, lb, nullptr, ld, D.p, ld, 1.f, 0.f);
  bool ok = st == OK;
  for (int64_t i = 0; i < m; i++) {
    const bool same = std::isnan(want[i]) ? std::isnan(D[i]) : D[i] == want[i] && std::signbit(D[i]) == std::signbit(want[i]);
    if (!same) std::printf("      pattern 0x%04x: got %.9g want %.9g\n", bits[i], D[i], want[i]);
    ok = ok && same;
  }
  check(ok, what);
  for (H l : {la, lb, ld}) lt.layoutDestroy(l);
  lt.descDestroy(d);
}

void halves() {
  decode(R16F, {0x3c00, 0x0001, 0x03ff, 0x0400, 0x7bff, 0xc000, 0x3555, 0x8000, 0x7c00, 0xfc00, 0x7e00},
         {1.f, std::ldexp(1.f, -24), std::ldexp(1023.f, -24), std::ldexp(1.f, -14), 65504.f, -2.f, 0.333251953125f, 0.f, INFINITY,
          -INFINITY, NAN},
         "f16 decode: 1, subnormals 2^-24 and 1023*2^-24, 2^-14, 65504, -2, 0.33325, -0 (+0 after the sum), +-inf, nan");
  decode(R16BF, {0x3f80, 0x4040, 0xbf80, 0x0001, 0x7f7f, 0x3eaa, 0x7f80, 0x7fc0},
         {1.f, 3.f, -1.f, std::ldexp(1.f, -133), 3.38953139e38f, 0.33203125f, INFINITY, NAN},
         "bf16 decode: 1, 3, -1, subnormal 2^-133, max, 0.33203, inf, nan");

  // a bf16 product with a sum: [1, 2^-8, -1] . [1, 1, 1] in one dot product = 2^-8 (double accumulation)
  Buf<uint16_t> A(3), B(3, 0x3f80);
  A[0] = 0x3f80, A[1] = 0x3b80, A[2] = 0xbf80;
  Buf<float> D(1);
  H la = layout(R16BF, 1, 3, 1), lb = layout(R16BF, 3, 1, 3), ld = layout(R32F, 1, 1, 1), d = desc();
  int st = run(d, A.p, la, B.p, lb, nullptr, ld, D.p, ld, 1.f, 0.f);
  check(st == OK && D[0] == 0.00390625f, "bf16 x bf16 -> f32 dot product");
  // FAST_TF32 takes f32 only
  H dt = desc(C32F_TF32);
  checkStatus(run(dt, A.p, la, B.p, lb, nullptr, ld, D.p, ld, 1.f, 0.f), NOT_SUPPORTED, "bf16 inputs with FAST_TF32 refused");
  // A and B of different half types
  H lbf = layout(R16F, 3, 1, 3);
  checkStatus(run(d, A.p, la, B.p, lbf, nullptr, ld, D.p, ld, 1.f, 0.f), NOT_SUPPORTED, "A bf16 with B f16 refused");
  for (H l : {la, lb, ld, lbf}) lt.layoutDestroy(l);
  lt.descDestroy(d), lt.descDestroy(dt);
}

void tf32() {
  // values rounded to 10 mantissa bits (nearest, ties away) with FAST_TF32; exact with COMPUTE_32F
  const uint32_t bits[] = {0x3f800800u, 0x3f801000u, 0x3f801800u, 0xbf801000u};  // 1+2^-12, 1+2^-11, 1+3*2^-12, -(1+2^-11)
  const float tf[] = {1.f, 1.f + 1.f / 1024, 1.f + 1.f / 1024, -(1.f + 1.f / 1024)};
  Buf<float> A(4), B(1, 1.f), D(4);
  std::memcpy(A.p, bits, sizeof bits);
  H la = layout(R32F, 4, 1, 4), lb = layout(R32F, 1, 1, 1), ld = layout(R32F, 4, 1, 4), d32 = desc(C32F), dt = desc(C32F_TF32);
  int st = run(dt, A.p, la, B.p, lb, nullptr, ld, D.p, ld, 1.f, 0.f);
  check(st == OK && D[0] == tf[0] && D[1] == tf[1] && D[2] == tf[2] && D[3] == tf[3], "FAST_TF32 rounds inputs to 10 mantissa bits");
  st = run(d32, A.p, la, B.p, lb, nullptr, ld, D.p, ld, 1.f, 0.f);
  check(st == OK && std::memcmp(D.p, bits, sizeof bits) == 0, "COMPUTE_32F keeps f32 inputs exact");
  for (H l : {la, lb, ld}) lt.layoutDestroy(l);
  lt.descDestroy(d32), lt.descDestroy(dt);
}

// The addon's use (gemm_lt.cu): row-major C[M,N] = op(A) op(B) + bias[n], handed over as column-major
// C^T = op(B)^T op(A)^T with our B as cuBLASLt's A; bias through the epilogue with a probe pointer at heuristic time.
void addonMapping() {
  const int64_t M = 3, N = 5, K = 4;
  uint32_t seed = 3;
  for (int transA = 0; transA < 2; transA++)
    for (int transB = 0; transB < 2; transB++) {
      const int64_t lda = (transA ? M : K) + 1, ldb = (transB ? K : N) + 2, ldc = N + 1;
      Buf<float> A((transA ? K : M) * lda), B((transB ? N : K) * ldb), C(M * ldc, NAN), bias(N);
      for (int64_t i = 0; i < (transA ? K : M) * lda; i++) A[i] = lcg(seed);
      for (int64_t i = 0; i < (transB ? N : K) * ldb; i++) B[i] = lcg(seed);
      for (int64_t i = 0; i < N; i++) bias[i] = lcg(seed);
      const int32_t opA = transB, opB = transA;
      H d = desc(C32F, opA, opB);
      H la = layout(R32F, transB ? K : N, transB ? N : K, ldb), lb = layout(R32F, transA ? M : K, transA ? K : M, lda),
        lc = layout(R32F, N, M, ldc);
      H pref = nullptr;
      lt.prefCreate(&pref);
      const uint32_t al = 256;
      for (int i = 0; i < 4; i++) lt.prefSet(pref, P_ALIGN_A + i, &al, sizeof al);
      const uint32_t epi = EPI_BIAS;
      const void* probe = reinterpret_cast<const void*>(uintptr_t(256));
      lt.descSet(d, D_EPILOGUE, &epi, sizeof epi);
      lt.descSet(d, D_BIAS, &probe, sizeof probe);
      Result r{};
      int found = 0;
      int st = lt.heuristic(g_handle, d, la, lb, lc, lc, pref, 1, &r, &found);
      const float* bp = bias.p;
      if (st == OK) st = lt.descSet(d, D_BIAS, &bp, sizeof bp);
      const float alpha = 1.f, beta = 0.f;
      if (st == OK) st = lt.matmul(g_handle, d, &alpha, B.p, la, A.p, lb, &beta, C.p, lc, C.p, lc, &r.algo, nullptr, 0, nullptr);
      bool ok = st == OK && found == 1;
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          double acc = 0;
          for (int64_t q = 0; q < K; q++)
            acc += double(transA ? A[q * lda + m] : A[m * lda + q]) * double(transB ? B[n * ldb + q] : B[q * ldb + n]);
          ok = ok && near(C[m * ldc + n], float(acc + bias[n]));
        }
      char what[96];
      std::snprintf(what, sizeof what, "gemm_lt's row-major mapping, transA=%d transB=%d, bias epilogue", transA, transB);
      check(ok, what);
      lt.prefDestroy(pref);
      for (H l : {la, lb, lc}) lt.layoutDestroy(l);
      lt.descDestroy(d);
    }
}

void errors() {
  Buf<float> A(64, 1.f), B(64, 1.f), D(64);
  const float one = 1.f, zero = 0.f;
  H d = desc();
  H l22 = layout(R32F, 2, 2, 2), l23 = layout(R32F, 2, 3, 2), l32 = layout(R32F, 3, 2, 3);

  H bad = layout(R32F, 3, 2, 2);  // ld 2 < rows 3
  checkStatus(run(d, A.p, l23, B.p, bad, nullptr, l22, D.p, l22, 1.f, 0.f), INVALID, "ld < rows refused");
  checkStatus(run(d, A.p, l23, B.p, l23, nullptr, l22, D.p, l22, 1.f, 0.f), INVALID, "k of op(A) (3) != k of op(B) (2) refused");
  checkStatus(run(d, A.p, l23, B.p, l32, nullptr, l23, D.p, l23, 1.f, 0.f), INVALID, "D dimensions != m x n refused");

  Result r{};
  int found = 7;
  H pref = nullptr;
  lt.prefCreate(&pref);
  checkStatus(lt.heuristic(g_handle, d, l23, l32, l22, l22, pref, 0, &r, &found), INVALID, "requestedAlgoCount 0 refused");
  const uint64_t ws = 0;
  checkStatus(lt.prefSet(pref, P_WORKSPACE, &ws, 4), INVALID, "attribute buffer of the wrong size refused");
  checkStatus(lt.heuristic(nullptr, d, l23, l32, l22, l22, pref, 1, &r, &found), NOT_INITIALIZED, "null handle: NOT_INITIALIZED");

  // null bias with the BIAS epilogue: the heuristic takes it (probe), the matmul refuses it
  const uint32_t epi = EPI_BIAS;
  H db = desc();
  lt.descSet(db, D_EPILOGUE, &epi, sizeof epi);
  int st = lt.heuristic(g_handle, db, l23, l32, l22, l22, pref, 1, &r, &found);
  checkStatus(st, OK, "heuristic with the BIAS epilogue succeeds");
  checkStatus(lt.matmul(g_handle, db, &one, A.p, l23, B.p, l32, &zero, nullptr, l22, D.p, l22, &r.algo, nullptr, 0, nullptr), INVALID,
              "BIAS epilogue with a null bias pointer refused");
  setenv("CUBLASLT_EMU_NO_BIAS_EPILOGUE", "1", 1);
  checkStatus(lt.heuristic(g_handle, db, l23, l32, l22, l22, pref, 1, &r, &found), NOT_SUPPORTED,
              "CUBLASLT_EMU_NO_BIAS_EPILOGUE=1: no algorithm for BIAS");
  unsetenv("CUBLASLT_EMU_NO_BIAS_EPILOGUE");

  // alignment: an algo chosen for 256-byte pointers given a 4-byte aligned one; an f32 pointer off by 2 bytes
  st = lt.heuristic(g_handle, d, l23, l32, l22, l22, pref, 1, &r, &found);
  checkStatus(lt.matmul(g_handle, d, &one, A.p + 1, l23, B.p, l32, &zero, nullptr, l22, D.p, l22, &r.algo, nullptr, 0, nullptr), INVALID,
              "A less aligned than the algo's MIN_ALIGNMENT_A_BYTES refused");
  checkStatus(lt.matmul(g_handle, d, &one, A.p + 1, l23, B.p, l32, &zero, nullptr, l22, D.p, l22, nullptr, nullptr, 0, nullptr), OK,
              "same pointer with no algo (4-byte aligned f32) accepted");
  const void* odd = reinterpret_cast<const char*>(A.p) + 2;
  checkStatus(lt.matmul(g_handle, d, &one, odd, l23, B.p, l32, &zero, nullptr, l22, D.p, l22, nullptr, nullptr, 0, nullptr), INVALID,
              "f32 A not aligned to 4 bytes refused");
  const uint32_t four = 4;
  lt.prefSet(pref, P_ALIGN_A, &four, sizeof four);
  st = lt.heuristic(g_handle, d, l23, l32, l22, l22, pref, 1, &r, &found);
  checkStatus(lt.matmul(g_handle, d, &one, A.p + 1, l23, B.p, l32, &zero, nullptr, l22, D.p, l22, &r.algo, nullptr, 0, nullptr), OK,
              "algo chosen for MIN_ALIGNMENT_A_BYTES 4 runs on a 4-byte aligned A");
  // an algo from another problem
  H l33 = layout(R32F, 3, 3, 3);
  checkStatus(lt.matmul(g_handle, d, &one, A.p, l23, B.p, l33, &zero, nullptr, l23, D.p, l23, &r.algo, nullptr, 0, nullptr), INVALID,
              "algo from a different problem refused");

  // in place with a different C layout; D overlapping A
  H l22b = layout(R32F, 2, 2, 3);
  checkStatus(lt.matmul(g_handle, d, &one, A.p, l23, B.p, l32, &one, D.p, l22b, D.p, l22, nullptr, nullptr, 0, nullptr), INVALID,
              "C == D with different layouts refused");
  checkStatus(lt.matmul(g_handle, d, &one, A.p, l23, B.p, l32, &zero, nullptr, l22, A.p + 2, l22, nullptr, nullptr, 0, nullptr), INVALID,
              "D overlapping A refused");

  // unsupported settings
  H lrow = layout(R32F, 2, 3, 3);
  const int32_t row = 1;
  lt.layoutSet(lrow, L_ORDER, &row, sizeof row);
  checkStatus(lt.heuristic(g_handle, d, lrow, l32, l22, l22, pref, 1, &r, &found), NOT_SUPPORTED, "row-major order refused");
  H dx = nullptr;
  checkStatus(lt.descCreate(&dx, 64, R32F), NOT_SUPPORTED, "CUBLAS_COMPUTE_16F refused");
  checkStatus(lt.descCreate(&dx, C32F, R16F), NOT_SUPPORTED, "scale type f16 refused");
  const int32_t tbad = 5;
  checkStatus(lt.descSet(d, D_TRANSA, &tbad, sizeof tbad), INVALID, "TRANSA 5 refused");
  H l16 = layout(R16F, 2, 2, 2);
  checkStatus(lt.heuristic(g_handle, d, l23, l32, l22, l16, pref, 1, &r, &found), NOT_SUPPORTED, "D of type f16 refused");

  // destroyed objects
  H gone = layout(R32F, 2, 3, 2);
  lt.layoutDestroy(gone);
  checkStatus(lt.heuristic(g_handle, d, gone, l32, l22, l22, pref, 1, &r, &found), INVALID, "destroyed layout refused");

  lt.prefDestroy(pref);
  for (H l : {l22, l23, l32, bad, l33, l22b, lrow, l16}) lt.layoutDestroy(l);
  lt.descDestroy(d), lt.descDestroy(db);
}

void larger() {
  // big enough to use several threads; compared with the reference
  const int64_t m = 97, n = 131, k = 400;
  uint32_t seed = 11;
  Buf<float> A(m * k), B(k * n), D(m * n), R(m * n);
  for (int64_t i = 0; i < m * k; i++) A[i] = lcg(seed);
  for (int64_t i = 0; i < k * n; i++) B[i] = lcg(seed);
  H la = layout(R32F, k, m, k), lb = layout(R32F, k, n, k), lc = layout(R32F, m, n, m), d = desc(C32F, 1, 0);
  const int st = run(d, A.p, la, B.p, lb, nullptr, lc, D.p, lc, 1.f, 0.f);
  reference(m, n, k, true, false, A.p, k, B.p, k, nullptr, m, R.p, m, 1.f, 0.f);
  bool ok = st == OK;
  for (int64_t i = 0; i < m * n; i++) ok = ok && D[i] == R[i];
  check(ok, "97x400 * 400x131 (threads) equals the reference exactly");
  for (H l : {la, lb, lc}) lt.layoutDestroy(l);
  lt.descDestroy(d);
}

template <typename F>
bool sym(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) std::printf("FAIL  missing symbol %s\n", name);
  return out != nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "./libcublasLt_emu.so";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::printf("FAIL  dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  bool all = sym(lib, "cublasLtCreate", lt.create) & sym(lib, "cublasLtDestroy", lt.destroy) &
             sym(lib, "cublasLtGetVersion", lt.getVersion) & sym(lib, "cublasLtMatmulDescCreate", lt.descCreate) &
             sym(lib, "cublasLtMatmulDescDestroy", lt.descDestroy) & sym(lib, "cublasLtMatmulDescSetAttribute", lt.descSet) &
             sym(lib, "cublasLtMatrixLayoutCreate", lt.layoutCreate) & sym(lib, "cublasLtMatrixLayoutDestroy", lt.layoutDestroy) &
             sym(lib, "cublasLtMatrixLayoutSetAttribute", lt.layoutSet) & sym(lib, "cublasLtMatmulPreferenceCreate", lt.prefCreate) &
             sym(lib, "cublasLtMatmulPreferenceDestroy", lt.prefDestroy) &
             sym(lib, "cublasLtMatmulPreferenceSetAttribute", lt.prefSet) &
             sym(lib, "cublasLtMatmulAlgoGetHeuristic", lt.heuristic) & sym(lib, "cublasLtMatmul", lt.matmul);
  check(all, "the 14 entry points resolve by name");
  if (!all) return 1;
  std::printf("      version %zu\n", lt.getVersion());
  checkStatus(lt.create(&g_handle), OK, "cublasLtCreate");
  handPicked();
  transposes();
  batched();
  halves();
  tf32();
  addonMapping();
  errors();
  larger();
  checkStatus(lt.destroy(g_handle), OK, "cublasLtDestroy");
  checkStatus(lt.destroy(nullptr), NOT_INITIALIZED, "cublasLtDestroy(null): NOT_INITIALIZED");
  std::printf("%s: %d failed\n", g_failed ? "FAILED" : "PASSED", g_failed);
  return g_failed ? 1 : 0;
}
