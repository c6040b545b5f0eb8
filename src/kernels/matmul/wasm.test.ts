// The WebAssembly SIMD kernels against the TypeScript reference (cpu.ts) on every weight dtype they take, on odd
// shapes: K not a multiple of the 8-value step (f32, bf16; q8_0/q4_0 need whole 32-value blocks), M = 1 and M > 1
// (the 2-row blocks and the single-row edge), N not a multiple of the 4-row blocks, bias, strides, batches.
//
// Tolerance: the reference sums exact products in f64 and rounds once; the kernels decode every weight exactly too,
// but round each product to f32 and add in f32: at most K/8 + 8 adds in an output's chain (eight-value steps into
// four-lane sums, the lanes, the K mod 8 tail, the bias). The classic bound for such a sum is
// n·u·Σ|w·x| with u = 2^-24, plus the reference's own rounding u·|y|: the test asserts it with n = K/4 + 16, and
// separately that at real widths the error stays within 1e-6 of the output's peak.
import { describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import { type DType, byteSize } from '../../formats/dtype';
import { encode } from '../../formats/encode';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { BYTES_PATH, bytesModule, compileCpuKernels } from '../../../scripts/build-cpu-kernels';
import { dequantize, matmulForward } from './cpu';
import { type MatmulAttrs, planMatmul } from './plan';
import { WasmMatmul, cpuKernelsBytes } from './wasm';
import { readFileSync } from 'node:fs';

const loaded = WasmMatmul.load();
if (typeof loaded === 'string') throw new Error(`the WebAssembly kernels did not load: ${loaded}`);
const wasm = loaded;
const U = 2 ** -24;

interface Case {
  M: number;
  N: number;
  K: number;
  dtype: DType;
  bias?: boolean;
}

/** The kernels' result, the reference's, and Σ|w·x| + |bias| per output, for one product of random values. */
function run({ M, N, K, dtype, bias }: Case, attrs: MatmulAttrs = { transB: true }, seed = 1) {
  const rng = new Rng(seed + M * 7 + N * 13 + K);
  const a = new Float32Array(rng.normals(M * K));
  const wBytes = encode(dtype, rng.normals(N * K, 0.1), [N, K]);
  const bv = bias ? new Float32Array(rng.normals(N)) : null;
  const aShape = attrs.transA ? [K, M] : [M, K];
  const p = planMatmul({ shape: aShape, dtype: 'f32' }, { shape: [N, K], dtype }, bv ? { shape: [N], dtype: 'f32' } : undefined, attrs);
  const w = dtype === 'f32' ? new Float32Array(wBytes.buffer) : dtype === 'bf16' ? new Uint16Array(wBytes.buffer) : wBytes;
  const got = new Float32Array(M * N);
  expect(wasm.matmul(p, a, w, dtype, bv, got), `${dtype} taken`).toBe(true);
  const wv = dequantize(w, dtype, [N, K]);
  const want = new Float32Array(M * N);
  matmulForward(p, a, wv, bv, want);
  const mag = new Float32Array(M * N);
  matmulForward(p, a.map(Math.abs), wv.map(Math.abs), bv ? bv.map(Math.abs) : null, mag);
  return { got, want, mag, p };
}

function expectWithinBound(c: Case, attrs?: MatmulAttrs) {
  const { got, want, mag } = run(c, attrs);
  const n = c.K / 4 + 16;
  for (let i = 0; i < got.length; i++) {
    const bound = n * U * mag[i] + U * Math.abs(want[i]);
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= bound)) {
      expect.fail(`${c.dtype} M=${c.M} N=${c.N} K=${c.K} ${JSON.stringify(attrs ?? {})} [${i}]: ${got[i]} vs ${want[i]}, bound ${bound}`);
    }
  }
}

