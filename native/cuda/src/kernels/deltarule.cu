// The gated delta rule of Qwen3.5's Gated DeltaNet and its three backward passes; the semantics (and the layouts)
// are src/kernels/deltarule/cpu.ts. Per value head h (key head kh = h / (nv / nk)), state S [dk, dv]:
//   S' = exp(g) S;  m = S'^T k;  u = v - m;  delta = beta u;  S = S' + k delta^T;  o = S^T q.
// One thread owns a column S[:, j] (forward, column pass) or a row S[i, :] (row pass) and walks t with no barrier.
// The per-thread array has a compile-time size MAX (32, 64, 128 or 256: the smallest >= the runtime size), with
// every loop fully unrolled and guarded by the runtime size, so that indices are constants and it can stay in
// registers (256 floats spill to local memory; correctness first, a chunked form is the later speed-up).
#include <type_traits>

#include "../registry.h"
#include "rowops.cuh"

namespace {

using rmas::rows::grid_for;
constexpr int kThreads = 128;

struct Dims {
  int64_t T, nk, nv, dk, dv;
};

#define GRID_STRIDE(i, n) \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// ptrs: q, k [T, nk, dk], v [T, nv, dv], g, beta [T, nv], state [nv, dk, dv] or null; o, u [T, nv, dv], st [nv, dk, dv].
template <int MAX>
__global__ void delta_forward_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                                     const float* __restrict__ g, const float* __restrict__ beta, const float* __restrict__ state,
                                     float* __restrict__ o, float* __restrict__ st, float* __restrict__ u, Dims d) {
  GRID_STRIDE(id, d.nv * d.dv) {
    const int64_t h = id / d.dv, j = id % d.dv, kh = h / (d.nv / d.nk);
    float s[MAX];
#pragma unroll
    for (int i = 0; i < MAX; i++) s[i] = (i < d.dk && state) ? state[(h * d.dk + i) * d.dv + j] : 0.f;
    for (int64_t t = 0; t < d.T; t++) {
      const float a = expf(g[t * d.nv + h]), b = beta[t * d.nv + h];
      const float* kt = k + (t * d.nk + kh) * d.dk;
      const float* qt = q + (t * d.nk + kh) * d.dk;
      float m = 0.f;
#pragma unroll
      for (int i = 0; i < MAX; i++) {
        if (i < d.dk) {
          s[i] *= a;
          m += s[i] * kt[i];
        }
      }
      const int64_t at = (t * d.nv + h) * d.dv + j;
      const float uj = v[at] - m, dl = b * uj;
      float oj = 0.f;
#pragma unroll
      for (int i = 0; i < MAX; i++) {
        if (i < d.dk) {
          s[i] += kt[i] * dl;
          oj += s[i] * qt[i];
        }
      }
      o[at] = oj;
      u[at] = uj;
    }
#pragma unroll
    for (int i = 0; i < MAX; i++) {
      if (i < d.dk) st[(h * d.dk + i) * d.dv + j] = s[i];
    }
  }
}

// ptrs: q, k, g, beta, u, do; dv, bpart [T, nv, dv]. One thread per (h, j) holding dS[:, j], t in reverse.
template <int MAX>
__global__ void delta_cols_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ g,
                                  const float* __restrict__ beta, const float* __restrict__ u, const float* __restrict__ dout,
                                  float* __restrict__ dv, float* __restrict__ bpart, Dims d) {
  GRID_STRIDE(id, d.nv * d.dv) {
    const int64_t h = id / d.dv, j = id % d.dv, kh = h / (d.nv / d.nk);
    float ds[MAX];
#pragma unroll
    for (int i = 0; i < MAX; i++) ds[i] = 0.f;
    for (int64_t t = d.T - 1; t >= 0; t--) {
      const float a = expf(g[t * d.nv + h]), b = beta[t * d.nv + h];
      const float* kt = k + (t * d.nk + kh) * d.dk;
      const float* qt = q + (t * d.nk + kh) * d.dk;
      const int64_t at = (t * d.nv + h) * d.dv + j;
      const float doj = dout[at];
      float dd = 0.f;
#pragma unroll
      for (int i = 0; i < MAX; i++) {
        if (i < d.dk) {
          ds[i] += qt[i] * doj;
          dd += ds[i] * kt[i];
        }
      }
      const float dm = -b * dd;
      dv[at] = b * dd;
      bpart[at] = dd * u[at];
#pragma unroll
      for (int i = 0; i < MAX; i++) {
        if (i < d.dk) ds[i] = a * (ds[i] + kt[i] * dm);
      }
    }
  }
}

