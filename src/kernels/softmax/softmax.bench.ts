import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';
import { softmaxBackwardKernel } from '.';

// A vocabulary row (Qwen: 151,936) times a batch of positions; bytes count one read and one write
// (the kernel reads each row twice, the second time mostly from cache on a real GPU).
const size = (s: 'tiny' | 'full') => (s === 'tiny' ? [4, 256] : [128, 151936]);

export const benches: BenchCase[] = [false, true].flatMap((log) => [
  {
    name: `${log ? 'logSoftmax' : 'softmax'} f32 forward`,
    setup(backend, s) {
      const [rows, cols] = size(s);
      const n = rows * cols;
      const x = backend.fromValues(new Rng(1).normals(n), [rows, cols]);
      const fn = log ? F.logSoftmax : F.softmax;
      return { run: () => fn(x).dispose(), flops: 4 * n, bytes: 8 * n, dispose: () => x.dispose() };
    },
  },
  {
    name: `${log ? 'logSoftmax' : 'softmax'} f32 backward`,
    setup(backend, s) {
      const [rows, cols] = size(s);
      const n = rows * cols;
      const rng = new Rng(2);
      const y = backend.fromValues(rng.normals(n), [rows, cols]);
      const dy = backend.fromValues(rng.normals(n), [rows, cols]);
      return {
        run: () => backend.run(softmaxBackwardKernel, [y, dy], { log })[0].dispose(),
        flops: 4 * n,
        bytes: 12 * n,
        dispose: () => (y.dispose(), dy.dispose()),
      };
    },
  },
]);
