import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, type ParityEnv, TOL, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';

// [T, nk, nv, dk, dv]: Qwen3.5's head size with GVA, one of everything, odd sizes with GVA 3, several key heads, wide dv,
// dk past 128 (CUDA's 256-float column; its rows 64).
const SHAPES: [number, number, number, number, number][] = [
  [5, 1, 2, 128, 128], [1, 1, 1, 1, 1], [3, 1, 3, 17, 5], [7, 2, 4, 3, 17], [4, 3, 3, 7, 96], [2, 1, 1, 200, 40],
];

/** Inputs as the layer makes them: q, k L2-normalised (q scaled by 1/√dk), g < 0, β in (0, 1). */
function inputs(env: ParityEnv, T: number, nk: number, nv: number, dk: number, dv: number) {
  const unit = (scale: number) => {
    const x = env.rng.normals(T * nk * dk);
    for (let r = 0; r < T * nk; r++) {
      let n = 0;
      for (let i = 0; i < dk; i++) n += x[r * dk + i] ** 2;
      for (let i = 0; i < dk; i++) x[r * dk + i] *= scale / Math.sqrt(n);
    }
    return x;
  };
  return {
    q: { values: unit(1 / Math.sqrt(dk)), shape: [T, nk, dk] },
    k: { values: unit(1), shape: [T, nk, dk] },
    v: { values: env.rng.normals(T * nv * dv), shape: [T, nv, dv] },
    g: { values: env.rng.uniforms(T * nv, -1, -0.05), shape: [T, nv] },
    beta: { values: env.rng.uniforms(T * nv, 0.1, 0.9), shape: [T, nv] },
    state: { values: env.rng.normals(nv * dk * dv, 0.5), shape: [nv, dk, dv] },
  };
}

export const cases: ParityCase[] = SHAPES.map(([T, nk, nv, dk, dv]) => ({
  name: `gated delta rule forward (zeros and a state) and backward T ${T} nk ${nk} nv ${nv} dk ${dk} dv ${dv}`,
  async run(env) {
    const x = inputs(env, T, nk, nv, dk, dv);
    const five = [x.q, x.k, x.v, x.g, x.beta];
    const [g, c] = (['g', 'c'] as const).map((side) => five.map((s) => pair(env, s.values, s.shape)[side]));
    const st = pair(env, x.state.values, x.state.shape);
    for (const withState of [false, true]) {
      const a = F.gatedDeltaRule(g[0], g[1], g[2], g[3], g[4], withState ? st.g : undefined);
      const b = F.gatedDeltaRule(c[0], c[1], c[2], c[3], c[4], withState ? st.c : undefined);
      const label = withState ? 'state' : 'zeros';
      await expectParity(a.o, b.o, TOL.f32, `${label} o`);
      await expectParity(a.state, b.state, TOL.f32, `${label} final state`);
      [a.o, a.state, b.o, b.state].forEach((t) => t.dispose());
    }
    [...g, ...c, st.g, st.c].forEach((t) => t.dispose());
    for (const withState of [false, true]) {
      const fn = (q: Tensor, k: Tensor, v: Tensor, gg: Tensor, beta: Tensor) =>
        F.gatedDeltaRule(q, k, v, gg, beta, withState ? q.backend.fromValues(x.state.values, x.state.shape) : undefined).o;
      await expectGradParity(env, `backward (${withState ? 'state' : 'zeros'})`, fn, five, TOL.f32);
    }
  },
}));