// ptrs: q, k, g, beta, u, dv, do, state or null; dqp, dkp [T, nk, dk, r]. One thread per (h, i): S[i, :] forward
// from the initial state (dk's S' dm term, dq), then dS[i, :] in reverse (dk's dS delta term). dm = -dv.
template <int MAX>
__global__ void delta_rows_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ g,
                                  const float* __restrict__ beta, const float* __restrict__ u, const float* __restrict__ dv,
                                  const float* __restrict__ dout, const float* __restrict__ state, float* __restrict__ dqp,
                                  float* __restrict__ dkp, Dims d) {
  GRID_STRIDE(id, d.nv * d.dk) {
    const int64_t r = d.nv / d.nk, h = id / d.dk, i = id % d.dk, kh = h / r, rho = h - kh * r;
    float row[MAX];
#pragma unroll
    for (int j = 0; j < MAX; j++) row[j] = (j < d.dv && state) ? state[(h * d.dk + i) * d.dv + j] : 0.f;
    for (int64_t t = 0; t < d.T; t++) {
      const float a = expf(g[t * d.nv + h]), b = beta[t * d.nv + h];
      const float ki = k[(t * d.nk + kh) * d.dk + i];
      const int64_t at = (t * d.nv + h) * d.dv;
      float dk2 = 0.f, dq = 0.f;
#pragma unroll
      for (int j = 0; j < MAX; j++) {
        if (j < d.dv) {
          row[j] *= a;
          dk2 -= row[j] * dv[at + j];
          row[j] += ki * b * u[at + j];
          dq += row[j] * dout[at + j];
        }
      }
      const int64_t p = ((t * d.nk + kh) * d.dk + i) * r + rho;
      dqp[p] = dq;
      dkp[p] = dk2;
    }
#pragma unroll
    for (int j = 0; j < MAX; j++) row[j] = 0.f;
    for (int64_t t = d.T - 1; t >= 0; t--) {
      const float a = expf(g[t * d.nv + h]), b = beta[t * d.nv + h];
      const float qi = q[(t * d.nk + kh) * d.dk + i], ki = k[(t * d.nk + kh) * d.dk + i];
      const int64_t at = (t * d.nv + h) * d.dv;
      float dk1 = 0.f;
#pragma unroll
      for (int j = 0; j < MAX; j++) {
        if (j < d.dv) {
          row[j] += qi * dout[at + j];
          dk1 += row[j] * b * u[at + j];
          row[j] = a * (row[j] - ki * dv[at + j]);
        }
      }
      dkp[((t * d.nk + kh) * d.dk + i) * r + rho] += dk1;
    }
  }
}

// ptrs: q, v, dv, bpart, dqp; dg, dbeta [T, nv]. One thread per value head: dbeta = sum_j bpart and dg the reverse
// cumulative sum over t of sum_j dm v + sum_i q dq (dm = -dv).
__global__ void delta_gates_kernel(const float* __restrict__ q, const float* __restrict__ v, const float* __restrict__ dv,
                                   const float* __restrict__ bpart, const float* __restrict__ dqp, float* __restrict__ dg,
                                   float* __restrict__ db, Dims d) {
  GRID_STRIDE(h, d.nv) {
    const int64_t r = d.nv / d.nk, kh = h / r, rho = h - kh * r;
    float acc = 0.f;
    for (int64_t t = d.T - 1; t >= 0; t--) {
      const int64_t at = (t * d.nv + h) * d.dv;
      float c = 0.f, sb = 0.f;
      for (int64_t j = 0; j < d.dv; j++) {
        c -= dv[at + j] * v[at + j];
        sb += bpart[at + j];
      }
      const int64_t qk = (t * d.nk + kh) * d.dk;
      for (int64_t i = 0; i < d.dk; i++) c += q[qk + i] * dqp[(qk + i) * r + rho];
      acc += c;
      dg[t * d.nv + h] = acc;
      db[t * d.nv + h] = sb;
    }
  }
}

/** ints [T, nk, nv, dk, dv]: valid when nk >= 1 divides nv and dk, dv are in 1..256. */
bool dims_of(const rmas::LaunchArgs& a, Dims* d) {
  *d = {a.ints[0], a.ints[1], a.ints[2], a.ints[3], a.ints[4]};
  return d->T >= 0 && d->nk >= 1 && d->nv >= 0 && d->nv % d->nk == 0 && d->dk >= 1 && d->dk <= 256 && d->dv >= 1 && d->dv <= 256;
}

