import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';

export const benches: BenchCase[] = [
  {
    // one inner link at d = 2048: 2d^2 + 6d = 8,400,896 parameters; per element p, m, v read and
    // written, g and the decay mask read (32 bytes)
    name: 'adamw f32 8.4M params',
    setup(backend, s) {
      const n = s === 'tiny' ? 4096 : 8_400_896;
      const rng = new Rng(1);
      const p = backend.fromValues(rng.normals(n), [n]);
      const g = backend.fromValues(rng.normals(n, 1e-2), [n]);
      const m = backend.zeros([n]);
      const v = backend.zeros([n]);
      const mask = backend.fromValues(Array.from({ length: n }, (_, i) => (i % 2048 ? 1 : 0)), [n]);
      let t = 0;
      return {
        run: () => F.adamwStep(p, g, m, v, { lr: 1e-4, t: ++t, weightDecay: 0.01, decayMask: mask }),
        flops: 16 * n,
        bytes: 32 * n,
        dispose: () => [p, g, m, v, mask].forEach((x) => x.dispose()),
      };
    },
  },
];
