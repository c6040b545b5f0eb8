import { F, Tape } from '../../autograd';
import { decode, encode } from '../../formats/encode';
import type { QuantDType } from '../../formats/dtype';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, type ParityEnv, TOL, type Tolerance, expectParity } from '../workbench';
import { matmulKernel } from '.';
import { expectGradParity } from '../workbench/gradparity';

/**
 * Every weight dtype is compared with the CPU reference on the *same* dequantized values (the reference
 * decodes, then multiplies in f64), so only the f32 summation order differs: f32 tolerance, with atol
 * growing with K because the rounding error of a K-term dot product does.
 */
const tolK = (K: number): Tolerance => ({ atol: TOL.f32.atol * Math.max(1, K / 32), rtol: TOL.f32.rtol });

const size = (s: number[]) => s.reduce((a, b) => a * b, 1);
const spec = (env: ParityEnv, shape: number[], dtype?: 'f16' | 'bf16' | QuantDType) => ({
  values: env.rng.normals(size(shape)),
  shape,
  dtype,
});

const f32Cases: ParityCase[] = ([
  [1, 3, 17, false, false],
  [3, 17, 96, false, true],
  [17, 200, 3, true, false],
  [96, 1, 200, true, true],
  [200, 96, 17, false, true],
] as const).map(([M, N, K, tA, tB]) => ({
  name: `f32 ${tA ? 'Aᵀ' : 'A'}·${tB ? 'Bᵀ' : 'B'} M=${M} N=${N} K=${K}, forward and both gradients`,
  async run(env) {
    const a = spec(env, tA ? [K, M] : [M, K]);
    const b = spec(env, tB ? [N, K] : [K, N]);
    await expectGradParity(env, 'matmul', (x, y) => F.matmul(x, y, { transA: tA, transB: tB }), [a, b], tolK(Math.max(K, M)));
  },
}));

const batchCases: ParityCase[] = [
  {
    name: 'f32 linear with bias, x [2, 17, 96] w [3, 96] (flattened M, batch-summed dW, bias grad)',
    async run(env) {
      await expectGradParity(
        env,
        'linear',
        (x, w, b) => F.linear(x, w, b),
        [spec(env, [2, 17, 96]), spec(env, [3, 96]), spec(env, [3])],
        tolK(96 * 2),
      );
    },
  },
  {
    name: 'f32 batched b [2, 3]: A [2,3,17,96]·Bᵀ [2,3,200,96] and Aᵀ·B',
    async run(env) {
      await expectGradParity(
        env,
        'batched nt',
        (x, y) => F.matmul(x, y, { transB: true }),
        [spec(env, [2, 3, 17, 96]), spec(env, [2, 3, 200, 96])],
        tolK(200),
      );
      await expectGradParity(
        env,
        'batched tn',
        (x, y) => F.matmul(x, y, { transA: true }),
        [spec(env, [2, 3, 96, 17]), spec(env, [2, 3, 96, 1])],
        tolK(96),
      );
    },
  },
  {
    name: 'f32 shared b under batched transposed a: [3, 96, 17]ᵀ·[96, 200] (per-batch dB summed)',
    async run(env) {
      await expectGradParity(
        env,
        'shared tA',
        (x, y) => F.matmul(x, y, { transA: true }),
        [spec(env, [3, 96, 17]), spec(env, [96, 200])],
        tolK(96 * 3),
      );
    },
  },
  {
    name: 'f32 1-D x through linear (GEMV), x [200] w [17, 200] b [17]',
    async run(env) {
      await expectGradParity(
        env,
        'linear 1-D',
        (x, w, b) => F.linear(x, w, b),
        [spec(env, [200]), spec(env, [17, 200]), spec(env, [17])],
        tolK(200),
      );
    },
  },
];

type Pair = { g: Tensor; c: Tensor };

/**
 * GEMV and tiled paths forced on the same problem, both against the CPU reference. `xGemm` (when given) is
 * the reference's x for the paths that reach cuBLASLt: cuda's 'gemv' hint with a half weight.
 */
async function bothPaths(env: ParityEnv, x: Pair, w: Pair, bias: Pair | null, tol: Tolerance, label: string, xGemm?: Tensor) {
  const ins = (xs: Tensor, s: 'g' | 'c') => (bias ? [xs, w[s], bias[s]] : [xs, w[s]]);
  for (const path of ['gemv', 'tiled'] as const) {
    const xc = path === 'gemv' && xGemm ? xGemm : x.c;
    const ref = env.cpu.run(matmulKernel, ins(xc, 'c'), { transB: true })[0];
    await expectParity(env.gpu.run(matmulKernel, ins(x.g, 'g'), { transB: true, path })[0], ref, tol, `${label} ${path}`);
  }
}

