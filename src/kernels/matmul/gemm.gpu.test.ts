/**
 * The register-tiled GEMM (gemm-wgsl.ts) in both cuts against the CPU reference, on lavapipe: every weight dtype
 * (f16 as array<f16> and as u32 pairs), odd M, N and K (tails in all three), bias, a batched [B, N, K] weight, a
 * strided A (transA), K chunked across bindings (accumulation), and what each cut launches.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { DType } from '../../formats/dtype';
import { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import type { WebGpuBackend } from '../../tensor/webgpu';
import { TOL, type Tolerance, assertClose } from '../workbench';
import { newRng } from '../workbench/parity';
import { freshGpuBackend } from '../../../test/util/gpu';
import { gemmGeometry, gemmKey, gemmTile } from './gemm-wgsl';
import { matmulKernel } from '.';

let gpu: WebGpuBackend;
let noF16: WebGpuBackend;
const cpu = CpuBackend.reference();
const rng = newRng(38);
const tolK = (K: number): Tolerance => ({ atol: TOL.f32.atol * Math.max(1, K / 32), rtol: TOL.f32.rtol });
const setCut = (c: string | undefined) => { (globalThis as { RMAS_GEMM?: string }).RMAS_GEMM = c; };

beforeAll(async () => {
  gpu = await freshGpuBackend();
  noF16 = await freshGpuBackend({ disableFeatures: ['shader-f16'] });
});
afterEach(() => setCut(undefined));
afterAll(() => { gpu?.ctx.destroy(); noF16?.ctx.destroy(); });

async function same(g: Tensor, c: Tensor, tol: Tolerance, label: string) {
  expect(g.shape).toEqual(c.shape);
  assertClose(await g.read(), await c.read(), tol, label);
  g.dispose();
}

const CUTS = ['direct', 'shared'] as const;
// M past GEMV_MAX_M (8) so that the GEMM serves it; K with every remainder mod 4 and mod 16
const SHAPES: [number, number, number][] = [[9, 1, 5], [14, 37, 64], [17, 70, 33], [33, 130, 96], [70, 9, 18], [40, 257, 131]];

describe('register-tiled GEMM (C = A·Bᵀ, M > 8)', () => {
  for (const dt of ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as DType[]) {
    it(`${dt} weights, both cuts, odd M/N/K, bias${dt === 'f16' ? ', f16 native and as u32 pairs' : ''}`, async () => {
      const backends = dt === 'f16' ? [gpu, noF16] : [gpu];
      for (const [M, N, K0] of SHAPES) {
        const K = dt === 'q8_0' || dt === 'q4_0' ? 32 * Math.ceil(K0 / 32) : K0;
        const xv = rng.normals(M * K);
        const wv = rng.normals(N * K);
        const bv = rng.normals(N);
        const ref = cpu.run(matmulKernel, [cpu.fromValues(xv, [M, K]), cpu.fromValues(wv, [N, K], dt), cpu.fromValues(bv, [N])], {
          transB: true,
        })[0];
        for (const be of backends) {
          const x = be.fromValues(xv, [M, K]);
          const w = be.fromValues(wv, [N, K], dt);
          const b = be.fromValues(bv, [N]);
          for (const cut of CUTS) {
            setCut(cut);
            const before = be.ctx.counters().dispatches;
            const y = be.run(matmulKernel, [x, w, b], { transB: true })[0];
            expect(be.ctx.counters().dispatches - before).toBe(1);
            await same(y, ref, tolK(K), `${dt} ${cut} M=${M} N=${N} K=${K}${be === noF16 ? ' (no shader-f16)' : ''}`);
          }
          for (const t of [x, w, b]) t.dispose();
        }
      }
    }, 300_000); // 1-50 s alone; the 2-core machine is shared
  }

  it('a batched [B, N, K] weight, a transposed A, and K cut across bindings (accumulated)', async () => {
    const small = await freshGpuBackend({ bindingLimit: 4096 });
    try {
      for (const cut of CUTS) {
        setCut(cut);
        // batched: A [2, 13, 20] · B [2, 11, 20]ᵀ
        const a = rng.normals(2 * 13 * 20);
        const bw = rng.normals(2 * 11 * 20);
        const want = cpu.run(matmulKernel, [cpu.fromValues(a, [2, 13, 20]), cpu.fromValues(bw, [2, 11, 20])], { transB: true })[0];
        await same(gpu.run(matmulKernel, [gpu.fromValues(a, [2, 13, 20]), gpu.fromValues(bw, [2, 11, 20])], { transB: true })[0],
          want, tolK(20), `${cut} batched`);
        // transA: A stored [K, M] = [21, 12]
        const at = rng.normals(21 * 12);
        const w = rng.normals(7 * 21);
        const want2 = cpu.run(matmulKernel, [cpu.fromValues(at, [21, 12]), cpu.fromValues(w, [7, 21])], { transA: true, transB: true })[0];
        await same(gpu.run(matmulKernel, [gpu.fromValues(at, [21, 12]), gpu.fromValues(w, [7, 21])], { transA: true, transB: true })[0],
          want2, tolK(21), `${cut} transA`);
        // a 4 KiB binding limit: x [40, 48] splits along M, w [50, 48] along N
        const x = rng.normals(40 * 48);
        const wv = rng.normals(50 * 48);
        const want3 = cpu.run(matmulKernel, [cpu.fromValues(x, [40, 48]), cpu.fromValues(wv, [50, 48])], { transB: true })[0];
        const xs = small.fromValues(x, [40, 48]);
        const ws = small.fromValues(wv, [50, 48]);
        expect(xs.storage.kind === 'webgpu' && xs.storage.chunks.length).toBeGreaterThan(1);
        await same(small.run(matmulKernel, [xs, ws], { transB: true })[0], want3, tolK(48), `${cut} split`);
      }
    } finally {
      small.ctx.destroy();
    }
  });

  it('launches one workgroup of 64 per tile, the tile sized to M; tiled keeps the 64×64 kernel', async () => {
    const x = gpu.fromValues(rng.normals(14 * 64), [14, 64]);
    const w = gpu.fromValues(rng.normals(300 * 64), [300, 64], 'bf16');
    for (const cut of [...CUTS, 'tiled'] as const) {
      setCut(cut);
      const c0 = gpu.ctx.counters();
      gpu.run(matmulKernel, [x, w], { transB: true })[0].dispose();
      const c1 = gpu.ctx.counters();
      const g = gemmGeometry(14, 300, cut === 'shared');
      const { tm, tn } = gemmTile(g);
      const wg = cut === 'tiled' ? Math.ceil(300 / 64) : Math.ceil(300 / tn) * Math.ceil(14 / tm);
      expect(c1.workgroups - c0.workgroups, cut).toBe(wg);
      expect(c1.invocations - c0.invocations, cut).toBe(wg * (cut === 'tiled' ? 256 : 64));
      // N = 300 takes whole 64-invocation workgroups in both cuts
      if (cut !== 'tiled') expect(gpu.ctx.pipelines.keys()).toContain(gemmKey({ dtype: 'bf16', native: false }, g));
    }
  });
});
