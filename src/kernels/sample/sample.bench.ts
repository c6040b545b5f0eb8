import { F } from '../../autograd';
import type { BenchCase, BenchSize } from '../workbench';
import type { SampleOptions } from '../../autograd/ops/sample';
import type { Backend } from '../../tensor/backend';
import { Rng } from '../../util/rng';

// Bandwidth counts one read of the logits, but the kernel reads them once per radix pass (up to 18
// with top-k and top-p): GB/s here means logits consumed per second, not memory traffic.
function bench(label: string, opts: SampleOptions | 'argmax'): BenchCase {
  const dims = (size: BenchSize) => (size === 'tiny' ? [2, 1000] : [4, 151936]);
  return {
    name: `sample ${label} [4, 151936] (tiny: [2, 1000])`,
    setup(backend: Backend, size: BenchSize) {
      const [b, v] = dims(size);
      const x = backend.fromValues(new Rng(3).normals(b * v, 2), [b, v]);
      let step = 0;
      return {
        run: () => (opts === 'argmax' ? F.argmax(x) : F.sample(x, { ...opts, step: step++ })).dispose(),
        flops: 0,
        bytes: 4 * b * v + 4 * b,
        dispose: () => x.dispose(),
      };
    },
  };
}

export const benches: BenchCase[] = [
  bench('argmax', 'argmax'),
  bench('temperature', { temperature: 0.8 }),
  bench('top-k 50 + top-p 0.9', { temperature: 0.7, topK: 50, topP: 0.9 }),
];
