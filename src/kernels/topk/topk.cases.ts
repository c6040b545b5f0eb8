/**
 * GPU vs CPU: identical indices and bit-identical values. Both compare exact f32 values in the same
 * order, so there is no rounding to allow for; ties, NaN and ±Infinity are planted on purpose.
 */
import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { WebGpuBackend } from '../../tensor/webgpu';
import { type ParityCase, type ParityEnv, observedClose } from '../workbench';

const numel = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);

async function expectSameTopk(env: ParityEnv, gx: Tensor, x: Float32Array, k: number, label: string) {
  const g = F.topk(gx, k);
  const c = F.topk(env.cpu.fromValues(x, gx.shape), k);
  try {
    if (g.values.shape.join() !== c.values.shape.join())
      throw new Error(`${label}: shape [${g.values.shape}] vs reference [${c.values.shape}]`);
    const [gv, gi, cv, ci] = await Promise.all([g.values.read(), g.indices.readI32(), c.values.read(), c.indices.readI32()]);
    observedClose(gi, ci, { atol: 0, rtol: 0 }, `${label} indices`);
    const gb = new Uint32Array(gv.buffer, gv.byteOffset, gv.length);
    const cb = new Uint32Array(cv.buffer, cv.byteOffset, cv.length);
    const bad = gb.findIndex((b, i) => b !== cb[i]);
    if (bad >= 0) throw new Error(`${label}: value ${bad} is ${gv[bad]} on the GPU, ${cv[bad]} in the reference`);
  } finally {
    for (const t of [g.values, g.indices]) t.dispose();
  }
}

/** Random normals; with `ties`, rounded to quarters so that many values repeat. */
function values(env: ParityEnv, n: number, ties: boolean): Float32Array {
  const x = env.rng.normals(n, 2);
  return ties ? x.map((v) => Math.round(v * 4) / 4) : x;
}

const shapes: [shape: number[], k: number, ties: boolean][] = [
  [[1], 1, false], [[3, 1], 1, false], [[3, 17], 5, false], [[4, 17], 17, true], [[2, 3, 50], 7, true],
  [[64, 1000], 32, false], [[64, 1000], 5, true], [[1, 151936], 5, false], [[1, 151936], 32, true], [[151936], 1, false],
];

export const cases: ParityCase[] = [
  ...shapes.map(([shape, k, ties]): ParityCase => ({
    name: `topk k=${k} of [${shape}]${ties ? ' with ties' : ''}`,
    async run(env) {
      const x = values(env, numel(shape), ties);
      const g = env.gpu.fromValues(x, shape);
      await expectSameTopk(env, g, x, k, `topk [${shape}] k=${k}`);
      g.dispose();
    },
  })),
  {
    name: 'topk NaN, ±Infinity, ±0 and ascending / constant rows [5, 300]',
    async run(env) {
      const v = 300;
      const x = values(env, 5 * v, false);
      [3, 40, 41, 299].forEach((i) => (x[i] = NaN));
      x[7] = -Infinity;
      x[8] = Infinity;
      for (let i = 0; i < v; i++) x[v + i] = i % 2 ? -0 : 0; // row 1: signed zeros tie
      for (let i = 0; i < v; i++) x[2 * v + i] = i; // row 2: every element improves the lists
      x.fill(NaN, 3 * v, 4 * v); // row 3: all NaN
      for (let i = 0; i < v; i++) x[4 * v + i] = i < 290 ? -Infinity : NaN; // row 4
      const g = env.gpu.fromValues(x, [5, v]);
      for (const k of [1, 6, 32]) await expectSameTopk(env, g, x, k, `special values k=${k}`);
      g.dispose();
    },
  },
  {
    name: 'topk on a tensor split across bindings (1 KiB bindings: 5 rows of 50 a chunk)',
    webgpuOnly: true,
    async run(env) {
      const small = await WebGpuBackend.create({ bindingLimit: 1024, maxWorkgroupsPerDimension: 7 });
      try {
        const x = values(env, 23 * 50, true);
        const g = small.fromValues(x, [23, 50]);
        const chunks = (g.storage as { chunks: unknown[] }).chunks.length;
        if (chunks !== 5) throw new Error(`expected 5 chunks, got ${chunks}`);
        await expectSameTopk(env, g, x, 9, 'split [23, 50] k=9');
        const wide = small.fromValues(values(env, 11 * 4 * 17, false), [11, 4, 17]); // 4 rows per dim-0 slice
        await expectSameTopk(env, wide, new Float32Array(await wide.read()), 17, 'split [11, 4, 17] k=17');
      } finally {
        small.ctx.destroy();
      }
    },
  },
];