/** Calls fn with std::integral_constant<int, MAX>, MAX the smallest of 32, 64, 128, 256 that holds n (n <= 256). */
template <typename Fn>
void by_max(int64_t n, Fn fn) {
  if (n <= 32) fn(std::integral_constant<int, 32>{});
  else if (n <= 64) fn(std::integral_constant<int, 64>{});
  else if (n <= 128) fn(std::integral_constant<int, 128>{});
  else fn(std::integral_constant<int, 256>{});
}

// "gated_delta_rule": ptrs [q, k, v, g, beta, state or 0, o, state_out, u]; ints [T, nk, nv, dk, dv]; floats [].
cudaError_t launch_forward(const rmas::LaunchArgs& a) {
  Dims d;
  if (!rmas::counts(a, 9, 5, 0) || !dims_of(a, &d)) return cudaErrorInvalidValue;
  const int64_t n = d.nv * d.dv;
  if (n == 0) return cudaSuccess;
  const unsigned grid = grid_for(n, kThreads);
  by_max(d.dk, [&](auto m) {
    delta_forward_kernel<decltype(m)::value><<<grid, kThreads, 0, a.stream>>>(
        rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<const float>(a, 3),
        rmas::ptr<const float>(a, 4), rmas::ptr<const float>(a, 5), rmas::ptr<float>(a, 6), rmas::ptr<float>(a, 7),
        rmas::ptr<float>(a, 8), d);
  });
  return cudaGetLastError();
}

// "gated_delta_rule_bwd_cols": ptrs [q, k, g, beta, u, do, dv, bpart]; ints [T, nk, nv, dk, dv]; floats [].
cudaError_t launch_cols(const rmas::LaunchArgs& a) {
  Dims d;
  if (!rmas::counts(a, 8, 5, 0) || !dims_of(a, &d)) return cudaErrorInvalidValue;
  const int64_t n = d.nv * d.dv;
  if (n == 0 || d.T == 0) return cudaSuccess;
  const unsigned grid = grid_for(n, kThreads);
  by_max(d.dk, [&](auto m) {
    delta_cols_kernel<decltype(m)::value><<<grid, kThreads, 0, a.stream>>>(
        rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<const float>(a, 3),
        rmas::ptr<const float>(a, 4), rmas::ptr<const float>(a, 5), rmas::ptr<float>(a, 6), rmas::ptr<float>(a, 7), d);
  });
  return cudaGetLastError();
}

// "gated_delta_rule_bwd_rows": ptrs [q, k, g, beta, u, dv, do, state or 0, dq_parts, dk_parts]; ints [T, nk, nv, dk, dv].
cudaError_t launch_rows(const rmas::LaunchArgs& a) {
  Dims d;
  if (!rmas::counts(a, 10, 5, 0) || !dims_of(a, &d)) return cudaErrorInvalidValue;
  const int64_t n = d.nv * d.dk;
  if (n == 0 || d.T == 0) return cudaSuccess;
  const unsigned grid = grid_for(n, kThreads);
  by_max(d.dv, [&](auto m) {
    delta_rows_kernel<decltype(m)::value><<<grid, kThreads, 0, a.stream>>>(
        rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<const float>(a, 3),
        rmas::ptr<const float>(a, 4), rmas::ptr<const float>(a, 5), rmas::ptr<const float>(a, 6), rmas::ptr<const float>(a, 7),
        rmas::ptr<float>(a, 8), rmas::ptr<float>(a, 9), d);
  });
  return cudaGetLastError();
}

// "gated_delta_rule_bwd_gates": ptrs [q, v, dv, bpart, dq_parts, dg, dbeta]; ints [T, nk, nv, dk, dv]; floats [].
cudaError_t launch_gates(const rmas::LaunchArgs& a) {
  Dims d;
  if (!rmas::counts(a, 7, 5, 0) || !dims_of(a, &d)) return cudaErrorInvalidValue;
  if (d.nv == 0 || d.T == 0) return cudaSuccess;
  delta_gates_kernel<<<grid_for(d.nv, kThreads), kThreads, 0, a.stream>>>(
      rmas::ptr<const float>(a, 0), rmas::ptr<const float>(a, 1), rmas::ptr<const float>(a, 2), rmas::ptr<const float>(a, 3),
      rmas::ptr<const float>(a, 4), rmas::ptr<float>(a, 5), rmas::ptr<float>(a, 6), d);
  return cudaGetLastError();
}

}  // namespace

RMAS_KERNEL("gated_delta_rule", launch_forward);
RMAS_KERNEL("gated_delta_rule_bwd_cols", launch_cols);
RMAS_KERNEL("gated_delta_rule_bwd_rows", launch_rows);
RMAS_KERNEL("gated_delta_rule_bwd_gates", launch_gates);
