/** Closeness checks that report the worst element: tests on both runtimes (Node, browser), parity cases, the page's self-test. */
export interface Tolerance {
  atol: number;
  rtol: number;
}

export interface CloseReport {
  ok: boolean;
  maxAbs: number;
  maxRel: number;
  worst: number;
  message: string;
}

export function closeness(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tolerance, label = ''): CloseReport {
  if (actual.length !== expected.length) {
    return { ok: false, maxAbs: Infinity, maxRel: Infinity, worst: -1, message: `${label}: length ${actual.length} vs ${expected.length}` };
  }
  let ok = true;
  let maxAbs = 0;
  let maxRel = 0;
  let worst = -1;
  let worstExcess = -Infinity;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i];
    const e = expected[i];
    const d = Math.abs(a - e);
    // an infinite expected value must be matched exactly: rtol·∞ would accept anything, even −∞ for +∞
    const finite = Number.isFinite(a) && Number.isFinite(e);
    const bad = !(finite && d <= tol.atol + tol.rtol * Math.abs(e)) && !(Number.isNaN(a) && Number.isNaN(e)) && a !== e;
    if (bad) ok = false;
    if (d > maxAbs || Number.isNaN(d)) maxAbs = Number.isNaN(d) ? Infinity : d;
    const rel = d / Math.max(Math.abs(e), 1e-30);
    if (Math.abs(e) > tol.atol && rel > maxRel) maxRel = rel;
    const excess = d - (tol.atol + tol.rtol * Math.abs(e));
    if (excess > worstExcess || Number.isNaN(d)) {
      worstExcess = Number.isNaN(d) ? Infinity : excess;
      worst = i;
    }
  }
  const message = ok
    ? `${label}: ok (max abs ${maxAbs.toExponential(2)}, max rel ${maxRel.toExponential(2)})`
    : `${label}: element ${worst} is ${actual[worst]}, expected ${expected[worst]} (atol ${tol.atol}, rtol ${tol.rtol}); max abs ${maxAbs.toExponential(2)}`;
  return { ok, maxAbs, maxRel, worst, message };
}

/** Throws with the worst element when `actual` is not within tolerance of `expected`. */
export function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: Tolerance, label = 'values') {
  const r = closeness(actual, expected, tol, label);
  if (!r.ok) throw new Error(r.message);
  return r;
}

/** Tolerances per dtype for GPU vs CPU reference (see README, "Tolerances"). */
export const TOL = {
  f32: { atol: 1e-5, rtol: 1e-4 },
  f16: { atol: 2e-3, rtol: 2e-3 },
  bf16: { atol: 2e-3, rtol: 2e-3 },
  grad: { atol: 1e-6, rtol: 1e-4 },
} as const;
