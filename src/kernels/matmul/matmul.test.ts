import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { decode, encode } from '../../formats/encode';
import { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import { Rng } from '../../util/rng';
import { TOL, assertClose } from '../workbench/close';
import { matmulKernel } from '.';

const cpu = new CpuBackend('f32', { kernels: 'ts' }); // the reference itself; wasm.test.ts checks the kernels against it
const f64 = new CpuBackend('f64');
const read = async (t: Tensor) => [...(await t.read())];

/** Naive C[b] = op(A[b])·op(B[b]) on plain arrays, independent of the plan. */
function naive(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  batch: number,
  M: number,
  N: number,
  K: number,
  tA: boolean,
  tB: boolean,
  bShared = false,
) {
  const out: number[] = [];
  for (let z = 0; z < batch; z++) {
    const ao = z * M * K;
    const bo = bShared ? 0 : z * K * N;
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += a[ao + (tA ? k * M + m : m * K + k)] * b[bo + (tB ? n * K + k : k * N + n)];
        out.push(s);
      }
    }
  }
  return out;
}

describe('matmul (CPU reference)', () => {
  it('multiplies hand-computed 2x3·3x2, with transposes and bias', async () => {
    const a = cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    const b = cpu.fromValues([7, 8, 9, 10, 11, 12], [3, 2]);
    expect(await read(F.matmul(a, b))).toEqual([58, 64, 139, 154]);
    // aᵀ [3,2]·a [2,3]
    expect(await read(F.matmul(a, a, { transA: true }))).toEqual([17, 22, 27, 22, 29, 36, 27, 36, 45]);
    // a·aᵀ
    expect(await read(F.matmul(a, a, { transB: true }))).toEqual([14, 32, 32, 77]);
    // nn.Linear: x [2,3], w [2,3] -> x·wᵀ + b
    const w = cpu.fromValues([1, 0, -1, 2, 1, 0], [2, 3]);
    const bias = cpu.fromValues([10, 20], [2]);
    expect(await read(F.linear(a, w, bias))).toEqual([1 - 3 + 10, 2 + 2 + 20, 4 - 6 + 10, 8 + 5 + 20]);
  });

  it('handles batched b, shared b under a batched a, and a 1-D a', async () => {
    const rng = new Rng(1);
    const av = rng.normals(2 * 3 * 4);
    const bv = rng.normals(2 * 4 * 5);
    const a = cpu.fromValues(av, [2, 3, 4]);
    // assertClose checks lengths too: an `.every` over a short or empty result would pass
    const batched = F.matmul(a, cpu.fromValues(bv, [2, 4, 5]));
    expect(batched.shape).toEqual([2, 3, 5]);
    assertClose(await batched.read(), naive(av, bv, 2, 3, 5, 4, false, false), TOL.f32, 'batched b');
    const shared = cpu.fromValues(bv.subarray(0, 20), [4, 5]);
    const s = F.matmul(a, shared);
    expect(s.shape).toEqual([2, 3, 5]);
    assertClose(await s.read(), naive(av, bv, 2, 3, 5, 4, false, false, true), TOL.f32, 'shared b');
    // transA over a batch with a shared b: [2, 4, 3]ᵀ·[4, 5]
    const st = F.matmul(cpu.fromValues(av, [2, 4, 3]), shared, { transA: true });
    expect(st.shape).toEqual([2, 3, 5]);
    assertClose(await st.read(), naive(av, bv, 2, 3, 5, 4, true, false, true), TOL.f32, 'shared b, transA');
    const v = F.linear(cpu.fromValues([1, 2, 3], [3]), cpu.fromValues([1, 1, 1, 0, 1, 0], [2, 3]));
    expect(v.shape).toEqual([2]);
    expect(await read(v)).toEqual([6, 2]);
  });

  it('sums over the batch (weight gradients) and writes C transposed', async () => {
    const a = cpu.fromValues([1, 2, 3, 4, 5, 6, 7, 8], [2, 2, 2]);
    const g = cpu.fromValues([1, 0, 0, 1, 2, 0, 0, 2], [2, 2, 2]);
    // Σ_b a_bᵀ·g_b = [[1,3],[2,4]] + [[10,14],[12,16]]
    const s = cpu.run(matmulKernel, [a, g], { transA: true, sumBatch: true })[0];
    expect(s.shape).toEqual([2, 2]);
    expect(await read(s)).toEqual([11, 17, 14, 20]);
    const x = cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    const y = cpu.fromValues([7, 8, 9, 10, 11, 12], [3, 2]);
    const ct = cpu.run(matmulKernel, [x, y], { transC: true })[0];
    expect(ct.shape).toEqual([2, 2]);
    expect(await read(ct)).toEqual([58, 139, 64, 154]);
  });

  it('with f16/bf16/q8_0/q4_0 weights equals matmul with the decoded weight (dequantize-then-matmul)', async () => {
    const rng = new Rng(2);
    const x = cpu.fromValues(rng.normals(3 * 64), [3, 64]);
    const wv = rng.normals(5 * 64);
    for (const dt of ['f16', 'bf16', 'q8_0', 'q4_0'] as const) {
      const bytes = encode(dt, wv, [5, 64]);
      const w = cpu.fromBytes(bytes, [5, 64], dt);
      const wf = cpu.fromValues(decode(dt, bytes, [5, 64]), [5, 64]);
      expect(await read(F.linear(x, w)), dt).toEqual(await read(F.linear(x, wf)));
      // the [N, K] weight used without transB (the activation gradient of a frozen weight)
      const g = cpu.fromValues(rng.normals(3 * 5), [3, 5]);
      expect(await read(F.matmul(g, w)), dt).toEqual(await read(F.matmul(g, wf)));
    }
  });

  it('rejects mismatched shapes and dtypes with named errors', () => {
    const a = cpu.fromValues(new Float32Array(6), [2, 3]);
    expect(() => F.matmul(a, cpu.fromValues(new Float32Array(8), [4, 2]))).toThrow(ShapeMismatch);
    expect(() => F.matmul(a, cpu.fromValues(new Float32Array(8), [4, 2]))).toThrow(/K = 3.*K = 4/);
    expect(() => F.matmul(cpu.fromValues(new Float32Array(6), [2, 3], 'bf16'), cpu.fromValues(new Float32Array(6), [3, 2]))).toThrow(
      DTypeMismatch,
    );
    expect(() => F.matmul(cpu.fromValues(new Float32Array(24), [2, 3, 4]), cpu.fromValues(new Float32Array(40), [2, 5, 4]))).toThrow(
      ShapeMismatch,
    );
    expect(() => F.matmul(cpu.fromValues(new Float32Array(24), [2, 3, 4]), cpu.fromValues(new Float32Array(60), [3, 4, 5]))).toThrow(
      /leading/,
    );
    expect(() => F.linear(a, cpu.fromValues(new Float32Array(6), [2, 3]), cpu.fromValues([1, 2, 3], [3]))).toThrow(/bias/);
    expect(() => F.linear(a, cpu.fromValues(new Float32Array(6), [2, 3]), cpu.fromValues([1, 2], [2], 'f16'))).toThrow(DTypeMismatch);
    expect(() => cpu.run(matmulKernel, [a, a], { sumBatch: true })).toThrow(InvalidArgument);
  });

  it('passes gradcheck for every transpose, batching and bias', async () => {
    const rng = new Rng(3);
    const t = (shape: number[]) => {
      const x = f64.fromValues(rng.normals(shape.reduce((p, q) => p * q, 1)), shape);
      x.requiresGrad = true;
      return x;
    };
    const cases: [string, () => [(...x: Tensor[]) => Tensor, Tensor[]]][] = [];
    for (const tA of [false, true]) for (const tB of [false, true]) {
      cases.push([
        `2-D tA=${tA} tB=${tB}`,
        () => [(a, b) => F.matmul(a, b, { transA: tA, transB: tB }), [t(tA ? [4, 3] : [3, 4]), t(tB ? [5, 4] : [4, 5])]],
      ]);
      cases.push([
        `batched tA=${tA} tB=${tB}`,
        () => [(a, b) => F.matmul(a, b, { transA: tA, transB: tB }), [t(tA ? [2, 4, 3] : [2, 3, 4]), t(tB ? [2, 5, 4] : [2, 4, 5])]],
      ]);
      cases.push([
        `shared b tA=${tA} tB=${tB}`,
        () => [(a, b) => F.matmul(a, b, { transA: tA, transB: tB }), [t(tA ? [2, 2, 4, 3] : [2, 2, 3, 4]), t(tB ? [5, 4] : [4, 5])]],
      ]);
    }
    cases.push(['linear with bias, x [2, 3, 4]', () => [(x, w, b) => F.linear(x, w, b), [t([2, 3, 4]), t([5, 4]), t([5])]]]);
    cases.push(['linear 1-D x', () => [(x, w, b) => F.linear(x, w, b), [t([4]), t([5, 4]), t([5])]]]);
    cases.push(['fan-out x·xᵀ', () => [(x) => F.matmul(x, x, { transB: true }), [t([3, 4])]]]);
    for (const [name, make] of cases) {
      const [fn, inputs] = make();
      const r = await gradcheck(fn, inputs);
      expect(r.ok, `${name}\n${r.message}`).toBe(true);
    }
  });

  it('gives frozen f16/q4_0 weights no gradient but passes the activation gradient', async () => {
    const rng = new Rng(4);
    for (const dt of ['f16', 'q4_0'] as const) {
      const x = f64.fromValues(rng.normals(3 * 32), [3, 32]);
      x.requiresGrad = true;
      const w = f64.fromValues(rng.normals(4 * 32), [4, 32], dt);
      const r = await gradcheck((a, b) => F.linear(a, b), [x, w]);
      expect(r.ok, `${dt}\n${r.message}`).toBe(true);
      const tape = new Tape();
      const y = tape.run(() => F.linear(x, w));
      await tape.backward(y, f64.fromValues(new Float64Array(12).fill(1), [3, 4]));
      expect(w.grad).toBeNull();
      expect(x.grad?.shape).toEqual([3, 32]);
      tape.dispose();
    }
  });
});
