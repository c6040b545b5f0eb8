import { F } from '../../autograd';
import type { BenchCase } from '../workbench';
import { Rng } from '../../util/rng';
import { ropeInvFreq } from '.';

export const benches: BenchCase[] = [
  {
    name: 'rope f32 (neox, theta 1e6)',
    setup(backend, size) {
      const [T, H, D] = size === 'tiny' ? [8, 2, 64] : [512, 16, 128];
      const n = T * H * D;
      const x = backend.fromValues(new Rng(1).normals(n), [T, H, D]);
      const pos = backend.fromValues(Array.from({ length: T }, (_, t) => 100 + t), [T], 'i32');
      const freq = backend.fromValues(ropeInvFreq({ theta: 1e6, headDim: D }), [D / 2]);
      return {
        run: () => F.rope(x, pos, freq).dispose(),
        // per pair: angle, range reduction, cos, sin, 6 for the rotation
        flops: 6 * n,
        bytes: 8 * n + 4 * T + 2 * D,
        dispose: () => (x.dispose(), pos.dispose(), freq.dispose()),
      };
    },
  },
];
