import { F, Tape } from '../../autograd';
import { type ParityCase, TOL, expectParity, pair } from '../workbench';

const shapes: number[][] = [[1, 1], [3, 17], [17, 96], [5, 200], [2, 3, 257], [1, 1000]];

export const cases: ParityCase[] = [
  ...shapes.map((shape) => ({
    name: `softmax/logSoftmax forward and backward [${shape}]`,
    async run(env: Parameters<ParityCase['run']>[0]) {
      const n = shape.reduce((a, b) => a * b, 1);
      // scale 4 spreads logits over ~±12 so both the max subtraction and tiny probabilities matter
      const x = pair(env, env.rng.normals(n, 4), shape);
      const dy = pair(env, env.rng.normals(n), shape);
      for (const [name, fn] of [['softmax', F.softmax], ['logSoftmax', F.logSoftmax]] as const) {
        await expectParity(fn(x.g), fn(x.c), TOL.f32, name);
        const grads = [x.g, x.c].map((t) => {
          t.requiresGrad = true;
          const tape = new Tape();
          const y = tape.run(() => fn(t));
          return { tape, y, t };
        });
        for (const [g, s] of [[grads[0], dy.g], [grads[1], dy.c]] as const) await g.tape.backward(g.y, s);
        await expectParity(grads[0].t.grad!, grads[1].t.grad!, TOL.f32, `${name} backward`);
        for (const g of grads) g.tape.dispose(), g.t.grad?.dispose(), (g.t.grad = null), (g.t.requiresGrad = false);
      }
    },
  })),
  {
    name: 'softmax large logits and -inf mask [4, 33]',
    async run(env) {
      const v = env.rng.normals(4 * 33, 3).map((t, i) => (i % 7 === 3 ? -Infinity : t + 1e4));
      const x = pair(env, v, [4, 33]);
      await expectParity(F.softmax(x.g), F.softmax(x.c), TOL.f32, 'softmax');
      // -inf stays -inf on both sides; the kernel computes (x − max) − log(sum) so the ~1e4 offset cancels exactly
      await expectParity(F.logSoftmax(x.g), F.logSoftmax(x.c), TOL.f32, 'logSoftmax');
    },
  },
];
