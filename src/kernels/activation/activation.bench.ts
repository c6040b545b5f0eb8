import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';
import { gluBackwardKernel } from '.';

const count = (size: 'tiny' | 'full') => (size === 'tiny' ? 4096 : 1 << 22);

const unary = (name: string, fn: (x: Tensor) => Tensor, flopsPer: number): BenchCase => ({
  name: `${name} f32`,
  setup(backend, size) {
    const n = count(size);
    const x = backend.fromValues(new Rng(1).normals(n), [n]);
    return { run: () => fn(x).dispose(), flops: flopsPer * n, bytes: 8 * n, dispose: () => x.dispose() };
  },
});

export const benches: BenchCase[] = [
  unary('silu', F.silu, 4),
  unary('gelu', F.gelu, 20),
  unary('geluTanh', F.geluTanh, 8),
  {
    name: 'swiglu f32',
    setup(backend, size) {
      const n = count(size);
      const rng = new Rng(1);
      const gate = backend.fromValues(rng.normals(n), [n]);
      const up = backend.fromValues(rng.normals(n), [n]);
      return { run: () => F.swiglu(gate, up).dispose(), flops: 5 * n, bytes: 12 * n, dispose: () => (gate.dispose(), up.dispose()) };
    },
  },
  {
    name: 'swiglu backward f32 (dgate and dup)',
    setup(backend, size) {
      const n = count(size);
      const rng = new Rng(1);
      const [gate, up, g] = [0, 1, 2].map(() => backend.fromValues(rng.normals(n), [n]));
      return {
        run: () => backend.run(gluBackwardKernel, [gate, up, g], { act: 'silu', dgate: true, dup: true }).forEach((t) => t.dispose()),
        flops: 10 * n,
        bytes: 20 * n,
        dispose: () => [gate, up, g].forEach((t) => t.dispose()),
      };
    },
  },
];
