import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';
import { causalConv1dBackwardKernel } from '.';

// Qwen3.5-4B's DeltaNet conv: 8192 channels (q, k, v), kernel 4, over a 512-token prefill and one decode step
const shape = (size: 'tiny' | 'full', T: number) => (size === 'tiny' ? { T: Math.min(T, 16), C: 96 } : { T, C: 8192 });
const K = 4;

const forward = (T0: number, label: string): BenchCase => ({
  name: `conv1d causal depthwise K ${K}, ${label} (tiny: C 96)`,
  setup(backend, size) {
    const { T, C } = shape(size, T0);
    const rng = new Rng(1);
    const x = backend.fromValues(rng.normals(T * C), [T, C]);
    const w = backend.fromValues(rng.normals(C * K), [C, K]);
    const st = backend.fromValues(rng.normals((K - 1) * C), [K - 1, C]);
    return {
      run: () => F.causalConv1d(x, w, st).dispose(), flops: 2 * K * T * C, bytes: 4 * (2 * T * C + C * K + (K - 1) * C),
      dispose: () => [x, w, st].forEach((t) => t.dispose()),
    };
  },
});

export const benches: BenchCase[] = [
  forward(512, 'T 512 C 8192'),
  forward(1, 'one decode step, C 8192'),
  {
    name: `conv1d causal depthwise backward K ${K}, T 512 C 8192 (tiny: T 16 C 96)`,
    setup(backend, size) {
      const { T, C } = shape(size, 512);
      const rng = new Rng(2);
      const g = backend.fromValues(rng.normals(T * C), [T, C]);
      const w = backend.fromValues(rng.normals(C * K), [C, K]);
      return {
        run: () => backend.run(causalConv1dBackwardKernel, [g, w], undefined).forEach((t) => t.dispose()),
        flops: 2 * K * T * C, bytes: 4 * (2 * T * C + C * K), dispose: () => [g, w].forEach((t) => t.dispose()),
      };
    },
  },
];
