import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';

export const benches: BenchCase[] = [
  ...(['f16', 'bf16'] as const).map((dt): BenchCase => ({
    name: `cast f32 -> ${dt} -> f32, 4M elements (tiny 4096)`,
    setup(backend, size) {
      const n = size === 'tiny' ? 4096 : 1 << 22;
      const x = backend.fromValues(new Rng(1).normals(n), [n]);
      return {
        run: () => {
          const h = F.cast(x, dt);
          F.cast(h, 'f32').dispose();
          h.dispose();
        },
        flops: 0,
        bytes: 12 * n,
        dispose: () => x.dispose(),
      };
    },
  })),
];
