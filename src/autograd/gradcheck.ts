/**
 * Finite-difference gradient check in f64 on the CPU backend. The scalar checked is
 * L = sum(out * r) for a fixed random r, so every output element contributes.
 */
import { InvalidArgument } from '../errors';
import { Rng } from '../util/rng';
import { CpuBackend } from '../tensor/cpu';
import type { Tensor } from '../tensor/tensor';
import { Tape, noGrad } from './tape';

export interface GradcheckOptions {
  eps?: number;
  atol?: number;
  rtol?: number;
  seed?: number;
}

export interface GradcheckReport {
  ok: boolean;
  /** Per checked input: worst absolute and relative error. */
  inputs: { index: number; maxAbs: number; maxRel: number; worst: number; analytic: number; numeric: number }[];
  message: string;
}

export async function gradcheck(
  fn: (...xs: Tensor[]) => Tensor,
  inputs: Tensor[],
  { eps = 1e-6, atol = 1e-6, rtol = 1e-4, seed = 7 }: GradcheckOptions = {},
): Promise<GradcheckReport> {
  const backend = inputs[0]?.backend;
  if (!(backend instanceof CpuBackend) || backend.precision !== 'f64') {
    throw new InvalidArgument('gradcheck needs inputs on a CpuBackend with precision f64');
  }
  const out0 = noGrad(() => fn(...inputs));
  const rng = new Rng(seed);
  const r = Float64Array.from({ length: out0.numel }, () => rng.uniform(-1, 1));
  const seedT = backend.fromValues(r, out0.shape);
  const shape = out0.shape;
  out0.dispose();
  const loss = () => {
    const o = noGrad(() => fn(...inputs));
    const d = backend.data(o) as Float64Array;
    let s = 0;
    for (let i = 0; i < d.length; i++) s += d[i] * r[i];
    o.dispose();
    return s;
  };

  for (const t of inputs) t.grad?.dispose(), (t.grad = null);
  const tape = new Tape();
  const out = tape.run(() => fn(...inputs));
  if (out.shape.join() !== shape.join()) throw new InvalidArgument('gradcheck: fn is not deterministic in shape');
  await tape.backward(out, seedT);
  tape.dispose();

  const report: GradcheckReport = { ok: true, inputs: [], message: '' };
  const lines: string[] = [];
  inputs.forEach((t, index) => {
    if (!t.requiresGrad) return;
    const x = backend.data(t) as Float64Array;
    const analytic = t.grad ? (backend.data(t.grad) as Float64Array) : new Float64Array(x.length);
    let maxAbs = 0;
    let maxRel = 0;
    let worst = 0;
    let worstExcess = -Infinity;
    let wa = 0;
    let wn = 0;
    for (let i = 0; i < x.length; i++) {
      const keep = x[i];
      x[i] = keep + eps;
      const lp = loss();
      x[i] = keep - eps;
      const lm = loss();
      x[i] = keep;
      const numeric = (lp - lm) / (2 * eps);
      const d = Math.abs(numeric - analytic[i]);
      maxAbs = Math.max(maxAbs, d);
      if (Math.abs(numeric) > atol) maxRel = Math.max(maxRel, d / Math.abs(numeric));
      // a non-finite gradient on either side is a failure, never a pass through NaN comparisons
      const excess = Number.isFinite(numeric) && Number.isFinite(analytic[i]) ? d - (atol + rtol * Math.abs(numeric)) : Infinity;
      if (excess > worstExcess || Number.isNaN(d)) {
        worstExcess = Number.isNaN(d) ? Infinity : excess;
        worst = i;
        wa = analytic[i];
        wn = numeric;
      }
    }
    const ok = worstExcess <= 0;
    report.ok &&= ok;
    report.inputs.push({ index, maxAbs, maxRel, worst, analytic: wa, numeric: wn });
    lines.push(
      `input ${index}: ${ok ? 'ok' : 'FAILED'} max abs ${maxAbs.toExponential(2)}, worst element ${worst} analytic ${wa} numeric ${wn}`,
    );
  });
  seedT.dispose();
  report.message = lines.join('\n');
  return report;
}
