import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { WebGpuBackend } from '../../tensor/webgpu';
import { type ParityCase, type ParityEnv, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';
import { placeRowsKernel } from '.';

// Row ops move words: GPU and CPU agree exactly.
const EXACT = { atol: 0, rtol: 0 };
const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

const slices: [shape: number[], start: number, n: number][] = [
  [[17, 96], 3, 5], [[1], 0, 1], [[96, 3, 17], 40, 56], [[3, 1], 1, 0], [[200, 17], 0, 200], [[5, 2, 3, 4], 4, 1],
];

const concats: number[][][] = [
  [[1, 96], [17, 96], [3, 96]],
  [[0, 17], [5, 17], [0, 17]],
  [[96], [1], [3]],
  [[2, 3, 17], [96, 3, 17]],
  [[64, 32], [80, 32], [64, 32]],
];

const chunkCount = (t: Tensor) => (t.storage as { chunks: unknown[] }).chunks.length;

export const cases: ParityCase[] = [
  ...slices.map(([shape, start, n]): ParityCase => ({
    name: `rows sliceRows [${shape}] rows [${start}, ${start + n}) and its backward`,
    async run(env) {
      const x = pair(env, env.rng.normals(numel(shape)), shape);
      await expectParity(F.sliceRows(x.g, start, n), F.sliceRows(x.c, start, n), EXACT, 'slice');
      const gShape = [n, ...shape.slice(1)];
      const g = pair(env, env.rng.normals(numel(gShape)), gShape);
      const attrs = { start, rows: shape[0] };
      await expectParity(env.gpu.run(placeRowsKernel, [g.g], attrs)[0], env.cpu.run(placeRowsKernel, [g.c], attrs)[0], EXACT, 'place');
    },
  })),
  ...concats.map((shapes): ParityCase => ({
    name: `rows concatRows ${shapes.map((s) => `[${s}]`).join(' ⊕ ')}`,
    async run(env) {
      const xs = shapes.map((s) => pair(env, env.rng.normals(numel(s)), s));
      await expectParity(F.concatRows(xs.map((x) => x.g)), F.concatRows(xs.map((x) => x.c)), EXACT, 'concat');
    },
  })),
  {
    name: 'rows concat(a, slice(b), empty, c) forward and gradients',
    async run(env: ParityEnv) {
      const spec = (shape: number[]) => ({ values: env.rng.normals(numel(shape)), shape });
      await expectGradParity(env, 'concat∘slice', (a, b, e, c) => F.concatRows([a, F.sliceRows(b, 1, 17), e, c]),
        [spec([3, 2, 17]), spec([20, 2, 17]), spec([0, 2, 17]), spec([1, 2, 17])], EXACT);
    },
  },
  {
    name: 'rows ops on tensors split across bindings (1 KiB bindings: 15 rows of 17 a chunk)',
    webgpuOnly: true,
    async run(env) {
      const small = await WebGpuBackend.create({ bindingLimit: 1024, maxWorkgroupsPerDimension: 7 });
      try {
        const v = env.rng.normals(40 * 17);
        const w = env.rng.normals(7 * 17);
        const xs = small.fromValues(v, [40, 17]);
        const xc = env.cpu.fromValues(v, [40, 17]);
        if (chunkCount(xs) !== 3) throw new Error(`expected 3 chunks, got ${chunkCount(xs)}`);
        const ws = small.fromValues(w, [7, 17]);
        const wc = env.cpu.fromValues(w, [7, 17]);
        await expectParity(F.sliceRows(xs, 10, 25), F.sliceRows(xc, 10, 25), EXACT, 'slice across chunks');
        const cs = F.concatRows([ws, xs, ws]);
        if (chunkCount(cs) !== 4) throw new Error(`expected the [54, 17] concat in 4 chunks, got ${chunkCount(cs)}`);
        await expectParity(cs, F.concatRows([wc, xc, wc]), EXACT, 'concat into chunks');
        const attrs = { start: 12, rows: 40 };
        const ps = small.run(placeRowsKernel, [F.sliceRows(xs, 3, 20)], attrs)[0];
        await expectParity(ps, env.cpu.run(placeRowsKernel, [F.sliceRows(xc, 3, 20)], attrs)[0], EXACT, 'place into chunks');
      } finally {
        small.ctx.destroy();
      }
    },
  },
];
