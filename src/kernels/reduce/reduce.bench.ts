import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';
import { clipGradNormKernel } from '.';

// 2^24 floats (64 MiB): bandwidth-bound; one read of the input, partials are negligible
const n = (s: 'tiny' | 'full') => (s === 'tiny' ? 4096 : 1 << 24);

export const benches: BenchCase[] = [
  ...(['sum', 'sumSquares'] as const).map((op): BenchCase => ({
    name: `${op} f32 2^24`,
    setup(backend, s) {
      const x = backend.fromValues(new Rng(1).normals(n(s)), [n(s)]);
      return { run: () => F[op](x).dispose(), flops: (op === 'sum' ? 1 : 2) * n(s), bytes: 4 * n(s), dispose: () => x.dispose() };
    },
  })),
  {
    name: 'meanLastDim f32 [4096, 2048]',
    setup(backend, s) {
      const [rows, cols] = s === 'tiny' ? [16, 64] : [4096, 2048];
      const x = backend.fromValues(new Rng(2).normals(rows * cols), [rows, cols]);
      return { run: () => F.meanLastDim(x).dispose(), flops: rows * cols, bytes: 4 * rows * cols, dispose: () => x.dispose() };
    },
  },
  {
    // the gradient of one inner link at d = 2048 (2d^2 + 6d = 8,400,896): a norm pass and a scaling pass
    name: 'clip_grad_norm f32 8.4M',
    setup(backend, s) {
      const len = s === 'tiny' ? 4096 : 8_400_896;
      const g = backend.fromValues(new Rng(3).normals(len), [len]);
      return {
        run: () => backend.run(clipGradNormKernel, [g], { maxNorm: 1e9 })[0].dispose(),
        flops: 3 * len,
        bytes: 12 * len,
        dispose: () => g.dispose(),
      };
    },
  },
];
