/**
 * Activation shaders: one invocation per element over a folded 1-D grid. The math lives in WGSL
 * functions `act_f` / `act_df` so that forward, backward and the gated units (SwiGLU, GeGLU) share one definition.
 */
import { flatIndex, mainSignature } from '../wgsl';
import type { Activation } from './cpu';

/**
 * sigmoid without overflow: e = exp(−|x|) ≤ 1 on both branches. erfc from Numerical Recipes' erfcc
 * (Chebyshev-fitted exponent, fractional error < 1.2e-7 for x ≥ 0), so erf/GELU are accurate to about
 * 1e-7 absolute; the 2.5e-5 Abramowitz–Stegun formula would not hold f32 tolerances. |x| is capped at 10,
 * where erfc already underflows f32, so exp never sees a huge argument.
 */
export const MATH = `fn sigmoid(x: f32) -> f32 {
  let e = exp(-abs(x));
  let s = 1.0 / (1.0 + e);
  return select(e * s, s, x >= 0.0);
}
fn erfc_nr(x: f32) -> f32 {
  let z = min(abs(x), 10.0);
  let t = 1.0 / (1.0 + 0.5 * z);
  let p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807
    + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
  let r = t * exp(p - z * z);
  return select(r, 2.0 - r, x < 0.0);
}`;

/** 2/√π·(−1)ⁿ/(n!(2n+1)): the Maclaurin series of erf, 9 terms reach f32 precision for |z| < 0.75. */
const ERF_SERIES = Array.from({ length: 9 }, (_, n) => {
  let fact = 1;
  for (let i = 2; i <= n; i++) fact *= i;
  return ((-1) ** n / (fact * (2 * n + 1))) * (2 / Math.sqrt(Math.PI));
});

/**
 * Φ(x) = 0.5·(1 + erf(x/√2)) = 0.5·erfc(−x/√2). Near zero erf comes from its series (1 − erfc would
 * round at 1's ulp); elsewhere from erfc, which keeps the tail for large negative x. In f32 the
 * resulting erf is within 1.4e-7 absolute of the exact value (about two ulps of the result).
 */
const PHI = `fn erf_series(z: f32) -> f32 {
  let z2 = z * z;
  var p = ${ERF_SERIES[8].toPrecision(17)};
${ERF_SERIES.slice(0, 8).reverse().map((c) => `  p = ${c.toPrecision(17)} + z2 * p;`).join('\n')}
  return z * p;
}
fn phi_cdf(x: f32) -> f32 {
  let z = x * 0.70710678118654752;
  return select(0.5 * erfc_nr(-z), 0.5 + 0.5 * erf_series(clamp(z, -0.75, 0.75)), abs(z) < 0.75);
}`;

/**
 * f and f' of each activation, mirroring cpu.ts. gelu_tanh is written x·σ(2u) (equal to
 * 0.5·x·(1 + tanh u)): no tanh, which some WGSL implementations return as NaN for large |u|, and no
 * 1 + tanh cancellation; x is clamped inside u (σ has saturated long before |x| = 30) so x³ stays finite.
 */
