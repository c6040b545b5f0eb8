import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, TOL, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';

// Backward rules compose the forward kernels with attributes the forward checks never use (scale by 1
// and -1, sumRows of a gradient, a broadcast add onto zeros), so the gradients are compared too.
const GRADS: [string, (...t: Tensor[]) => Tensor, 'row' | 'full'][] = [
  ['add broadcast', (a, b) => F.add(a, b), 'row'],
  ['sub broadcast', (a, b) => F.sub(a, b), 'row'],
  ['sub same shape', (a, b) => F.sub(a, b), 'full'],
  ['mul broadcast', (a, b) => F.mul(a, b), 'row'],
  ['mul same shape', (a, b) => F.mul(a, b), 'full'],
  ['scale', (a) => F.scale(a, -1.5, 2), 'full'],
  ['sumRows', (a) => F.sumRows(a, [5]), 'full'],
];

export const cases: ParityCase[] = [1, 3, 17, 96, 200].flatMap((n) => [
  {
    name: `elementwise add/sub/mul/scale/sumRows forward and backward [${n}, 5]`,
    async run(env) {
      const av = env.rng.normals(n * 5);
      const bv = env.rng.normals(5);
      const cv = env.rng.normals(n * 5);
      const a = pair(env, av, [n, 5]);
      const b = pair(env, bv, [5]);
      const c = pair(env, cv, [n, 5]);
      await expectParity(F.add(a.g, b.g), F.add(a.c, b.c), TOL.f32, 'add');
      await expectParity(F.sub(a.g, c.g), F.sub(a.c, c.c), TOL.f32, 'sub');
      await expectParity(F.mul(a.g, b.g), F.mul(a.c, b.c), TOL.f32, 'mul');
      await expectParity(F.scale(a.g, 0.3, -2), F.scale(a.c, 0.3, -2), TOL.f32, 'scale');
      await expectParity(F.sumRows(a.g, [5]), F.sumRows(a.c, [5]), TOL.f32, 'sumRows');
      for (const [name, fn, kind] of GRADS) {
        const second = kind === 'row' ? { values: bv, shape: [5] } : { values: cv, shape: [n, 5] };
        await expectGradParity(env, name, fn, [{ values: av, shape: [n, 5] }, ...(fn.length > 1 ? [second] : [])], TOL.f32);
      }
    },
  },
]);
