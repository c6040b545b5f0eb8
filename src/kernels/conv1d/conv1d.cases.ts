import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, TOL, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';

// [T, C, K]: one position, odd sizes, Qwen3.5's kernel 4 over many channels, K = 1 (a per-channel scale), K > T.
const SHAPES: [number, number, number][] = [[1, 3, 4], [7, 5, 4], [17, 96, 4], [3, 200, 2], [5, 17, 1], [2, 9, 6]];

export const cases: ParityCase[] = SHAPES.map(([T, C, K]) => ({
  name: `conv1d causal depthwise forward (zeros and a cached state) and backward [${T}, ${C}] K ${K}`,
  async run(env) {
    const xv = env.rng.normals(T * C);
    const w = pair(env, env.rng.normals(C * K, 0.5), [C, K]);
    const x = pair(env, xv, [T, C]);
    await expectParity(F.causalConv1d(x.g, w.g), F.causalConv1d(x.c, w.c), TOL.f32, 'zeros');
    if (K > 1) {
      const st = pair(env, env.rng.normals((K - 1) * C), [K - 1, C]);
      await expectParity(F.causalConv1d(x.g, w.g, st.g), F.causalConv1d(x.c, w.c, st.c), TOL.f32, 'state');
    }
    const wv = await w.c.read();
    const fn = (t: Tensor) => F.causalConv1d(t, t.backend.fromValues(wv, [C, K]));
    await expectGradParity(env, 'backward', fn, [{ values: xv, shape: [T, C] }], TOL.f32);
    // the weights' gradient (a trainable decoder's), after a cached state when there is one
    const sv = env.rng.normals(Math.max(K - 1, 0) * C);
    const fw = (t: Tensor) => F.causalConv1d(t.backend.fromValues(xv, [T, C]), t, K > 1 ? t.backend.fromValues(sv, [K - 1, C]) : undefined);
    await expectGradParity(env, 'backward to w', fw, [{ values: wv, shape: [C, K] }], TOL.f32);
  },
}));
