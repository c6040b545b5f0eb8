import { F } from '../../autograd';
import type { BenchCase, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';

// The logit lens: softmax probabilities of the latent rows over a real vocabulary. Bytes count one
// read of the input and the [m, k] values and indices written.
function bench(m: number, k: number): BenchCase {
  const dims = (size: BenchSize) => (size === 'tiny' ? [2, 1000] : [m, 151936]);
  return {
    name: `topk k=${k} of [${m}, 151936] (tiny: [2, 1000])`,
    setup(backend, size) {
      const [rows, v] = dims(size);
      const x = backend.fromValues(new Rng(7).normals(rows * v), [rows, v]);
      return {
        run: () => {
          const r = F.topk(x, k);
          r.values.dispose();
          r.indices.dispose();
        },
        flops: 0,
        bytes: 4 * rows * v + 8 * rows * k,
        dispose: () => x.dispose(),
      };
    },
  };
}

export const benches: BenchCase[] = [bench(1, 5), bench(64, 5), bench(64, 32)];
