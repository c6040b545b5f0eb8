import { F } from '../../autograd';
import { encode } from '../../formats/encode';
import { type ParityCase, assertClose, expectParity } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';
import { embeddingKernel } from '.';

// Gathers copy decoded values and scatter-adds sum in position order on both backends: exact.
const EXACT = { atol: 0, rtol: 0 };

const gatherCases: ParityCase[] = (['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as const).flatMap((dt) =>
  ([[17, 96, [3]], [200, 32, [2, 17]], [3, 64, [1]], [1, 32, [5, 1]]] as [number, number, number[]][])
    .concat(dt === 'q8_0' || dt === 'q4_0' ? [] : [[96, 17, [200]], [5, 1, [3, 3]]])
    .map(([V, d, shape]): ParityCase => ({
      name: `embedding ${dt} table [${V}, ${d}], ids [${shape}]`,
      async run(env) {
        const n = shape.reduce((a, b) => a * b, 1);
        const ids = Array.from({ length: n }, () => env.rng.int(V));
        const bytes = encode(dt, env.rng.normals(V * d), [V, d]);
        const tg = env.gpu.fromBytes(bytes, [V, d], dt);
        const tc = env.cpu.fromBytes(bytes, [V, d], dt);
        await expectParity(
          F.embedding(env.gpu.fromValues(ids, shape, 'i32'), tg),
          F.embedding(env.cpu.fromValues(ids, shape, 'i32'), tc),
          EXACT,
          `${dt} gather`,
        );
      },
    })),
);

export const cases: ParityCase[] = [
  ...gatherCases,
  {
    name: 'embedding out-of-range ids give zero rows on the GPU',
    async run(env) {
      const table = env.rng.normals(4 * 3);
      const got = await env.gpu
        .run(embeddingKernel, [env.gpu.fromValues([1, -1, 4, 3], [4], 'i32'), env.gpu.fromValues(table, [4, 3])], undefined)[0]
        .read();
      assertClose(got, [...table.subarray(3, 6), 0, 0, 0, 0, 0, 0, ...table.subarray(9, 12)], EXACT, 'out-of-range');
    },
  },
  ...(
    [
      [17, 96, [3, 1]],
      [200, 3, [2, 96]],
      [1, 17, [17]],
      [3, 200, [40]],
    ] as [number, number, number[]][]
  ).map(([V, d, shape]): ParityCase => ({
    name: `embedding backward f32 table [${V}, ${d}], ids [${shape}] with repeats`,
    async run(env) {
      const n = shape.reduce((a, b) => a * b, 1);
      const ids = Array.from({ length: n }, (_, i) => (i % 3 === 0 ? V - 1 : env.rng.int(V)));
      await expectGradParity(
        env,
        'embedding',
        (i, t) => F.embedding(i, t),
        [
          { values: ids, shape, dtype: 'i32', grad: false },
          { values: env.rng.normals(V * d), shape: [V, d] },
        ],
        EXACT,
      );
    },
  })),
];