/** dx = g·W through a frozen f16/bf16 weight on a backend that rounds g to the weight's type: against g rounded, times W, on the CPU. */
async function halfInputDx(env: ParityEnv, dt: 'f16' | 'bf16', xv: Float32Array, bytes: Uint8Array, M: number, N: number, K: number) {
  const seed = env.rng.normals(M * N);
  const x = env.gpu.fromValues(xv, [M, K]);
  x.requiresGrad = true;
  const w = env.gpu.fromBytes(bytes, [N, K], dt);
  const tape = new Tape();
  const y = tape.run(() => F.linear(x, w));
  const g = env.gpu.fromValues(seed, [M, N]);
  await tape.backward(y, g);
  const gr = env.cpu.fromValues(decode(dt, encode(dt, seed, [M, N]), [M, N]), [M, N]);
  const wc = env.cpu.fromValues(decode(dt, bytes, [N, K]), [N, K]);
  await expectParity(x.grad!, F.matmul(gr, wc), tolK(Math.max(K, N)), `${dt} dx (g rounded to ${dt})`);
  tape.dispose();
  for (const t of [x, w, g, gr, wc]) t.dispose();
}

const weightCases: ParityCase[] = (['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as const).flatMap((dt) =>
  ([[1, 200, 96], [3, 17, 32], [5, 3, 224], [17, 1, 64], [96, 96, 32]] as [number, number, number][])
    .concat(dt === 'f16' || dt === 'bf16' || dt === 'f32' ? [[3, 17, 17]] : [])
    .map(([M, N, K]): ParityCase => ({
      name: `${dt} weight [${N}, ${K}], x [${M}, ${K}]: GEMV and tiled forward with bias, activation gradient`,
      async run(env) {
        const xv = env.rng.normals(M * K);
        const wv = env.rng.normals(N * K);
        const bv = env.rng.normals(N);
        const bytes = encode(dt, wv, [N, K]);
        // cuda multiplies f16/bf16 weights on cuBLASLt's tensor cores; in its default HalfGemm 'round' the f32
        // operand (x forward, the output gradient backward) is rounded to the weight's type first
        // (native/cuda/src/gemm_lt.cu; the matmul_tiled fallback multiplies in f32): the reference rounds it the
        // same way, so the comparison stays at f32 tolerance ('split' is compared with the plain reference)
        const halfInput = env.gpu.halfGemmRounds === true && (dt === 'f16' || dt === 'bf16');
        const x = { g: env.gpu.fromValues(xv, [M, K]), c: env.cpu.fromValues(xv, [M, K]) };
        const xGemm = halfInput ? env.cpu.fromValues(decode(dt, encode(dt, xv, [M, K]), [M, K]), [M, K]) : undefined;
        const w = { g: env.gpu.fromBytes(bytes, [N, K], dt), c: env.cpu.fromBytes(bytes, [N, K], dt) };
        const b = { g: env.gpu.fromValues(bv, [N]), c: env.cpu.fromValues(bv, [N]) };
        await bothPaths(env, x, w, b, tolK(K), `${dt} linear`, xGemm);
        await bothPaths(env, x, w, null, tolK(K), `${dt} linear (no bias)`, xGemm);
        xGemm?.dispose();
        if (dt === 'q8_0' || dt === 'q4_0') {
          // the check, spelled out: dequantize on the CPU, then an f32 matmul, equals the fused kernel
          const wf = env.cpu.fromValues(decode(dt, bytes, [N, K]), [N, K]);
          await expectParity(F.linear(x.g, w.g), F.linear(x.c, wf), tolK(K), `${dt} fused vs dequantize-then-matmul`);
        }
        // frozen weight: only dx = g·W, the weight read without transB (a B split along K accumulates)
        if (halfInput) await halfInputDx(env, dt as 'f16' | 'bf16', xv, bytes, M, N, K);
        else
          await expectGradParity(
            env,
            `${dt} dx`,
            (a, ww) => F.linear(a, ww),
            [
              { values: xv, shape: [M, K] },
              { values: decode(dt, bytes, [N, K]), shape: [N, K], dtype: dt === 'f32' ? undefined : dt, grad: false },
            ],
            tolK(Math.max(K, N)),
          );
        for (const t of [x, w, b]) t.g.dispose(), t.c.dispose();
      },
    })),
);

export const cases: ParityCase[] = [...f32Cases, ...batchCases, ...weightCases];
