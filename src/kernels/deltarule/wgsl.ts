/**
 * The gated delta rule's passes (cpu.ts has the formulas), one invocation per column (h, j) or row (h, i) of a value
 * head's state, walking t with no barrier. The per-invocation array is sized exactly (dk for a column, dv for a row),
 * so each builder is specialised on it. g, β and the initial state come packed in one buffer `gs` = g | β | state
 * (index.ts copies them there) so that no pass binds more than 8 storage buffers, the WebGPU default.
 * Each invocation does O(T · dk) (columns) or O(T · dv) (rows) work in sequence: fine for decode, slow for long
 * prefill; a chunked form (qwen3_5.md §3) is the later speed-up.
 */
import { flatIndex, mainSignature } from '../wgsl';

// n: invocations; t, nk, nv; r = nv / nk (value heads per key head)
const HEADER = 'struct P { n: u32, t: u32, nk: u32, nv: u32, r: u32 }\n@group(0) @binding(0) var<uniform> u: P;';

/**
 * A pass's shader up to its body: the uniforms, `reads` then `writes` bound from binding 1 on (f32 arrays), the
 * state sizes DK and DV as constants, and the entry point's signature.
 */
function preamble(wg: number, dk: number, dv: number, reads: readonly string[], writes: readonly string[]): string {
  const bind = (name: string, b: number, access: string) => `@group(0) @binding(${b}) var<storage, ${access}> ${name}: array<f32>;`;
  return [HEADER, ...reads.map((n, i) => bind(n, i + 1, 'read')), ...writes.map((n, i) => bind(n, reads.length + i + 1, 'read_write')),
    `const DK = ${dk}u;`, `const DV = ${dv}u;`, mainSignature(wg)].join('\n');
}

/** Forward: one invocation per (h, j) holding S[:, j]. Writes o, u and the final state. */
export function deltaRuleForwardWgsl(wg: number, dk: number, dv: number, withState: boolean): string {
  return `${preamble(wg, dk, dv, ['q', 'k', 'v', 'gs'], ['o', 'st', 'res'])} {
  let id = ${flatIndex(wg)};
  if (id >= u.n) { return; }
  let h = id / DV;
  let j = id % DV;
  let kh = h / u.r;
  let nb = u.t * u.nv;
  var s: array<f32, ${dk}>;
${withState ? '  for (var i = 0u; i < DK; i++) { s[i] = gs[2u * nb + (h * DK + i) * DV + j]; }\n' : ''}  for (var t = 0u; t < u.t; t++) {
    let a = exp(gs[t * u.nv + h]);
    let b = gs[nb + t * u.nv + h];
    let qk = (t * u.nk + kh) * DK;
    var m = 0.0;
    for (var i = 0u; i < DK; i++) {
      s[i] = s[i] * a;
      m += s[i] * k[qk + i];
    }
    let at = (t * u.nv + h) * DV + j;
    let uj = v[at] - m;
    let d = b * uj;
    var oj = 0.0;
    for (var i = 0u; i < DK; i++) {
      s[i] += k[qk + i] * d;
      oj += s[i] * q[qk + i];
    }
    o[at] = oj;
    res[at] = uj;
  }
  for (var i = 0u; i < DK; i++) { st[(h * DK + i) * DV + j] = s[i]; }
}`;
}

/** Column pass: one invocation per (h, j) holding dS[:, j], t in reverse. Writes dv and bpart = dδ ⊙ u. */
export function deltaRuleColsWgsl(wg: number, dk: number, dv: number): string {
  return `${preamble(wg, dk, dv, ['q', 'k', 'gs', 'res', 'dout'], ['dvo', 'bpart'])} {
  let id = ${flatIndex(wg)};
  if (id >= u.n) { return; }
  let h = id / DV;
  let j = id % DV;
  let kh = h / u.r;
  let nb = u.t * u.nv;
  var ds: array<f32, ${dk}>;
  for (var t = u.t; t > 0u; t--) {
    let tt = t - 1u;
    let a = exp(gs[tt * u.nv + h]);
    let b = gs[nb + tt * u.nv + h];
    let qk = (tt * u.nk + kh) * DK;
    let at = (tt * u.nv + h) * DV + j;
    let doj = dout[at];
    var dd = 0.0;
    for (var i = 0u; i < DK; i++) {
      ds[i] += q[qk + i] * doj;
      dd += ds[i] * k[qk + i];
    }
    let dm = -b * dd;
    dvo[at] = b * dd;
    bpart[at] = dd * res[at];
    for (var i = 0u; i < DK; i++) { ds[i] = a * (ds[i] + k[qk + i] * dm); }
  }
}`;
}

