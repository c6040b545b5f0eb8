import { F } from '../../autograd';
import { type DType, rowBytes } from '../../formats/dtype';
import { embeddingBackwardKernel } from '.';
import type { BenchCase, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';

const dims = (size: BenchSize) => (size === 'tiny' ? { V: 1000, d: 256, n: 64 } : { V: 32000, d: 2048, n: 512 });

export const benches: BenchCase[] = [
  ...(['f32', 'q4_0'] as DType[]).map((dt) => ({
    name: `embedding gather ${dt} [32000, 2048] x 512 ids (tiny [1000, 256] x 64)`,
    setup(backend, size) {
      const { V, d, n } = dims(size);
      const rng = new Rng(1);
      const table = backend.fromValues(rng.normals(V * d), [V, d], dt);
      const ids = backend.fromValues(Array.from({ length: n }, () => rng.int(V)), [n], 'i32');
      return {
        run: () => F.embedding(ids, table).dispose(),
        flops: 0,
        bytes: n * (4 + rowBytes(dt, d) + 4 * d),
        dispose: () => (table.dispose(), ids.dispose()),
      };
    },
  }) satisfies BenchCase),
  {
    name: 'embedding scatter-add f32 [32000, 2048] from 512 ids (tiny [1000, 256] x 64)',
    setup(backend, size) {
      const { V, d, n } = dims(size);
      const rng = new Rng(2);
      const ids = backend.fromValues(Array.from({ length: n }, () => rng.int(V)), [n], 'i32');
      const g = backend.fromValues(rng.normals(n * d), [n, d]);
      return {
        run: () => backend.run(embeddingBackwardKernel, [ids, g], { V })[0].dispose(),
        flops: n * d,
        bytes: 4 * V * d + 4 * n * d + 4 * n,
        dispose: () => (ids.dispose(), g.dispose()),
      };
    },
  },
];
