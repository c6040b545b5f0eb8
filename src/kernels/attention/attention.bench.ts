import { F } from '../../autograd';
import type { Backend } from '../../tensor/backend';
import type { BenchCase, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';
import { attentionBackwardKVKernel, attentionBackwardQKernel, attentionKernel, attentionRowDotKernel } from '.';

interface Shape {
  T: number;
  S: number;
  hq: number;
  hkv: number;
  D: number;
}

// Full: a 1.5B-class layer (16 query heads over 8 kv heads, head_dim 128). Tiny: a CI smoke size.
const prefill = (s: BenchSize): Shape =>
  s === 'tiny' ? { T: 16, S: 16, hq: 4, hkv: 2, D: 16 } : { T: 512, S: 512, hq: 16, hkv: 8, D: 128 };
const decode = (s: BenchSize): Shape => (s === 'tiny' ? { T: 1, S: 64, hq: 4, hkv: 2, D: 16 } : { T: 1, S: 2048, hq: 16, hkv: 8, D: 128 });

/** Query-key pairs the causal mask lets through (each costs 2·D multiply-adds per matmul). */
const visiblePairs = ({ T, S, hq }: Shape) => hq * (T * (S - T) + (T * (T + 1)) / 2);

function tensors(backend: Backend, sh: Shape) {
  const rng = new Rng(1);
  return {
    q: backend.fromValues(rng.normals(sh.T * sh.hq * sh.D), [sh.T, sh.hq, sh.D]),
    k: backend.fromValues(rng.normals(sh.S * sh.hkv * sh.D), [sh.S, sh.hkv, sh.D]),
    v: backend.fromValues(rng.normals(sh.S * sh.hkv * sh.D), [sh.S, sh.hkv, sh.D]),
  };
}

const qBytes = (sh: Shape) => 4 * sh.T * sh.hq * sh.D;
const kvBytes = (sh: Shape) => 4 * sh.S * sh.hkv * sh.D;

function forwardBench(name: string, shapeOf: (s: BenchSize) => Shape): BenchCase {
  return {
    name,
    setup(backend, size) {
      const sh = shapeOf(size);
      const { q, k, v } = tensors(backend, sh);
      return {
        run: () => F.attention(q, k, v).dispose(),
        flops: 4 * sh.D * visiblePairs(sh),
        bytes: 2 * qBytes(sh) + 2 * kvBytes(sh),
        dispose: () => [q, k, v].forEach((t) => t.dispose()),
      };
    },
  };
}

export const benches: BenchCase[] = [
  forwardBench('attention f32 prefill T=S=512 Hq=16 Hkv=8 D=128 (tiny: T=16 D=16)', prefill),
  forwardBench('attention f32 decode T=1 S=2048 Hq=16 Hkv=8 D=128 (tiny: S=64 D=16)', decode),
  {
    name: 'attention f32 prefill backward T=S=512 Hq=16 Hkv=8 D=128 (tiny: T=16 D=16)',
    setup(backend, size) {
      const sh = prefill(size);
      const { q, k, v } = tensors(backend, sh);
      const dO = backend.fromValues(new Rng(2).normals(sh.T * sh.hq * sh.D), [sh.T, sh.hq, sh.D]);
      const [o, lse] = backend.run(attentionKernel, [q, k, v], {});
      return {
        run: () => {
          const [di] = backend.run(attentionRowDotKernel, [o, dO], {});
          backend.run(attentionBackwardQKernel, [q, k, v, lse, di, dO], {})[0].dispose();
          backend.run(attentionBackwardKVKernel, [q, k, v, lse, di, dO], {}).forEach((t) => t.dispose());
          di.dispose();
        },
        // dQ kernel: QKᵀ, dO·Vᵀ, dS·K; dK/dV kernel: QKᵀ, dO·Vᵀ, Pᵀ·dO, dSᵀ·Q
        flops: 14 * sh.D * visiblePairs(sh),
        // reads q, o, dO, k, v (q, dO twice: once per kernel), writes dq, dk, dv
        bytes: 6 * qBytes(sh) + 4 * kvBytes(sh),
        dispose: () => [q, k, v, dO, o, lse].forEach((t) => t.dispose()),
      };
    },
  },
];
