import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';

export const benches: BenchCase[] = [
  {
    name: 'add f32',
    setup(backend, size) {
      const n = size === 'tiny' ? 4096 : 1 << 22;
      const rng = new Rng(1);
      const a = backend.fromValues(rng.normals(n), [n]);
      const b = backend.fromValues(rng.normals(n), [n]);
      return {
        run: () => F.add(a, b).dispose(),
        flops: n,
        bytes: 12 * n,
        dispose: () => (a.dispose(), b.dispose()),
      };
    },
  },
];
