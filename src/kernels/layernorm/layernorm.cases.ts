import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, TOL, expectParity, pair } from '../workbench';
import { type InputSpec, expectGradParity } from '../workbench/gradparity';

// [rows, cols]: odd sizes and one row wider than 1024 (the 256-thread variant).
const SHAPES = [[1, 1], [3, 17], [17, 96], [96, 200], [200, 3], [3, 1100]];

export const cases: ParityCase[] = SHAPES.map((shape) => ({
  name: shape[1] >= 1024
    ? `layernorm forward (affine on/off) and backward, 256-thread rows [${shape}]`
    : `layernorm forward (affine on/off, f32/f16/bf16 params) and backward [${shape}]`,
  async run(env) {
    const [rows, cols] = shape;
    // an offset mean: the two-pass variance must not lose it
    const xv = env.rng.normals(rows * cols, 2).map((v) => v + 3);
    const gv = env.rng.normals(cols);
    const bv = env.rng.normals(cols);
    const x = pair(env, xv, shape);
    await expectParity(F.layerNorm(x.g, null, null), F.layerNorm(x.c, null, null), TOL.f32, 'no affine');
    // the wide row compiles 256-thread pipelines, slow on SwiftShader: fewer variants there
    const wide = cols >= 1024;
    for (const dt of wide ? (['bf16'] as const) : (['f32', 'f16', 'bf16'] as const)) {
      const g = pair(env, gv, [cols], dt);
      const b = pair(env, bv, [cols], dt);
      await expectParity(F.layerNorm(x.g, g.g, b.g), F.layerNorm(x.c, g.c, b.c), TOL.f32, `${dt} affine`);
    }
    // parameter gradients sum up to 200 rows in another order on each side, yet the worst element stays
    // within a third of the f32 tolerance on lavapipe (an atol of 1e-4 was 10x more than needed)
    const gtol = TOL.f32;
    const combos: [boolean, boolean | null, boolean | null][] = [
      [true, true, true], [false, true, true], [true, null, null], [true, false, true], [false, null, true],
    ];
    for (const [nx, ng, nb] of wide ? combos.slice(0, 1) : combos) {
      const inputs: InputSpec[] = [{ values: xv, shape, grad: nx }];
      if (ng !== null) inputs.push({ values: gv, shape: [cols], grad: ng });
      if (nb !== null) inputs.push({ values: bv, shape: [cols], grad: nb });
      const fn = (...ts: Tensor[]) => F.layerNorm(ts[0], ng !== null ? ts[1] : null, nb !== null ? ts[ng !== null ? 2 : 1] : null, 1e-5);
      await expectGradParity(env, `backward x ${nx} gamma ${ng} beta ${nb}`, fn, inputs, TOL.f32, gtol);
    }
  },
}));
