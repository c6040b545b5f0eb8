import { F } from '../../autograd';
import { eachRowCut } from '../row-cut';
import { type ParityCase, TOL, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';

// [rows..., cols]: odd sizes, a per-head [tokens, heads, head_dim] shape and a row wider than 1024
// (the 256-thread variant). f16/bf16 weights are decoded identically on both sides, so f32 tolerances hold.
const SHAPES = [[1, 1], [3, 17], [17, 3, 64], [96, 200], [200, 96], [3, 1100]];

export const cases: ParityCase[] = SHAPES.map((shape) => ({
  name: shape[shape.length - 1] >= 1024
    ? `rmsnorm forward (f32/bf16 weight) and backward, 256-thread rows [${shape}]`
    : `rmsnorm forward (f32/f16/bf16 weight, offset 0/1) and backward [${shape}]`,
  async run(env) {
    const cols = shape[shape.length - 1];
    const n = shape.reduce((a, b) => a * b, 1);
    const xv = env.rng.normals(n, 2);
    const wv = env.rng.normals(cols);
    const x = pair(env, xv, shape);
    // the wide row compiles 256-thread pipelines, slow on SwiftShader: fewer variants there
    const wide = cols >= 1024;
    for (const dt of wide ? (['f32', 'bf16'] as const) : (['f32', 'f16', 'bf16'] as const)) {
      const w = pair(env, wv, [cols], dt);
      for (const offset of wide ? [dt === 'f32' ? 0 : 1] : [0, 1]) {
        const want = F.rmsNorm(x.c, w.c, 1e-6, { offset });
        // the forward in both layouts (rowCut), whichever the adapter would take
        await eachRowCut(async (cut) => {
          await expectParity(F.rmsNorm(x.g, w.g, 1e-6, { offset }), want, TOL.f32, `${dt} offset ${offset} (${cut})`);
        });
      }
    }
    // parameter gradients sum up to 200 rows in another order on each side, yet the worst element stays
    // within a third of the f32 tolerance on lavapipe (an atol of 1e-4 was 10x more than needed)
    const gtol = TOL.f32;
    // eps 0.5 against mean(x²) ≈ 4 moves every value by ~6%: a kernel that dropped eps would show (1e-5 would not)
    for (const [nx, nw] of wide ? [[true, true]] : [[true, true], [false, true], [true, false]]) {
      const xs = { values: xv, shape, grad: nx };
      const ws = { values: wv, shape: [cols], grad: nw };
      await expectGradParity(env, `backward x ${nx} w ${nw}`, (a, b) => F.rmsNorm(a, b, 0.5, { offset: 1 }), [xs, ws], TOL.f32, gtol);
    }
    if (wide) return;
    const xs = { values: xv, shape };
    const wb = { values: wv, shape: [cols], dtype: 'bf16' as const };
    await expectGradParity(env, 'backward, frozen bf16 weight', (a, b) => F.rmsNorm(a, b, 1e-5), [xs, wb], TOL.f32, gtol);
  },
}));
