/**
 * CPU references for the activations: SiLU, exact GELU (erf form, PyTorch's default), tanh-approximated
 * GELU (PyTorch approximate='tanh'), tanh, and the gated units act(gate)·up. Everything is f64-accurate (erf/erfc to ~1e-15), so the
 * f64 backend is exact enough for gradcheck and the f32 backend for GPU parity.
 */
import type { FloatArray } from '../kernel';

export type Activation = 'silu' | 'gelu' | 'gelu_tanh' | 'tanh' | 'sigmoid' | 'softplus' | 'exp';

const SQRT_PI = Math.sqrt(Math.PI);
const SQRT_2 = Math.SQRT2;
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);
const K_TANH = Math.sqrt(2 / Math.PI);
const C_TANH = 0.044715;

/**
 * erfc(x) for x ≥ ERF_SPLIT: the continued fraction e^{-x²}/√π · 1/(x + ½/(x + 1/(x + 3/2/(x + …)))), evaluated
 * from depth 240/x² + 10 (at most 160). The depth that reaches f64 rounding falls with x (89 at 1.5, 29 at 3, 10 at
 * 8); this one keeps a margin over it at every x, and the GELU's f32 values and slopes are those of the fixed depth
 * 160 on every f32 input checked (activation.test.ts). GELU ran that loop 160 times for each input above 2.1.
 */
function erfcLarge(x: number): number {
  const depth = Math.min(160, Math.ceil(240 / (x * x) + 10));
  let f = x;
  for (let k = depth; k >= 1; k--) f = x + k / 2 / f;
  return Math.exp(-x * x) / SQRT_PI / f;
}

/** erf(x) for 0 ≤ x < ERF_SPLIT: 2/√π·e^{-x²}·Σ (2x²)^n·x/(1·3···(2n+1)); all terms positive, no cancellation. */
function erfSmall(x: number): number {
  const x2 = 2 * x * x;
  let term = x;
  let sum = x;
  for (let n = 1; term > 1e-17 * sum; n++) {
    term *= x2 / (2 * n + 1);
    sum += term;
  }
  return (2 / SQRT_PI) * Math.exp(-x * x) * sum;
}

// Below 1.5 the series needs < 30 terms; above it 160 continued-fraction terms are exact to f64 rounding.
const ERF_SPLIT = 1.5;

export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  const r = a < ERF_SPLIT ? erfSmall(a) : 1 - erfcLarge(a);
  return x < 0 ? -r : r;
}

/** erfc without the cancellation of 1 − erf for large x (GELU of large negative inputs needs it). */
export function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const a = Math.abs(x);
  const r = a < ERF_SPLIT ? 1 - erfSmall(a) : erfcLarge(a);
  return x < 0 ? 2 - r : r;
}

/** 1/(1 + e^{-x}) without overflow for either sign. */
export function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

/** f(x) and f'(x) of each activation. */
export const ACT: Record<Activation, { f(x: number): number; df(x: number): number }> = {
  silu: {
    f: (x) => x * sigmoid(x),
    // 1 − σ(x) = σ(−x): keeps precision where σ(x) is close to 1
    df: (x) => sigmoid(x) * (1 + x * sigmoid(-x)),
  },
  gelu: {
    // 0.5·x·(1 + erf(x/√2)) written with erfc so that large negative x keeps its tiny value
    f: (x) => 0.5 * x * erfc(-x / SQRT_2),
    df: (x) => 0.5 * erfc(-x / SQRT_2) + x * INV_SQRT_2PI * Math.exp(-0.5 * x * x),
  },
  // Qwen3.5's gates: the attention output gate and the DeltaNet's β
  sigmoid: {
    f: (x) => sigmoid(x),
    df: (x) => sigmoid(x) * sigmoid(-x),
  },
  // PyTorch's softplus (β 1, threshold 20): x above the threshold, else log(1 + eˣ) (the DeltaNet's decay)
  softplus: {
    f: (x) => (x > 20 ? x : Math.log1p(Math.exp(x))),
    df: (x) => (x > 20 ? 1 : sigmoid(x)),
  },
  // the DeltaNet's decay rate exp(A_log) (A_log is stored as a log)
  exp: {
    f: (x) => Math.exp(x),
    df: (x) => Math.exp(x),
  },
  // Gemma's logit soft-capping, cap·tanh(x/cap)
  tanh: {
    f: (x) => Math.tanh(x),
    df: (x) => 1 - Math.tanh(x) ** 2,
  },
  gelu_tanh: {
    // 0.5·x·(1 + tanh(u)) = x·σ(2u), u = √(2/π)(x + 0.044715x³): the same function, no 1 + tanh cancellation
    f: (x) => x * sigmoid(2 * K_TANH * (x + C_TANH * x * x * x)),
    df: (x) => {
      const s = sigmoid(2 * K_TANH * (x + C_TANH * x * x * x));
      const du = K_TANH * (1 + 3 * C_TANH * x * x);
      return s + 2 * x * s * sigmoid(-2 * K_TANH * (x + C_TANH * x * x * x)) * du;
    },
  },
};

export function activationForward(op: Activation, x: FloatArray, out: FloatArray) {
  const f = ACT[op].f;
  for (let i = 0; i < x.length; i++) out[i] = f(x[i]);
}

export function activationBackward(op: Activation, x: FloatArray, g: FloatArray, dx: FloatArray) {
  const df = ACT[op].df;
  for (let i = 0; i < x.length; i++) dx[i] = g[i] * df(x[i]);
}

/** act(gate) · up */
export function gluForward(act: Activation, gate: FloatArray, up: FloatArray, out: FloatArray) {
  const f = ACT[act].f;
  for (let i = 0; i < gate.length; i++) out[i] = f(gate[i]) * up[i];
}

export function gluBackward(
  act: Activation,
  gate: FloatArray,
  up: FloatArray,
  g: FloatArray,
  dgate: FloatArray | null,
  dup: FloatArray | null,
) {
  const { f, df } = ACT[act];
  for (let i = 0; i < gate.length; i++) {
    if (dgate) dgate[i] = g[i] * up[i] * df(gate[i]);
    if (dup) dup[i] = g[i] * f(gate[i]);
  }
}
