import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';
import { normParamGradKernel } from '../rmsnorm';
import { normShape } from '../rmsnorm/rmsnorm.bench';
import { layernormBackwardKernel } from '.';

export const benches: BenchCase[] = [
  {
    name: 'layernorm forward, f32 gamma and beta',
    setup(backend, size) {
      const [rows, cols] = normShape(size);
      const rng = new Rng(1);
      const x = backend.fromValues(rng.normals(rows * cols), [rows, cols]);
      const g = backend.fromValues(rng.normals(cols), [cols]);
      const b = backend.fromValues(rng.normals(cols), [cols]);
      return {
        run: () => F.layerNorm(x, g, b).dispose(),
        flops: 7 * rows * cols,
        bytes: 8 * rows * cols + 8 * cols,
        dispose: () => (x.dispose(), g.dispose(), b.dispose()),
      };
    },
  },
  {
    name: 'layernorm backward (dx, dgamma, dbeta)',
    setup(backend, size) {
      const [rows, cols] = normShape(size);
      const rng = new Rng(1);
      const x = backend.fromValues(rng.normals(rows * cols), [rows, cols]);
      const dy = backend.fromValues(rng.normals(rows * cols), [rows, cols]);
      const g = backend.fromValues(rng.normals(cols), [cols]);
      return {
        run: () => {
          const [dx, stats] = backend.run(layernormBackwardKernel, [x, dy, g], { eps: 1e-5, gamma: true, dx: true });
          const pg = backend.run(normParamGradKernel, [dy, x, stats], { gamma: true, beta: true });
          for (const t of [dx, stats, ...pg]) t.dispose();
        },
        flops: 14 * rows * cols,
        bytes: 20 * rows * cols + 12 * cols,
        dispose: () => (x.dispose(), dy.dispose(), g.dispose()),
      };
    },
  },
];
