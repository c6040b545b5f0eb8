import { F } from '../../autograd';
import { type DType, byteSize } from '../../formats/dtype';
import type { Backend } from '../../tensor/backend';
import type { BenchCase, BenchRun, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';

/** y = x·wᵀ with x [M, K] f32 and w [N, K] in `dtype`; bytes count every operand once. */
function linearRun(backend: Backend, M: number, N: number, K: number, dtype: DType): BenchRun {
  const rng = new Rng(1);
  const x = backend.fromValues(rng.normals(M * K), [M, K]);
  const w = backend.fromValues(rng.normals(N * K, 0.05), [N, K], dtype);
  return {
    run: () => F.linear(x, w).dispose(),
    flops: 2 * M * N * K,
    bytes: 4 * M * K + byteSize(dtype, [N, K]) + 4 * M * N,
    dispose: () => (x.dispose(), w.dispose()),
  };
}

function squareRun(backend: Backend, n: number): BenchRun {
  const rng = new Rng(2);
  const a = backend.fromValues(rng.normals(n * n), [n, n]);
  const b = backend.fromValues(rng.normals(n * n), [n, n]);
  return { run: () => F.matmul(a, b).dispose(), flops: 2 * n ** 3, bytes: 12 * n * n, dispose: () => (a.dispose(), b.dispose()) };
}

const pick = (size: BenchSize, tiny: number, full: number) => (size === 'tiny' ? tiny : full);

export const benches: BenchCase[] = [
  { name: 'matmul f32 256³ (tiny 64³)', setup: (b, s) => squareRun(b, pick(s, 64, 256)) },
  { name: 'matmul f32 1024³ (tiny 64³)', setup: (b, s) => squareRun(b, pick(s, 64, 1024)) },
  { name: 'linear f32 2048x2048 M=1 (tiny 256)', setup: (b, s) => linearRun(b, 1, pick(s, 256, 2048), pick(s, 256, 2048), 'f32') },
  {
    name: 'linear f32 2048x2048 M=128 (tiny 256, M=16)',
    setup: (b, s) => linearRun(b, pick(s, 16, 128), pick(s, 256, 2048), pick(s, 256, 2048), 'f32'),
  },
  ...(['f16', 'q8_0', 'q4_0'] as const).map((dt) => ({
    name: `gemv ${dt} 2048x2048 M=1 (tiny 256)`,
    setup: (b: Backend, s: BenchSize) => linearRun(b, 1, pick(s, 256, 2048), pick(s, 256, 2048), dt),
  })),
];
