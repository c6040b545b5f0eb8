import { describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import { gradcheck } from '../../autograd/gradcheck';
import { Tape } from '../../autograd/tape';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import { assertClose } from '../workbench/close';
import { Rng } from '../../util/rng';

const cpu = new CpuBackend('f32');
const f64 = new CpuBackend('f64');

interface Problem {
  T: number; nk: number; nv: number; dk: number; dv: number;
  q: number[]; k: number[]; v: number[]; g: number[]; beta: number[]; state: number[] | null;
}

/** Random inputs as the layer makes them: q, k L2-normalised (q scaled by 1/√dk), g < 0, β in (0, 1). */
function problem(T: number, nk: number, nv: number, dk: number, dv: number, withState: boolean, seed = 1): Problem {
  const rng = new Rng(seed);
  const unit = (scale: number) => {
    const x = Array.from({ length: T * nk * dk }, () => rng.normal());
    for (let r = 0; r < T * nk; r++) {
      const n = Math.hypot(...x.slice(r * dk, (r + 1) * dk));
      for (let i = 0; i < dk; i++) x[r * dk + i] *= scale / n;
    }
    return x;
  };
  return {
    T, nk, nv, dk, dv,
    q: unit(1 / Math.sqrt(dk)), k: unit(1),
    v: Array.from({ length: T * nv * dv }, () => rng.normal()),
    g: Array.from({ length: T * nv }, () => rng.uniform(-1, -0.05)),
    beta: Array.from({ length: T * nv }, () => rng.uniform(0.1, 0.9)),
    state: withState ? Array.from({ length: nv * dk * dv }, () => 0.5 * rng.normal()) : null,
  };
}

/** The recurrence written out on the whole history S_0 … S_T of every head, in doubles (qwen3_5.md §3). */
function naive(p: Problem): { o: number[]; state: number[] } {
  const { T, nk, nv, dk, dv } = p;
  const o = new Array<number>(T * nv * dv).fill(0);
  const state = new Array<number>(nv * dk * dv).fill(0);
  for (let h = 0; h < nv; h++) {
    const kh = Math.floor((h * nk) / nv);
    const S: number[][][] = [
      Array.from({ length: dk }, (_, i) => Array.from({ length: dv }, (_, j) => p.state?.[(h * dk + i) * dv + j] ?? 0)),
    ];
    for (let t = 0; t < T; t++) {
      const kt = p.k.slice((t * nk + kh) * dk, (t * nk + kh + 1) * dk);
      const qt = p.q.slice((t * nk + kh) * dk, (t * nk + kh + 1) * dk);
      const vt = p.v.slice((t * nv + h) * dv, (t * nv + h + 1) * dv);
      const alpha = Math.exp(p.g[t * nv + h]);
      const b = p.beta[t * nv + h];
      const decayed = S[t].map((row) => row.map((x) => alpha * x));
      const m = vt.map((_, j) => kt.reduce((s, ki, i) => s + decayed[i][j] * ki, 0));
      const delta = vt.map((x, j) => b * (x - m[j]));
      S.push(decayed.map((row, i) => row.map((x, j) => x + kt[i] * delta[j])));
      for (let j = 0; j < dv; j++) o[(t * nv + h) * dv + j] = qt.reduce((s, qi, i) => s + S[t + 1][i][j] * qi, 0);
    }
    for (let i = 0; i < dk; i++) for (let j = 0; j < dv; j++) state[(h * dk + i) * dv + j] = S[T][i][j];
  }
  return { o, state };
}

function tensors(b: CpuBackend, p: Problem) {
  const { T, nk, nv, dk, dv } = p;
  return {
    q: b.fromValues(p.q, [T, nk, dk]), k: b.fromValues(p.k, [T, nk, dk]), v: b.fromValues(p.v, [T, nv, dv]),
    g: b.fromValues(p.g, [T, nv]), beta: b.fromValues(p.beta, [T, nv]), state: p.state ? b.fromValues(p.state, [nv, dk, dv]) : undefined,
  };
}

const data = (t: Tensor) => Array.from(f64.data(t) as Float64Array);

describe('gated delta rule (CPU reference)', () => {
  it('computes a hand-worked scalar case: decay first, predict, update, read the updated state', async () => {
    // dk = dv = 1, q 2, k 1: t0 S 0 → u 3, δ 3, S 3, o 6; t1 α ½: S' 1.5, u 3.5, δ 1.75, S 3.25, o 6.5
    const r = F.gatedDeltaRule(
      cpu.fromValues([2, 2], [2, 1, 1]), cpu.fromValues([1, 1], [2, 1, 1]), cpu.fromValues([3, 5], [2, 1, 1]),
      cpu.fromValues([0, Math.log(0.5)], [2, 1]), cpu.fromValues([1, 0.5], [2, 1]),
    );
    assertClose(await r.o.read(), [6, 6.5], { atol: 1e-6, rtol: 1e-6 }, 'o');
    assertClose(await r.state.read(), [3.25], { atol: 1e-6, rtol: 1e-6 }, 'state');
  });

  const shapes: [string, number, number, number, number, number][] = [
    ['T 9, nk = nv', 9, 2, 2, 3, 4],
    ['T 9, GVA nv = 2·nk', 9, 2, 4, 5, 3],
    ['T 1, GVA nv = 2·nk', 1, 1, 2, 4, 6],
    ['T 1, nk = nv', 1, 3, 3, 2, 2],
  ];
  for (const [label, T, nk, nv, dk, dv] of shapes) {
    for (const withState of [false, true]) {
      it(`matches the recurrence on the whole state history: ${label}, ${withState ? 'an initial state' : 'zeros'}`, async () => {
        const p = problem(T, nk, nv, dk, dv, withState, T + nk + nv);
        const want = naive(p);
        const x = tensors(f64, p);
        const r = F.gatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, x.state);
        expect(r.o.shape).toEqual([T, nv, dv]);
        expect(r.state.shape).toEqual([nv, dk, dv]);
        assertClose(data(r.o), want.o, { atol: 1e-12, rtol: 1e-12 }, 'o (f64)');
        assertClose(data(r.state), want.state, { atol: 1e-12, rtol: 1e-12 }, 'state (f64)');
        const y = tensors(cpu, p);
        const r32 = F.gatedDeltaRule(y.q, y.k, y.v, y.g, y.beta, y.state);
        assertClose(await r32.o.read(), want.o, { atol: 1e-6, rtol: 1e-4 }, 'o (f32)');
        assertClose(await r32.state.read(), want.state, { atol: 1e-6, rtol: 1e-4 }, 'state (f32)');
      });
    }
  }

  it('continues from a final state: two parts give the whole sequence', async () => {
    const p = problem(9, 2, 4, 3, 5, true, 3);
    const x = tensors(f64, p);
    const whole = F.gatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, x.state);
    const part = (t: Tensor, from: number, to: number) => {
      const n = t.numel / t.shape[0];
      return f64.fromValues(data(t).slice(from * n, to * n), [to - from, ...t.shape.slice(1)]);
    };
    const ins = [x.q, x.k, x.v, x.g, x.beta];
    const [a0, a1, a2, a3, a4] = ins.map((t) => part(t, 0, 5));
    const [b0, b1, b2, b3, b4] = ins.map((t) => part(t, 5, 9));
    const a = F.gatedDeltaRule(a0, a1, a2, a3, a4, x.state);
    const b = F.gatedDeltaRule(b0, b1, b2, b3, b4, a.state);
    assertClose([...data(a.o), ...data(b.o)], data(whole.o), { atol: 1e-12, rtol: 1e-12 }, 'o');
    assertClose(data(b.state), data(whole.state), { atol: 1e-12, rtol: 1e-12 }, 'state');
  });

  const grads: [string, number, number, number, number, number, boolean][] = [
    ['nk = nv, zeros', 6, 2, 2, 3, 4, false],
    ['GVA nv = 2·nk, an initial state', 7, 2, 4, 3, 2, true],
    ['GVA nv = 3·nk, an initial state, T 1', 1, 1, 3, 4, 3, true],
  ];
  for (const [label, T, nk, nv, dk, dv, withState] of grads) {
    it(`passes gradcheck (f64) for q, k, v, g and β: ${label}`, async () => {
      const x = tensors(f64, problem(T, nk, nv, dk, dv, withState, 11 + T));
      const ins = [x.q, x.k, x.v, x.g, x.beta];
      for (const t of ins) t.requiresGrad = true;
      const r = await gradcheck((q, k, v, g, b) => F.gatedDeltaRule(q, k, v, g, b, x.state).o, ins);
      expect(r.ok, r.message).toBe(true);
      expect(r.inputs.map((i) => i.index)).toEqual([0, 1, 2, 3, 4]);
    });
  }

  it('gives the final state no gradient, so it can be the next call\'s state under a tape', async () => {
    const x = tensors(f64, problem(4, 1, 2, 3, 3, false, 5));
    x.v.requiresGrad = true;
    const tape = new Tape();
    const { o, state } = tape.run(() => {
      const a = F.gatedDeltaRule(x.q, x.k, x.v, x.g, x.beta);
      return F.gatedDeltaRule(x.q, x.k, x.v, x.g, x.beta, a.state);
    });
    expect(state.requiresGrad).toBe(false);
    await tape.backward(o, f64.fromValues(new Array(o.numel).fill(1), o.shape));
    expect(x.v.grad?.shape).toEqual([4, 2, 3]);
    tape.dispose();
  });

  it('refuses wrong shapes, dtypes and a trainable state by name', () => {
    const x = tensors(cpu, problem(3, 2, 4, 3, 5, true));
    const rule = (o: Partial<typeof x>) => {
      const y = { ...x, ...o };
      return () => F.gatedDeltaRule(y.q, y.k, y.v, y.g, y.beta, y.state);
    };
    expect(rule({ k: cpu.zeros([3, 2, 4]) })).toThrow(ShapeMismatch);
    expect(rule({ v: cpu.zeros([3, 3, 5]), g: cpu.zeros([3, 3]), beta: cpu.zeros([3, 3]), state: undefined })).toThrow(
      /3 value heads cannot share 2 key heads/,
    );
    expect(rule({ v: cpu.zeros([2, 4, 5]) })).toThrow(/v has positions 2, expected 3/);
    expect(rule({ g: cpu.zeros([3, 2]) })).toThrow(ShapeMismatch);
    expect(rule({ beta: cpu.zeros([3, 4, 1]) })).toThrow(/beta has shape \[3,4,1\] \(rank 3\), expected rank 2/);
    expect(rule({ state: cpu.zeros([4, 5, 3]) })).toThrow(/state has shape \[4,5,3\] but \[nv, dk, dv\] has shape \[4,3,5\]/);
    expect(rule({ q: cpu.zeros([3, 2, 300]), k: cpu.zeros([3, 2, 300]), state: undefined })).toThrow(/dk 300 is outside 1..256/);
    expect(rule({ q: cpu.zeros([3, 2, 3], 'f16') })).toThrow(DTypeMismatch);
    const st = cpu.zeros([4, 3, 5]);
    st.requiresGrad = true;
    expect(rule({ state: st })).toThrow(InvalidArgument);
  });
});
