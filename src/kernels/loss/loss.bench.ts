import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';
import { cosineLossBackwardKernel, cosineLossKernel, crossEntropyBackwardKernel, crossEntropyKernel } from '.';

export const benches: BenchCase[] = [
  {
    // 128 answer tokens against Qwen's 151,936-entry vocabulary: forward reads the logits once,
    // backward reads them again and writes dlogits
    name: 'cross-entropy f32 forward+backward [128, 151936]',
    setup(backend, s) {
      const [rows, V] = s === 'tiny' ? [4, 1000] : [128, 151_936];
      const rng = new Rng(1);
      const x = backend.fromValues(rng.normals(rows * V), [rows, V]);
      const labels = backend.fromValues(Array.from({ length: rows }, (_, r) => (r % 8 === 7 ? -100 : rng.int(V))), [rows], 'i32');
      const g = backend.fromValues([1], [1]);
      const attrs = { ignoreIndex: -100 };
      return {
        run() {
          const [loss, lse, scale] = backend.run(crossEntropyKernel, [x, labels], attrs);
          backend.run(crossEntropyBackwardKernel, [x, labels, lse, scale, g], attrs)[0].dispose();
          for (const t of [loss, lse, scale]) t.dispose();
        },
        flops: 8 * rows * V,
        bytes: 12 * rows * V,
        dispose: () => [x, labels, g].forEach((t) => t.dispose()),
      };
    },
  },
  {
    // the inner-link loss at d = 2048 over 4096 positions, gradient for the prediction only
    name: 'cosine loss f32 forward+backward [4096, 2048]',
    setup(backend, s) {
      const [rows, d] = s === 'tiny' ? [8, 64] : [4096, 2048];
      const rng = new Rng(2);
      const a = backend.fromValues(rng.normals(rows * d), [rows, d]);
      const b = backend.fromValues(rng.normals(rows * d), [rows, d]);
      const mask = backend.fromValues(Array.from({ length: rows }, (_, r) => (r % 4 ? 1 : 0)), [rows]);
      const g = backend.fromValues([1], [1]);
      return {
        run() {
          const [loss, scale, stats] = backend.run(cosineLossKernel, [a, b, mask], undefined);
          backend.run(cosineLossBackwardKernel, [a, b, stats, scale, g, mask], { wrt: 'a' })[0].dispose();
          for (const t of [loss, scale, stats]) t.dispose();
        },
        flops: 12 * rows * d,
        bytes: 20 * rows * d,
        dispose: () => [a, b, mask, g].forEach((t) => t.dispose()),
      };
    },
  },
];
