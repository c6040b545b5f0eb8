/**
 * CPU reference of the gated delta rule (Qwen3.5's Gated DeltaNet core, docs/backbones/qwen3_5.md §3) and of its
 * backward, as the same passes the GPU kernels run. Per value head h (key head kh = ⌊h / r⌋, r = nv / nk), with the
 * state S [dk, dv] starting from `state[h]` or zeros, for t = 0 … T − 1:
 *   S' = α S (α = exp g[t, h]);  m = S'ᵀ k;  u = v − m;  δ = β u;  S = S' + k δᵀ;  o = Sᵀ q.
 * Every column S[:, j] evolves on its own, so the forward and the first backward pass walk columns; dq and dk are
 * row-local and come from a second pass over rows of S (recomputed forward from the saved u, then dS in reverse).
 *
 * Backward, with dS = 0 after the last position (the final state gets no gradient):
 *   dS += q doᵀ;  dδ = dSᵀ k;  dv = β dδ;  dm = −β dδ = −dv;  dβ += dδ · u;  dk += dS δ + S' dm;  dq = S do;
 *   dS ← α (dS + k dmᵀ).
 * dg_t = ⟨dS'_t, S'_t⟩ telescopes into a reverse cumulative sum: dg_t = Σ_{s ≥ t} c_s with
 *   c_s = q·dq − δ·dδ + dm·m = q·dq + dm·v   (−δ·dδ + dm·m = −β dδ·(u + m) = dm·v),
 * so the gates pass needs dv (for dm), v and the per-head dq, and no S at all.
 *
 * Layouts: q, k [T, nk, dk]; v, o, u, dv, bpart [T, nv, dv]; g, β, dg, dβ [T, nv]; state [nv, dk, dv];
 * dqParts, dkParts [T, nk, dk, r]: value head h's contribution to dq, dk at ρ = h − kh·r (summed over ρ by the caller).
 */
import type { FloatArray } from '../kernel';

export interface DeltaDims {
  T: number;
  nk: number;
  nv: number;
  dk: number;
  dv: number;
}

/** o, the final state and u = v − m (kept for the backward). */
export function deltaRuleForward(
  q: FloatArray, k: FloatArray, v: FloatArray, g: FloatArray, beta: FloatArray, state: FloatArray | null,
  o: FloatArray, stateOut: FloatArray, u: FloatArray, { T, nk, nv, dk, dv }: DeltaDims,
) {
  const r = nv / nk;
  const s = new Float64Array(dk);
  for (let h = 0; h < nv; h++) {
    const kh = Math.floor(h / r);
    for (let j = 0; j < dv; j++) {
      for (let i = 0; i < dk; i++) s[i] = state ? state[(h * dk + i) * dv + j] : 0;
      for (let t = 0; t < T; t++) {
        const a = Math.exp(g[t * nv + h]);
        const qk = (t * nk + kh) * dk;
        let m = 0;
        for (let i = 0; i < dk; i++) {
          s[i] *= a;
          m += s[i] * k[qk + i];
        }
        const at = (t * nv + h) * dv + j;
        const uj = v[at] - m;
        const d = beta[t * nv + h] * uj;
        let oj = 0;
        for (let i = 0; i < dk; i++) {
          s[i] += k[qk + i] * d;
          oj += s[i] * q[qk + i];
        }
        o[at] = oj;
        u[at] = uj;
      }
      for (let i = 0; i < dk; i++) stateOut[(h * dk + i) * dv + j] = s[i];
    }
  }
}