export const ACT_WGSL: Record<Activation, string> = {
  silu: `fn act_f(x: f32) -> f32 { return x * sigmoid(x); }
fn act_df(x: f32) -> f32 { return sigmoid(x) * (1.0 + x * sigmoid(-x)); }`,
  gelu: `${PHI}
fn act_f(x: f32) -> f32 { return x * phi_cdf(x); }
// |x| capped at 20 so x² cannot overflow; the Gaussian density has underflowed long before
fn act_df(x: f32) -> f32 {
  let c = min(abs(x), 20.0);
  return phi_cdf(x) + x * 0.39894228040143268 * exp(-0.5 * c * c);
}`,
  sigmoid: `fn act_f(x: f32) -> f32 { return sigmoid(x); }
fn act_df(x: f32) -> f32 { return sigmoid(x) * sigmoid(-x); }`,
  // log(1 + eˣ) without overflow (x above 20 is x, as PyTorch's threshold) and without log(1 + tiny) = 0 for very
  // negative x (there eˣ − e²ˣ/2 is exact to f32)
  softplus: `fn act_f(x: f32) -> f32 {
  let e = exp(min(x, 20.0));
  return select(select(log(1.0 + e), e - 0.5 * e * e, e < 1e-4), x, x > 20.0);
}
fn act_df(x: f32) -> f32 { return select(sigmoid(x), 1.0, x > 20.0); }`,
  exp: `fn act_f(x: f32) -> f32 { return exp(x); }
fn act_df(x: f32) -> f32 { return exp(x); }`,
  // 1 − 2/(e^{2x} + 1) with e^{2x} of −|x| only (no overflow, no WGSL tanh, which some implementations
  // return as NaN for large |x|); |x| < 1e-3 takes x − x³/3, where the subtraction would lose digits
  tanh: `fn tanh_s(x: f32) -> f32 {
  let a = abs(x);
  let e = exp(-2.0 * a);
  let t = select((1.0 - e) / (1.0 + e), a - a * a * a / 3.0, a < 1e-3);
  return select(t, -t, x < 0.0);
}
fn act_f(x: f32) -> f32 { return tanh_s(x); }
fn act_df(x: f32) -> f32 { let t = tanh_s(x); return 1.0 - t * t; }`,
  gelu_tanh: `fn tanh_u2(x: f32) -> f32 { let c = clamp(x, -30.0, 30.0); return 1.5957691216057308 * (c + 0.044715 * c * c * c); }
fn act_f(x: f32) -> f32 { return x * sigmoid(tanh_u2(x)); }
fn act_df(x: f32) -> f32 {
  let u2 = tanh_u2(x);
  let s = sigmoid(u2);
  let c = clamp(x, -30.0, 30.0);
  return s + x * s * sigmoid(-u2) * 1.5957691216057308 * (1.0 + 0.134145 * c * c);
}`,
};

const header = (names: [string, 'r' | 'w'][]) => `struct P { n: u32 }
@group(0) @binding(0) var<uniform> u: P;
${names.map(([v, m], i) => `@group(0) @binding(${i + 1}) var<storage, ${m === 'r' ? 'read' : 'read_write'}> ${v}: array<f32>;`).join('\n')}
${MATH}`;

export function activationWgsl(op: Activation, wg: number): string {
  return `${header([['x', 'r'], ['out', 'w']])}
${ACT_WGSL[op]}
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  out[i] = act_f(x[i]);
}`;
}

export function activationBackwardWgsl(op: Activation, wg: number): string {
  return `${header([['x', 'r'], ['g', 'r'], ['dx', 'w']])}
${ACT_WGSL[op]}
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  dx[i] = g[i] * act_df(x[i]);
}`;
}

export function gluWgsl(act: Activation, wg: number): string {
  return `${header([['gate', 'r'], ['up', 'r'], ['out', 'w']])}
${ACT_WGSL[act]}
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  out[i] = act_f(gate[i]) * up[i];
}`;
}

/** Backward of act(gate)·up; `up` is only bound when dgate is wanted. */
export function gluBackwardWgsl(act: Activation, wg: number, dgate: boolean, dup: boolean): string {
  const names: [string, 'r' | 'w'][] = [['gate', 'r']];
  if (dgate) names.push(['up', 'r']);
  names.push(['g', 'r']);
  if (dgate) names.push(['dgate', 'w']);
  if (dup) names.push(['dup', 'w']);
  return `${header(names)}
${ACT_WGSL[act]}
${mainSignature(wg)} {
  let i = ${flatIndex(wg)};
  if (i >= u.n) { return; }
  let x = gate[i];
  ${dgate ? 'dgate[i] = g[i] * up[i] * act_df(x);' : ''}
  ${dup ? 'dup[i] = g[i] * act_f(x);' : ''}
}`;
}
