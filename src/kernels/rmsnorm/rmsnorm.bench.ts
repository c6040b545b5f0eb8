import { F } from '../../autograd';
import type { Backend } from '../../tensor/backend';
import type { BenchCase, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';
import { normParamGradKernel, rmsnormBackwardKernel } from '.';

/** [rows, cols]: a 4096-token prefill at hidden 2048, or a tiny smoke shape. */
export const normShape = (size: BenchSize) => (size === 'tiny' ? [64, 256] : [4096, 2048]);

function setup(backend: Backend, size: BenchSize, wdtype: 'f32' | 'bf16') {
  const [rows, cols] = normShape(size);
  const rng = new Rng(1);
  const x = backend.fromValues(rng.normals(rows * cols), [rows, cols]);
  const w = backend.fromValues(rng.normals(cols), [cols], wdtype);
  return { rows, cols, x, w, wbytes: wdtype === 'f32' ? 4 * cols : 2 * cols };
}

export const benches: BenchCase[] = [
  ...(['f32', 'bf16'] as const).map((wd): BenchCase => ({
    name: `rmsnorm forward, ${wd} weight`,
    setup(backend, size) {
      const { rows, cols, x, w, wbytes } = setup(backend, size, wd);
      return {
        run: () => F.rmsNorm(x, w, 1e-6).dispose(),
        flops: 4 * rows * cols,
        bytes: 8 * rows * cols + wbytes,
        dispose: () => (x.dispose(), w.dispose()),
      };
    },
  })),
  {
    name: 'rmsnorm backward (dx and f32 dw)',
    setup(backend, size) {
      const { rows, cols, x, w } = setup(backend, size, 'f32');
      const g = backend.fromValues(new Rng(2).normals(rows * cols), [rows, cols]);
      return {
        run: () => {
          const [dx, stats] = backend.run(rmsnormBackwardKernel, [x, w, g], { eps: 1e-6, offset: 0, dx: true });
          const [dw] = backend.run(normParamGradKernel, [g, x, stats], { gamma: true, beta: false });
          for (const t of [dx, stats, dw]) t.dispose();
        },
        flops: 10 * rows * cols,
        // dx: read x, g, write dx; dw: read g, x again
        bytes: 20 * rows * cols + 8 * cols,
        dispose: () => (x.dispose(), w.dispose(), g.dispose()),
      };
    },
  },
];
