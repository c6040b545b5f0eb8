/**
 * Operands split across bindings (GpuRef.chunks), provoked with a 4 KiB binding limit: weights split along
 * N (column ranges of C), activations along M, a weight used untransposed split along K (accumulated into C),
 * batches split along the batch, embedding tables along V, casts whose chunks do not line up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import type { DType } from '../../formats/dtype';
import { encode } from '../../formats/encode';
import { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import type { WebGpuBackend } from '../../tensor/webgpu';
import { TOL, type Tolerance, assertClose } from '../workbench';
import { newRng } from '../workbench/parity';
import { freshGpuBackend } from '../../../test/util/gpu';
import { embeddingKernel } from '../embedding';
import { expectGradParity } from '../workbench/gradparity';
import { matmulKernel } from '.';

const LIMIT = 4096;
let gpu: WebGpuBackend;
const cpu = CpuBackend.reference();
const rng = newRng(11);
const env = () => ({ gpu, cpu, rng, f16: gpu.ctx.hasFeature('shader-f16') });
const tolK = (K: number): Tolerance => ({ atol: TOL.f32.atol * Math.max(1, K / 32), rtol: TOL.f32.rtol });

beforeAll(async () => {
  gpu = await freshGpuBackend({ bindingLimit: LIMIT });
});
afterAll(() => gpu?.ctx.destroy());

const chunksOf = (t: Tensor) => (t.storage.kind === 'webgpu' ? t.storage.chunks.length : 0);
const both = (values: ArrayLike<number>, shape: number[], dtype: DType = 'f32') => ({
  g: gpu.fromValues(values, shape, dtype),
  c: cpu.fromValues(values, shape, dtype),
});
async function same(g: Tensor, c: Tensor, tol: Tolerance, label: string) {
  expect(g.shape).toEqual(c.shape);
  assertClose(await g.read(), await c.read(), tol, label);
}

describe('matmul with operands split across bindings', () => {
  // [N, K] weights that split into ≥ 3 chunks along N at a 4 KiB limit
  const weights: [DType, number, number][] = [['f32', 40, 64], ['bf16', 80, 64], ['q4_0', 80, 256], ['q8_0', 70, 128], ['f16', 100, 64]];
  for (const [dt, N, K] of weights) {
    it(`${dt} weight [${N}, ${K}] split along N: tiled and GEMV forward, frozen-weight dx (split along K)`, async () => {
      const w = both(rng.normals(N * K), [N, K], dt);
      expect(chunksOf(w.g)).toBeGreaterThanOrEqual(3);
      const bias = both(rng.normals(N), [N]);
      for (const M of [17, 3, 1]) {
        const x = both(rng.normals(M * K), [M, K]);
        const ref = cpu.run(matmulKernel, [x.c, w.c, bias.c], { transB: true })[0];
        for (const path of ['tiled', 'gemv'] as const) {
          await same(gpu.run(matmulKernel, [x.g, w.g, bias.g], { transB: true, path })[0], ref, tolK(K), `${dt} M=${M} ${path}`);
        }
        // dx = g·W: W read untransposed, so its chunks cut the reduction and C accumulates chunk by chunk
        const g = both(rng.normals(M * N), [M, N]);
        await same(F.matmul(g.g, w.g), F.matmul(g.c, w.c), tolK(N), `${dt} dx M=${M}`);
      }
    });
  }

  it('f32 linear forward and all gradients with x, w, y and dW split', async () => {
    const spec = (shape: number[]) => ({ values: rng.normals(shape.reduce((a, b) => a * b, 1)), shape });
    await expectGradParity(env(), 'linear split', (x, w, b) => F.linear(x, w, b), [spec([6, 5, 64]), spec([40, 64]), spec([40])], tolK(30));
    await expectGradParity(env(), 'transA split', (a, b) => F.matmul(a, b, { transA: true }), [spec([40, 33]), spec([40, 50])], tolK(50));
  });

  it('K = 0 gives the bias (or zeros) and M = 0 an empty result', async () => {
    const x = both([], [3, 0]);
    const w = both([], [4, 0]);
    const b = both([1, 2, 3, 4], [4]);
    await same(F.linear(x.g, w.g, b.g), F.linear(x.c, w.c, b.c), TOL.f32, 'K=0 bias');
    expect([...(await F.linear(x.g, w.g).read())]).toEqual(new Array(12).fill(0));
    const e = F.linear(gpu.fromValues([], [0, 5]), gpu.fromValues(new Float32Array(20), [4, 5]));
    expect(e.shape).toEqual([0, 4]);
    expect((await e.read()).length).toBe(0);
  });

  it('batched matmul with the batch split across bindings', async () => {
    const a = both(rng.normals(7 * 9 * 32), [7, 9, 32]);
    const b = both(rng.normals(7 * 32 * 5), [7, 32, 5]);
    expect(chunksOf(a.g)).toBeGreaterThanOrEqual(3);
    expect(chunksOf(b.g)).toBeGreaterThanOrEqual(2);
    await same(F.matmul(a.g, b.g), F.matmul(a.c, b.c), tolK(32), 'batched split');
  });
});

describe('embedding and cast with tensors split across bindings', () => {
  const tables: [DType, number, number][] = [['f32', 100, 32], ['bf16', 100, 64], ['q4_0', 100, 256]];
  for (const [dt, V, d] of tables) {
    it(`${dt} table [${V}, ${d}] split along V: gather, and scatter-add with repeated ids`, async () => {
      const t = both(rng.normals(V * d), [V, d], dt);
      expect(chunksOf(t.g)).toBeGreaterThanOrEqual(3);
      const ids = Array.from({ length: 90 }, (_, i) => (i % 7 === 0 ? 42 : rng.int(V)));
      ids[89] = V - 1;
      const idg = gpu.fromValues(ids, [90], 'i32');
      const idc = cpu.fromValues(ids, [90], 'i32');
      const out = gpu.run(embeddingKernel, [idg, t.g], undefined)[0];
      expect(chunksOf(out)).toBeGreaterThanOrEqual(3);
      await same(out, cpu.run(embeddingKernel, [idc, t.c], undefined)[0], { atol: 0, rtol: 0 }, `${dt} gather`);
    });
  }

  it('f32 table gradient split along V and g split along positions, repeated ids summed in order', async () => {
    const ids = Array.from({ length: 60 }, (_, i) => (i % 5 === 0 ? 7 : rng.int(100)));
    const spec = { values: rng.normals(100 * 32), shape: [100, 32] };
    const idsSpec = { values: ids, shape: [20, 3], dtype: 'i32' as const, grad: false };
    // identical summation order on both backends: bitwise equal
    await expectGradParity(env(), 'embedding split', (i, t) => F.embedding(i, t), [idsSpec, spec], { atol: 0, rtol: 0 });
  });

  it('casts f32 [60, 33] to f16/bf16 and back where chunk boundaries fall mid-word', async () => {
    const v = rng.normals(60 * 33).map((x, i) => (i % 9 === 0 ? x * 1e-6 : x * 300));
    const x = both(v, [60, 33]);
    for (const dt of ['f16', 'bf16'] as const) {
      const g = F.cast(x.g, dt);
      const c = F.cast(x.c, dt);
      expect(await g.readBytes()).toEqual(await c.readBytes());
      await same(F.cast(g, 'f32'), F.cast(c, 'f32'), { atol: 0, rtol: 0 }, `${dt} back to f32`);
    }
    await same(F.cast(gpu.fromBytes(encode('q8_0', v.slice(0, 60 * 32), [60, 32]), [60, 32], 'q8_0'), 'f32'),
      F.cast(cpu.fromBytes(encode('q8_0', v.slice(0, 60 * 32), [60, 32]), [60, 32], 'q8_0'), 'f32'), { atol: 0, rtol: 0 }, 'q8_0 to f32');
  });
});

// lavapipe has shader-f16, so the parity cases in Node take the native array<f16> variants; Chromium's
// SwiftShader takes the packed-u32 ones. This runs the packed variants in Node as well.
describe('f16 weights on a device without shader-f16 (packed u32 reads)', () => {
  let packed: WebGpuBackend;
  beforeAll(async () => {
    packed = await freshGpuBackend({ disableFeatures: ['shader-f16'] });
  });
  afterAll(() => packed?.ctx.destroy());

  it('linear (GEMV and tiled, even and odd K), dx = g·W and embedding gather match the CPU reference', async () => {
    expect(packed.ctx.hasFeature('shader-f16')).toBe(false);
    const on = (values: ArrayLike<number>, shape: number[], dtype: DType = 'f32') => ({
      g: packed.fromValues(values, shape, dtype),
      c: cpu.fromValues(values, shape, dtype),
    });
    for (const [M, N, K] of [[1, 17, 64], [3, 96, 17], [17, 3, 200]]) {
      const x = on(rng.normals(M * K), [M, K]);
      const w = on(rng.normals(N * K), [N, K], 'f16');
      const ref = cpu.run(matmulKernel, [x.c, w.c], { transB: true })[0];
      for (const path of ['gemv', 'tiled'] as const) {
        await same(packed.run(matmulKernel, [x.g, w.g], { transB: true, path })[0], ref, tolK(K), `f16 M=${M} N=${N} K=${K} ${path}`);
      }
      const g = on(rng.normals(M * N), [M, N]);
      await same(F.matmul(g.g, w.g), F.matmul(g.c, w.c), tolK(N), `f16 dx M=${M} N=${N} K=${K}`);
    }
    for (const d of [17, 64]) {
      const t = on(rng.normals(5 * d), [5, d], 'f16');
      const ids = [4, 0, 2, 4, 1];
      const out = packed.run(embeddingKernel, [packed.fromValues(ids, [5], 'i32'), t.g], undefined)[0];
      await same(
        out,
        cpu.run(embeddingKernel, [cpu.fromValues(ids, [5], 'i32'), t.c], undefined)[0],
        { atol: 0, rtol: 0 },
        `f16 gather d=${d}`,
      );
    }
    await packed.sync();
  });
});
