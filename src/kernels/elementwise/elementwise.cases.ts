import { F } from '../../autograd';
import { type ParityCase, TOL, expectParity, pair } from '../../testing';

export const cases: ParityCase[] = [1, 3, 17, 96, 200].flatMap((n) => [
  {
    name: `elementwise add/sub/mul/scale/sumRows [${n}, 5]`,
    async run(env) {
      const a = pair(env, env.rng.normals(n * 5), [n, 5]);
      const b = pair(env, env.rng.normals(5), [5]);
      const c = pair(env, env.rng.normals(n * 5), [n, 5]);
      await expectParity(F.add(a.g, b.g), F.add(a.c, b.c), TOL.f32, 'add');
      await expectParity(F.sub(a.g, c.g), F.sub(a.c, c.c), TOL.f32, 'sub');
      await expectParity(F.mul(a.g, b.g), F.mul(a.c, b.c), TOL.f32, 'mul');
      await expectParity(F.scale(a.g, 0.3, -2), F.scale(a.c, 0.3, -2), TOL.f32, 'scale');
      await expectParity(F.sumRows(a.g, [5]), F.sumRows(a.c, [5]), TOL.f32, 'sumRows');
    },
  },
]);
