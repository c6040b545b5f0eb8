import { F, Tape } from '../../autograd';
import type { Backend } from '../../tensor/backend';
import type { Tensor } from '../../tensor/tensor';
import { smallDevice } from '../reduce/reduce.cases';
import { type ParityCase, type ParityEnv, TOL, assertClose } from '../workbench';

type Make = (be: Backend) => { inputs: Tensor[]; train: Tensor[]; loss: () => Tensor };

/** Loss value and the gradients of the trainable inputs, on one backend. */
async function run(be: Backend, make: Make): Promise<Float32Array[]> {
  const { train, loss } = make(be);
  for (const t of train) t.requiresGrad = true;
  const tape = new Tape();
  const l = tape.run(loss);
  const value = await l.read();
  await tape.backward(l);
  tape.dispose();
  return [value, ...(await Promise.all(train.map((t) => t.grad!.read())))];
}

async function parity(env: ParityEnv, make: Make, label: string, gpu: Backend = env.gpu) {
  const [g, c] = [await run(gpu, make), await run(env.cpu, make)];
  c.forEach((want, i) => assertClose(g[i], want, TOL.f32, `${label} ${i ? `grad ${i}` : 'loss'}`));
}

/** Labels in [0, V) with every third row ignored (-100); the first row is always labelled. */
function labelsFor(env: ParityEnv, rows: number, V: number): number[] {
  return Array.from({ length: rows }, (_, r) => (r % 3 === 2 ? -100 : env.rng.int(V)));
}

function ceMake(logits: Float32Array, labels: number[], V: number, ignoreIndex?: number): Make {
  return (be) => {
    const x = be.fromValues(logits, [labels.length, V]);
    const l = be.fromValues(labels, [labels.length], 'i32');
    return { inputs: [x, l], train: [x], loss: () => F.crossEntropy(x, l, { ignoreIndex }) };
  };
}

function pairMake(kind: 'cos' | 'mse', a: Float32Array, b: Float32Array, shape: number[], mask?: number[]): Make {
  return (be) => {
    const ta = be.fromValues(a, shape);
    const tb = be.fromValues(b, shape);
    const m = mask ? be.fromValues(mask, [mask.length]) : undefined;
    const fn = kind === 'cos' ? F.cosineLoss : F.mseLoss;
    return { inputs: [ta, tb], train: [ta, tb], loss: () => fn(ta, tb, m) };
  };
}

const SIZES: [rows: number, cols: number][] = [[1, 3], [3, 17], [17, 96], [96, 200], [200, 1], [5, 1000]];

export const cases: ParityCase[] = [
  ...SIZES.map(([rows, V]): ParityCase => ({
    name: `cross-entropy forward+backward [${rows}, ${V}] with ignored rows`,
    async run(env) {
      const logits = env.rng.normals(rows * V, 3);
      await parity(env, ceMake(logits, labelsFor(env, rows, V), V), `ce [${rows}, ${V}]`);
    },
  })),
  ...SIZES.map(([rows, d]): ParityCase => ({
    name: `cosine and MSE losses forward+backward [${rows}, ${d}] masked and unmasked`,
    async run(env) {
      const a = env.rng.normals(rows * d);
      const b = env.rng.normals(rows * d);
      const mask = Array.from({ length: rows }, (_, r) => (r % 4 === 1 ? 0 : 1));
      for (const kind of ['cos', 'mse'] as const) {
        await parity(env, pairMake(kind, a, b, [rows, d], mask), `${kind} masked [${rows}, ${d}]`);
        await parity(env, pairMake(kind, a, b, [rows, d]), `${kind} [${rows}, ${d}]`);
      }
    },
  })),
  {
    name: 'cross-entropy: vocab 151936 row, logits in the hundreds, all rows ignored, ignoreIndex -1, bad label -> NaN',
    async run(env) {
      const V = 151_936;
      await parity(env, ceMake(env.rng.normals(2 * V, 2), [7, V - 1], V), 'ce vocab 151936');
      await parity(env, ceMake(env.rng.normals(4 * 33, 300), [1, 32, 0, 5], 33), 'ce large logits');
      await parity(env, ceMake(env.rng.normals(3 * 5), [-100, -100, -100], 5), 'ce all ignored');
      // another ignore index reaches both kernels (a shader that kept -100 would count these rows)
      await parity(env, ceMake(env.rng.normals(7 * 17), [3, -1, 16, -1, 0, 5, -1], 17, -1), 'ce ignoreIndex -1');
      const x = env.gpu.fromValues(env.rng.normals(10), [2, 5]);
      const loss = await F.crossEntropy(x, env.gpu.fromValues([1, 5], [2], 'i32')).read();
      if (!Number.isNaN(loss[0])) throw new Error(`a label outside [0, V) should give a NaN loss on the GPU, got ${loss[0]}`);
    },
  },
  {
    name: 'cosine loss: all rows masked out, zero vectors',
    async run(env) {
      const a = env.rng.normals(4 * 6);
      const b = env.rng.normals(4 * 6);
      a.fill(0, 0, 6); // row 0 of a is the zero vector: cos 0 by the eps clamp
      await parity(env, pairMake('cos', a, b, [4, 6], [0, 0, 0, 0]), 'cos all masked');
      await parity(env, pairMake('cos', a, b, [4, 6]), 'cos zero row');
      await parity(env, pairMake('mse', a, b, [4, 6], [0, 0, 0, 0]), 'mse all masked');
    },
  },
  {
    // bindings of 1 KiB split [40, 17] logits into 3 chunks of 15 rows; grids fold above 7 workgroups
    name: 'losses on split logits and folded grids',
    webgpuOnly: true,
    async run(env) {
      const small = await smallDevice();
      try {
        await parity(env, ceMake(env.rng.normals(40 * 17), labelsFor(env, 40, 17), 17), 'ce split', small);
        // cosine and MSE take their operands whole (24 x 9 x 4 bytes fit): 24 rows fold the grid
        const [a, b] = [env.rng.normals(24 * 9), env.rng.normals(24 * 9)];
        const mask = Array.from({ length: 24 }, (_, r) => r % 2);
        await parity(env, pairMake('cos', a, b, [24, 9], mask), 'cos folded', small);
        await parity(env, pairMake('mse', a, b, [24, 9], mask), 'mse folded', small);
        await small.sync();
      } finally {
        small.ctx.destroy();
      }
    },
  },
];
