import { F } from '../../autograd';
import type { BenchCase, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';

// The outer loop's shapes: prefix and suffix embeddings around 80 latent rows, hidden 2048.
const dims = (size: BenchSize) => (size === 'tiny' ? { p: 16, l: 80, s: 16, d: 64 } : { p: 256, l: 80, s: 256, d: 2048 });

export const benches: BenchCase[] = [
  {
    name: 'rows concatRows [256 | 80 | 256, 2048] (tiny [16 | 80 | 16, 64])',
    setup(backend, size) {
      const { p, l, s, d } = dims(size);
      const rng = new Rng(1);
      const xs = [p, l, s].map((r) => backend.fromValues(rng.normals(r * d), [r, d]));
      return {
        run: () => F.concatRows(xs).dispose(),
        flops: 0,
        bytes: 2 * 4 * (p + l + s) * d,
        dispose: () => xs.forEach((x) => x.dispose()),
      };
    },
  },
  {
    name: 'rows sliceRows 80 of [592, 2048] (tiny 80 of [112, 64])',
    setup(backend, size) {
      const { p, l, s, d } = dims(size);
      const x = backend.fromValues(new Rng(2).normals((p + l + s) * d), [p + l + s, d]);
      return {
        run: () => F.sliceRows(x, p, l).dispose(),
        flops: 0,
        bytes: 2 * 4 * l * d,
        dispose: () => x.dispose(),
      };
    },
  },
];
