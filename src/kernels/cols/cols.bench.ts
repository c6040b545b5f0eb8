import { F } from '../../autograd';
import type { BenchCase, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';
import { concatColsKernel } from '.';

// Qwen3.5-4B's fused projections: a 512-token prefill's [T, 6144] q | k | v, and [T·heads, 512] query | gate halves.
const dims = (size: BenchSize, rows: number) => (size === 'tiny' ? Math.min(rows, 16) : rows);
const QKV = [2048, 2048, 2048];
const tinyQkv = [32, 32, 32];

export const benches: BenchCase[] = [
  {
    name: 'cols splitCols [512, 6144] into 2048 | 2048 | 2048 (tiny [16, 96])',
    setup(backend, size) {
      const T = dims(size, 512);
      const widths = size === 'tiny' ? tinyQkv : QKV;
      const C = widths.reduce((a, b) => a + b, 0);
      const x = backend.fromValues(new Rng(1).normals(T * C), [T, C]);
      return {
        run: () => F.splitCols(x, widths).forEach((t) => t.dispose()),
        flops: 0, bytes: 2 * 4 * T * C, dispose: () => x.dispose(),
      };
    },
  },
  {
    name: 'cols concat_cols (splitCols backward) [512·16, 256 | 256] (tiny [16, 8 | 8])',
    setup(backend, size) {
      const R = dims(size, 512 * 16);
      const w = size === 'tiny' ? 8 : 256;
      const rng = new Rng(2);
      const parts = [0, 1].map(() => backend.fromValues(rng.normals(R * w), [R, w]));
      return {
        run: () => backend.run(concatColsKernel, parts, undefined).forEach((t) => t.dispose()),
        flops: 0, bytes: 2 * 4 * R * 2 * w, dispose: () => parts.forEach((t) => t.dispose()),
      };
    },
  },
];