/** Column pass, t in reverse: dv = β dδ and bpart = dδ ⊙ u (dβ's terms before the sum over j). */
export function deltaRuleBackwardCols(
  q: FloatArray, k: FloatArray, g: FloatArray, beta: FloatArray, u: FloatArray, dout: FloatArray,
  dvOut: FloatArray, bpart: FloatArray, { T, nk, nv, dk, dv }: DeltaDims,
) {
  const r = nv / nk;
  const ds = new Float64Array(dk);
  for (let h = 0; h < nv; h++) {
    const kh = Math.floor(h / r);
    for (let j = 0; j < dv; j++) {
      ds.fill(0);
      for (let t = T - 1; t >= 0; t--) {
        const a = Math.exp(g[t * nv + h]);
        const b = beta[t * nv + h];
        const qk = (t * nk + kh) * dk;
        const at = (t * nv + h) * dv + j;
        const doj = dout[at];
        let dd = 0;
        for (let i = 0; i < dk; i++) {
          ds[i] += q[qk + i] * doj;
          dd += ds[i] * k[qk + i];
        }
        const dm = -b * dd;
        dvOut[at] = b * dd;
        bpart[at] = dd * u[at];
        for (let i = 0; i < dk; i++) ds[i] = a * (ds[i] + k[qk + i] * dm);
      }
    }
  }
}

/**
 * Row pass: S[i, :] recomputed forward from the initial state (dk's S' dm term, dq = S do), then dS[i, :] in reverse
 * (dk's dS δ term). dm = −dv.
 */
export function deltaRuleBackwardRows(
  q: FloatArray, k: FloatArray, g: FloatArray, beta: FloatArray, u: FloatArray, dvIn: FloatArray, dout: FloatArray,
  state: FloatArray | null, dqParts: FloatArray, dkParts: FloatArray, { T, nk, nv, dk, dv }: DeltaDims,
) {
  const r = nv / nk;
  const row = new Float64Array(dv);
  for (let h = 0; h < nv; h++) {
    const kh = Math.floor(h / r);
    const rho = h - kh * r;
    for (let i = 0; i < dk; i++) {
      for (let j = 0; j < dv; j++) row[j] = state ? state[(h * dk + i) * dv + j] : 0;
      for (let t = 0; t < T; t++) {
        const a = Math.exp(g[t * nv + h]);
        const b = beta[t * nv + h];
        const ki = k[(t * nk + kh) * dk + i];
        const at = (t * nv + h) * dv;
        let dk2 = 0;
        let dq = 0;
        for (let j = 0; j < dv; j++) {
          row[j] *= a;
          dk2 -= row[j] * dvIn[at + j];
          row[j] += ki * b * u[at + j];
          dq += row[j] * dout[at + j];
        }
        const p = ((t * nk + kh) * dk + i) * r + rho;
        dqParts[p] = dq;
        dkParts[p] = dk2;
      }
      row.fill(0);
      for (let t = T - 1; t >= 0; t--) {
        const a = Math.exp(g[t * nv + h]);
        const b = beta[t * nv + h];
        const qi = q[(t * nk + kh) * dk + i];
        const ki = k[(t * nk + kh) * dk + i];
        const at = (t * nv + h) * dv;
        let dk1 = 0;
        for (let j = 0; j < dv; j++) {
          row[j] += qi * dout[at + j];
          dk1 += row[j] * b * u[at + j];
          row[j] = a * (row[j] - ki * dvIn[at + j]);
        }
        dkParts[((t * nk + kh) * dk + i) * r + rho] += dk1;
      }
    }
  }
}

/** Gates pass: dβ = Σ_j bpart and dg = the reverse cumulative sum over t of Σ_j dm v + Σ_i q dq (cpu.ts's header). */
export function deltaRuleBackwardGates(
  q: FloatArray, v: FloatArray, dvIn: FloatArray, bpart: FloatArray, dqParts: FloatArray,
  dg: FloatArray, dbeta: FloatArray, { T, nk, nv, dk, dv }: DeltaDims,
) {
  const r = nv / nk;
  for (let h = 0; h < nv; h++) {
    const kh = Math.floor(h / r);
    const rho = h - kh * r;
    let acc = 0;
    for (let t = T - 1; t >= 0; t--) {
      const at = (t * nv + h) * dv;
      let c = 0;
      let db = 0;
      for (let j = 0; j < dv; j++) {
        c -= dvIn[at + j] * v[at + j];
        db += bpart[at + j];
      }
      const qk = (t * nk + kh) * dk;
      for (let i = 0; i < dk; i++) c += q[qk + i] * dqParts[(qk + i) * r + rho];
      acc += c;
      dg[t * nv + h] = acc;
      dbeta[t * nv + h] = db;
    }
  }
}