/**
 * Row pass: one invocation per (h, i); S[i, :] forward from the initial state (dk's S' dm term and dq), then dS[i, :]
 * in reverse (dk's dS δ term). Writes value head h's parts of dq and dk at [t, kh, i, ρ]. dm = −dv.
 */
export function deltaRuleRowsWgsl(wg: number, dk: number, dv: number, withState: boolean): string {
  return `${preamble(wg, dk, dv, ['q', 'k', 'gs', 'res', 'dvi', 'dout'], ['dqp', 'dkp'])} {
  let id = ${flatIndex(wg)};
  if (id >= u.n) { return; }
  let h = id / DK;
  let i = id % DK;
  let kh = h / u.r;
  let rho = h - kh * u.r;
  let nb = u.t * u.nv;
  var row: array<f32, ${dv}>;
${withState ? '  for (var j = 0u; j < DV; j++) { row[j] = gs[2u * nb + (h * DK + i) * DV + j]; }\n' : ''}  for (var t = 0u; t < u.t; t++) {
    let a = exp(gs[t * u.nv + h]);
    let b = gs[nb + t * u.nv + h];
    let ki = k[(t * u.nk + kh) * DK + i];
    let at = (t * u.nv + h) * DV;
    var dk2 = 0.0;
    var dq = 0.0;
    for (var j = 0u; j < DV; j++) {
      row[j] = row[j] * a;
      dk2 -= row[j] * dvi[at + j];
      row[j] += ki * b * res[at + j];
      dq += row[j] * dout[at + j];
    }
    let p = ((t * u.nk + kh) * DK + i) * u.r + rho;
    dqp[p] = dq;
    dkp[p] = dk2;
  }
  for (var j = 0u; j < DV; j++) { row[j] = 0.0; }
  for (var t = u.t; t > 0u; t--) {
    let tt = t - 1u;
    let a = exp(gs[tt * u.nv + h]);
    let b = gs[nb + tt * u.nv + h];
    let qi = q[(tt * u.nk + kh) * DK + i];
    let ki = k[(tt * u.nk + kh) * DK + i];
    let at = (tt * u.nv + h) * DV;
    var dk1 = 0.0;
    for (var j = 0u; j < DV; j++) {
      row[j] += qi * dout[at + j];
      dk1 += row[j] * b * res[at + j];
      row[j] = a * (row[j] - ki * dvi[at + j]);
    }
    dkp[((tt * u.nk + kh) * DK + i) * u.r + rho] += dk1;
  }
}`;
}

/** Gates pass: one invocation per value head; dβ = Σ_j bpart, dg = reverse cumulative sum of Σ_j dm v + Σ_i q dq. */
export function deltaRuleGatesWgsl(wg: number, dk: number, dv: number): string {
  return `${preamble(wg, dk, dv, ['q', 'v', 'dvi', 'bpart', 'dqp'], ['dg', 'db'])} {
  let h = ${flatIndex(wg)};
  if (h >= u.n) { return; }
  let kh = h / u.r;
  let rho = h - kh * u.r;
  var acc = 0.0;
  for (var t = u.t; t > 0u; t--) {
    let tt = t - 1u;
    let at = (tt * u.nv + h) * DV;
    var c = 0.0;
    var sb = 0.0;
    for (var j = 0u; j < DV; j++) {
      c -= dvi[at + j] * v[at + j];
      sb += bpart[at + j];
    }
    let qk = (tt * u.nk + kh) * DK;
    for (var i = 0u; i < DK; i++) { c += q[qk + i] * dqp[(qk + i) * u.r + rho]; }
    acc += c;
    dg[tt * u.nv + h] = acc;
    db[tt * u.nv + h] = sb;
  }
}`;
}