describe('WebAssembly SIMD matmul kernels', () => {
  it('are the committed module, rebuilt from wasm-wat.ts by `npm run build:cpu-kernels`', async () => {
    const fresh = await compileCpuKernels();
    expect(Buffer.from(cpuKernelsBytes()).equals(Buffer.from(fresh)), 'wasm-bytes.ts is stale: npm run build:cpu-kernels').toBe(true);
    expect(readFileSync(BYTES_PATH, 'utf8')).toBe(bytesModule(fresh));
  });

  it('equal the reference within f32 summation error on f32 and bf16 rows of any K', () => {
    for (const dtype of ['f32', 'bf16'] as const) {
      for (const K of [1, 3, 7, 8, 9, 17, 40, 101]) for (const N of [1, 3, 4, 5, 9]) for (const M of [1, 2, 3, 5]) {
        expectWithinBound({ M, N, K, dtype, bias: (M + N) % 2 === 0 });
      }
    }
  });

  it('equal the reference within f32 summation error on q8_0 and q4_0 rows', () => {
    for (const dtype of ['q8_0', 'q4_0'] as const) {
      for (const K of [32, 96, 160]) for (const N of [1, 3, 4, 7]) for (const M of [1, 2, 3, 4, 5]) {
        expectWithinBound({ M, N, K, dtype, bias: (M + N) % 2 === 1 });
      }
    }
  });

  it('take strided A (transA) and C (transC) and a batched f32 B', () => {
    for (const dtype of ['f32', 'bf16', 'q4_0'] as const) {
      expectWithinBound({ M: 3, N: 5, K: 64, dtype }, { transB: true, transA: true });
      expectWithinBound({ M: 3, N: 5, K: 64, dtype, bias: true }, { transB: true, transC: true });
    }
    const cpu = new CpuBackend('f32', { kernels: 'wasm' });
    const ref = new CpuBackend('f32', { kernels: 'ts' });
    const rng = new Rng(9);
    const av = rng.normals(2 * 3 * 19);
    const bv = rng.normals(2 * 5 * 19);
    const y = F.matmul(cpu.fromValues(av, [2, 3, 19]), cpu.fromValues(bv, [2, 5, 19]), { transB: true });
    const r = F.matmul(ref.fromValues(av, [2, 3, 19]), ref.fromValues(bv, [2, 5, 19]), { transB: true });
    const [yd, rd] = [cpu.data(y), ref.data(r)];
    for (let i = 0; i < rd.length; i++) expect(Math.abs(yd[i] - rd[i])).toBeLessThan(1e-5);
  });

  it('stay within 1e-6 of the output peak at real widths, weights resident across calls', () => {
    for (const dtype of ['f32', 'bf16', 'q8_0', 'q4_0'] as const) {
      for (const K of [1024, 3072]) {
        const c = { M: 3, N: 9, K, dtype };
        for (let rep = 0; rep < 2; rep++) {
          const { got, want } = run(c);
          const peak = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
          const worst = got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0);
          expect(worst / peak, `${dtype} K=${K}`).toBeLessThan(1e-6);
        }
      }
    }
  });

  it('run the CPU backend by default, and leave f16, f64 and B stored [K, N] to the reference', () => {
    expect(new CpuBackend().name).toBe('cpu (f32, wasm simd)');
    expect(new CpuBackend('f32', { kernels: 'ts' }).name).toBe('cpu (f32)');
    expect(new CpuBackend('f64').name).toBe('cpu (f64)');
    // RMAS_CPU_KERNELS names the default (the tiny systems' builds take the reference they were recorded on)
    const was = process.env.RMAS_CPU_KERNELS;
    try {
      process.env.RMAS_CPU_KERNELS = 'ts';
      expect([new CpuBackend().name, new CpuBackend('f32', { kernels: 'wasm' }).name]).toEqual(['cpu (f32)', 'cpu (f32, wasm simd)']);
      process.env.RMAS_CPU_KERNELS = 'simd';
      expect(() => new CpuBackend()).toThrow('RMAS_CPU_KERNELS=simd: expected wasm or ts');
    } finally {
      if (was === undefined) delete process.env.RMAS_CPU_KERNELS;
      else process.env.RMAS_CPU_KERNELS = was;
    }
    const p = planMatmul({ shape: [2, 32], dtype: 'f32' }, { shape: [3, 32], dtype: 'f16' }, undefined, { transB: true });
    const out = new Float32Array(6);
    expect(wasm.matmul(p, new Float32Array(64), new Uint16Array(96), 'f16', null, out)).toBe(false);
    const p2 = planMatmul({ shape: [2, 3], dtype: 'f32' }, { shape: [3, 32], dtype: 'f32' }, undefined, {});
    expect(wasm.matmul(p2, new Float32Array(6), new Float32Array(96), 'f32', null, new Float32Array(64))).toBe(false);
    const pf = planMatmul({ shape: [2, 32], dtype: 'f32' }, { shape: [3, 32], dtype: 'f32' }, undefined, { transB: true });
    expect(wasm.matmul(pf, new Float64Array(64), new Float32Array(96), 'f32', null, new Float64Array(6))).toBe(false);
    expect(byteSize('q4_0', [3, 32])).toBe(3 * 20);
  });
});
