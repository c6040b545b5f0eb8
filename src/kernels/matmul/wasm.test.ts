// The WebAssembly SIMD kernels against the TypeScript reference (cpu.ts) on every weight dtype they take, on odd
// shapes: K not a multiple of the 8-value step (f32, bf16; q8_0/q4_0 need whole 32-value blocks), M = 1 and M > 1
// (the 2-row blocks and the single-row edge), N not a multiple of the 4-row blocks, bias, strides, batches; from 8
// rows of x on, float rows take the packed kernels (K padded to groups of four, an odd M's lone last row).
//
// Tolerance: the reference sums exact products in f64 and rounds once; the kernels decode every weight exactly too,
// but round each product to f32 and add in f32: at most K/8 + 8 adds in an output's chain (eight-value steps into
// four-lane sums, the lanes, the K mod 8 tail, the bias). The classic bound for such a sum is
// n·u·Σ|w·x| with u = 2^-24, plus the reference's own rounding u·|y|: the test asserts it with n = K/4 + 16, and
// separately that at real widths the error stays within 1e-6 of the output's peak.
// q8_0/q4_0 rows take x rounded to 16-bit integers per 32-value block (scale s = max|x|/32767, wasm-wat.ts): each
// value moves by at most (½ + 2⁻⁸)·s (the f32 product x·(1/s) is off by up to 2⁻⁸ of a unit), so an output moves by
// at most Σ_blocks (½ + 2⁻⁸)·s·Σ|w| more, which the bound adds; the
// integer products are exact and the f32 steps after them are fewer than a float row's.
//
// Threads: every case also runs on 3 threads (the caller and two workers over the shared memory, every product split
// however small) and must give the single thread's result bit for bit, each output row being one thread's.
//
// FMA: where the engine fuses relaxed_madd (fusedMultiplyAdd), the default kernels are the FMA build, whose packed
// products round once per multiply-add; the unfused build runs beside it, and each is pinned to its own emulation.
import { describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import { type DType, byteSize, isQuant } from '../../formats/dtype';
import { encode } from '../../formats/encode';
import { CpuBackend, defaultCpuThreads } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { BYTES_PATH, buildCpuKernels, bytesModule } from '../../../scripts/build-cpu-kernels';
import { dequantize, matmulForward } from './cpu';
import { type MatmulAttrs, planMatmul } from './plan';
import { WasmKernels, cpuKernelsBytes, fusedMultiplyAdd, packedKernelsBytes } from './wasm';
import { cpuKernelsWat, packedKernelsWat } from './wasm-wat';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

const loaded = WasmKernels.load();
if (typeof loaded === 'string') throw new Error(`the WebAssembly kernels did not load: ${loaded}`);
const wasm = loaded;
const threadedLoad = WasmKernels.load({ threads: 3, minParallelMacs: 0 });
if (typeof threadedLoad === 'string' || !threadedLoad.pool) throw new Error(`the threaded kernels did not start: ${String(threadedLoad)}`);
const threaded = threadedLoad;
const unfusedLoad = WasmKernels.load({ fma: false });
if (typeof unfusedLoad === 'string') throw new Error(`the unfused kernels did not load: ${unfusedLoad}`);
const unfused = unfusedLoad;
const U = 2 ** -24;
/** The CPU backend's name for its kernels here. */
const SIMD = fusedMultiplyAdd() ? 'wasm simd, fma' : 'wasm simd';

const f32Bits = new Float32Array(1);
const u32Bits = new Uint32Array(f32Bits.buffer);
/** The next f32 above x (x an f32, finite). */
function nextUp(x: number): number {
  if (x === 0) return 2 ** -149;
  f32Bits[0] = x;
  u32Bits[0] += x > 0 ? 1 : -1;
  return f32Bits[0];
}

/**
 * a·b + c rounded once to f32 (a, b, c f32): the product is exact in f64, the sum's f64 rounding error e exact by
 * TwoSum; rounding the f64 sum s to f32 is then right unless s lies exactly between two f32 values and e says on
 * which side the exact sum is.
 */
function fmaF32(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  const bb = s - p;
  const e = (p - (s - bb)) + (c - bb);
  const r = Math.fround(s);
  if (r === s || e === 0) return r;
  const r2 = s > r ? nextUp(r) : -nextUp(-r);
  if ((r + r2) / 2 !== s) return r;
  return (e > 0) === (r2 > r) ? r2 : r;
}

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
  const gotT = new Float32Array(M * N);
  expect(threaded.matmul(p, a, w, dtype, bv, gotT), `${dtype} taken on threads`).toBe(true);
  const differ = got.findIndex((v, i) => !Object.is(v, gotT[i]));
  if (differ >= 0) expect.fail(`${dtype} M=${M} N=${N} K=${K}: 3 threads give ${gotT[differ]} at [${differ}], one ${got[differ]}`);
  const wv = dequantize(w, dtype, [N, K]);
  const want = new Float32Array(M * N);
  matmulForward(p, a, wv, bv, want);
  const mag = new Float32Array(M * N);
  matmulForward(p, a.map(Math.abs), wv.map(Math.abs), bv ? bv.map(Math.abs) : null, mag);
  // x's rounding (quantized rows): Σ over blocks of half the block's scale times Σ|w| over the block
  const xRound = new Float64Array(M * N);
  if (isQuant(dtype)) {
    for (let m = 0; m < M; m++) for (let b = 0; b < K / 32; b++) {
      let max = 0;
      for (let k = 32 * b; k < 32 * b + 32; k++) max = Math.max(max, Math.abs(a[m * p.a.sm + k * p.a.sk]));
      const half = Math.fround(max / 32767) * (0.5 + 2 ** -8);
      for (let n = 0; n < N; n++) {
        let sw = 0;
        for (let k = 32 * b; k < 32 * b + 32; k++) sw += Math.abs(wv[n * K + k]);
        xRound[m * N + n] += half * sw;
      }
    }
  }
  return { got, want, mag, xRound, p };
}

function expectWithinBound(c: Case, attrs?: MatmulAttrs) {
  const { got, want, mag, xRound } = run(c, attrs);
  const n = c.K / 4 + 16;
  for (let i = 0; i < got.length; i++) {
    const bound = n * U * mag[i] + U * Math.abs(want[i]) + xRound[i];
    const err = Math.abs(got[i] - want[i]);
    if (!(err <= bound)) {
      expect.fail(`${c.dtype} M=${c.M} N=${c.N} K=${c.K} ${JSON.stringify(attrs ?? {})} [${i}]: ${got[i]} vs ${want[i]}, bound ${bound}`);
    }
  }
}

describe('WebAssembly SIMD matmul kernels', () => {
  it('are the committed modules, rebuilt from wasm-wat.ts by `npm run build:cpu-kernels`', async () => {
    const fresh = await buildCpuKernels();
    const stale = 'wasm-bytes.ts is stale: npm run build:cpu-kernels';
    const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a).equals(Buffer.from(b));
    expect([same(cpuKernelsBytes(), fresh.kernels), same(cpuKernelsBytes(true), fresh.kernelsShared)], stale).toEqual([true, true]);
    for (const [shared, fma, want] of [[false, false, fresh.packed], [true, false, fresh.packedShared], [false, true, fresh.packedFma],
      [true, true, fresh.packedSharedFma]] as const) {
      expect(same(packedKernelsBytes(shared, fma), want), `${stale} (packed, shared ${shared}, fma ${fma})`).toBe(true);
    }
    expect(readFileSync(BYTES_PATH, 'utf8')).toBe(bytesModule(fresh));
    // the shared modules are the same code: only the memory import differs; the FMA build differs in the packed block only
    expect(cpuKernelsWat(true).replace(' 65536 shared', '')).toBe(cpuKernelsWat());
    expect(packedKernelsWat(true).replace(' 65536 shared', '')).toBe(packedKernelsWat());
    const fused = packedKernelsWat(false, true);
    expect(fused.match(/relaxed_madd/g)?.length).toBe(12); // 4 rows × 2 x rows, and 4 × 1
    const get = '(\\(local\\.get \\$\\w+\\))';
    expect(fused.replace(new RegExp(`\\(f32x4\\.relaxed_madd ${get} ${get} ${get}\\)`, 'g'), '(f32x4.add $3 (f32x4.mul $1 $2))'))
      .toBe(packedKernelsWat());
  });

  it('fuse the packed multiply-adds where the engine does (fma_probe), and only where asked', () => {
    // a Linux x86-64 CPU that lists FMA gets it, in Node 20 through the flag fusedMultiplyAdd sets
    const cpuinfo = process.arch === 'x64' && existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
    if (/^flags\s*:.* fma( |$)/m.test(cpuinfo)) expect(fusedMultiplyAdd()).toBe(true);
    expect([wasm.fma, threaded.fma, unfused.fma]).toEqual([fusedMultiplyAdd(), fusedMultiplyAdd(), false]);
    expect(new CpuBackend('f32', { threads: 1 }).name).toBe(`cpu (f32, ${SIMD})`);
    // the emulation's one subtle case: a sum exactly between two f32 values in f64, its f64 rounding error deciding
    expect(fmaF32(1 + 2 ** -13, 1 + 2 ** -13, -(1 + 2 ** -12))).toBe(2 ** -26);
    // (1 + 2⁻¹⁸)·2⁻²⁴(1 − 2⁻¹⁸) = 2⁻²⁴ − 2⁻⁶⁰, which f64 sums round onto f32 ties; rounding those to even is wrong
    const [a, b] = [1 + 2 ** -18, 2 ** -24 * (1 - 2 ** -18)];
    expect([fmaF32(-a, b, 1 + 2 ** -23), Math.fround(-a * b + (1 + 2 ** -23))]).toEqual([1 + 2 ** -23, 1]);
    expect([fmaF32(a, b, 1 + 2 ** -23), Math.fround(a * b + (1 + 2 ** -23))]).toEqual([1 + 2 ** -23, 1 + 2 ** -22]);
  });

  it('equal the reference within f32 summation error on f32 and bf16 rows of any K', () => {
    for (const dtype of ['f32', 'bf16'] as const) {
      for (const K of [1, 3, 7, 8, 9, 17, 40, 101]) for (const N of [1, 3, 4, 5, 9]) for (const M of [1, 2, 3, 5]) {
        expectWithinBound({ M, N, K, dtype, bias: (M + N) % 2 === 0 });
      }
    }
  });

  it('take one x row row by row, with the bits a block gives its lone x row, on every dtype', () => {
    // M = 3 runs x rows 0–1 through the 4 × 2 blocks and row 2 through the 4 × 1 block (or 1 × 1 at the edge): the
    // sums one row of x had before it got its own loop (rowFunc), which must give them bit for bit
    const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length));
    const float = [1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 64, 100];
    const widths = { f32: float, bf16: float, q8_0: [32, 64, 96, 320], q4_0: [32, 64, 96, 320] };
    for (const dtype of ['f32', 'bf16', 'q8_0', 'q4_0'] as const) {
      for (const K of widths[dtype]) for (const N of [1, 5, 9]) for (const bias of [false, true]) {
        const rng = new Rng(K * 31 + N + (bias ? 1 : 0));
        const x3 = new Float32Array(rng.normals(3 * K));
        const wBytes = encode(dtype, rng.normals(N * K, 0.1), [N, K]);
        const w = dtype === 'f32' ? new Float32Array(wBytes.buffer) : dtype === 'bf16' ? new Uint16Array(wBytes.buffer) : wBytes;
        const bv = bias ? new Float32Array(rng.normals(N)) : null;
        const wm = { shape: [N, K], dtype };
        const bm = bv ? { shape: [N], dtype: 'f32' as const } : undefined;
        const three = new Float32Array(3 * N);
        const one = new Float32Array(N);
        for (const k of [wasm, threaded]) {
          expect(k.matmul(planMatmul({ shape: [3, K], dtype: 'f32' }, wm, bm, { transB: true }), x3, w, dtype, bv, three)).toBe(true);
          const x1 = x3.subarray(2 * K);
          expect(k.matmul(planMatmul({ shape: [1, K], dtype: 'f32' }, wm, bm, { transB: true }), x1, w, dtype, bv, one)).toBe(true);
          expect(bits(one), `${dtype} K=${K} N=${N} bias ${bias}`).toEqual(bits(three.subarray(2 * N)));
        }
      }
    }
  });

  it('take the packed kernels from 8 rows of x on: within the bound, and in the order wasm-wat.ts gives', () => {
    const widths = { f32: [1, 3, 4, 13, 64], bf16: [1, 3, 4, 13, 64], q8_0: [32, 96], q4_0: [32, 96] };
    for (const dtype of ['f32', 'bf16', 'q8_0', 'q4_0'] as const) {
      for (const K of widths[dtype]) for (const N of [1, 4, 6]) for (const M of [8, 9, 16]) {
        expectWithinBound({ M, N, K, dtype, bias: (K + N) % 2 === 1 });
      }
    }
    // an emulation of the packed order in f32: lane j sums the products of k ≡ j (mod 4) in order, then
    // (l0 + l1) + (l2 + l3) and the bias; the kernel must give exactly its bits (quantized rows: of q·d, exact in f32,
    // with x unrounded), each multiply-add rounded once in the FMA build and twice in the other
    const f = Math.fround;
    for (const dtype of ['f32', 'bf16', 'q8_0', 'q4_0'] as const) {
      const [M, N, K] = [9, 6, isQuant(dtype) ? 64 : 13];
      const rng = new Rng(17);
      const a = new Float32Array(rng.normals(M * K));
      const wBytes = encode(dtype, rng.normals(N * K, 0.1), [N, K]);
      const w = dtype === 'f32' ? new Float32Array(wBytes.buffer) : dtype === 'bf16' ? new Uint16Array(wBytes.buffer) : wBytes;
      const bv = new Float32Array(rng.normals(N));
      const wv = dequantize(w, dtype, [N, K]);
      // x's rows contiguous, and x stored [K, M] (transA: each row staged from values M apart)
      for (const transA of [false, true]) {
        const at = transA ? Float32Array.from({ length: M * K }, (_, i) => a[(i % M) * K + Math.floor(i / M)]!) : a;
        const aMeta = { shape: transA ? [K, M] : [M, K], dtype: 'f32' as const };
        const p = planMatmul(aMeta, { shape: [N, K], dtype }, { shape: [N], dtype: 'f32' }, { transA, transB: true });
        for (const k of [wasm, unfused]) {
          const got = new Float32Array(M * N);
          expect(k.matmul(p, at, w, dtype, bv, got)).toBe(true);
          const madd = k.fma ? fmaF32 : (x: number, y: number, z: number) => f(z + f(x * y));
          for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
            const l = [0, 0, 0, 0];
            for (let i = 0; i < K; i++) l[i % 4] = madd(wv[n * K + i]!, a[m * K + i]!, l[i % 4]!);
            const want = f(f(f(l[0] + l[1]) + f(l[2] + l[3])) + bv[n]);
            const what = `${dtype}${transA ? ' transA' : ''}${k.fma ? ' fma' : ''} [${m}, ${n}]`;
            if (!Object.is(got[m * N + n], want)) expect.fail(`${what}: ${got[m * N + n]}, the packed order gives ${want}`);
          }
        }
      }
    }
  });

  it('equal the reference within f32 summation error and x\'s 16-bit rounding on q8_0 and q4_0 rows', () => {
    for (const dtype of ['q8_0', 'q4_0'] as const) {
      for (const K of [32, 96, 160]) for (const N of [1, 3, 4, 7]) for (const M of [1, 2, 3, 4, 5]) {
        expectWithinBound({ M, N, K, dtype, bias: (M + N) % 2 === 1 });
      }
    }
    // a NaN or an infinity in a block of x reaches its outputs (as NaN) instead of rounding to a finite integer
    const p = planMatmul({ shape: [2, 64], dtype: 'f32' }, { shape: [3, 64], dtype: 'q8_0' }, undefined, { transB: true });
    const w = encode('q8_0', new Rng(3).normals(3 * 64), [3, 64]);
    for (const bad of [NaN, Infinity]) {
      const x = new Float32Array(128).fill(0.5);
      x[70] = bad;
      const y = new Float32Array(6);
      expect(wasm.matmul(p, x, w, 'q8_0', null, y)).toBe(true);
      expect(Array.from(y).map((v) => (Number.isNaN(v) ? 'NaN' : 'finite'))).toEqual(['finite', 'finite', 'finite', 'NaN', 'NaN', 'NaN']);
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

  it('take the backward products of an f32 B stored [K, N] (dX = dY·W, batched, dW = Σ dYᵀ·X), B staged transposed', () => {
    const cases: [number[], number[], MatmulAttrs][] = [
      [[6, 13], [13, 5], {}], // dX = dY·W: the weight as stored, not transposed
      [[2, 7, 9], [2, 9, 6], {}], // batched
      [[3, 4, 11], [3, 4, 7], { transA: true, sumBatch: true }], // a weight's gradient over every row
      [[3, 4, 11], [3, 4, 7], { transA: true, sumBatch: true, transC: true }],
      [[40, 33], [33, 17], { transC: true }],
    ];
    const rng = new Rng(21);
    for (const [aShape, bShape, attrs] of cases) {
      const a = new Float32Array(rng.normals(aShape.reduce((x, y) => x * y)));
      const b = new Float32Array(rng.normals(bShape.reduce((x, y) => x * y)));
      const p = planMatmul({ shape: aShape, dtype: 'f32' }, { shape: bShape, dtype: 'f32' }, undefined, attrs);
      const size = p.outShape.reduce((x, y) => x * y);
      const [got, gotT, want, mag] = [0, 1, 2, 3].map(() => new Float32Array(size));
      const what = `a [${aShape}] b [${bShape}] ${JSON.stringify(attrs)}`;
      expect(wasm.matmul(p, a, b, 'f32', null, got), what).toBe(true);
      expect(threaded.matmul(p, a, b, 'f32', null, gotT), what).toBe(true);
      expect(Array.from(gotT), `${what} on threads`).toEqual(Array.from(got));
      matmulForward(p, a, b, null, want);
      matmulForward(p, a.map(Math.abs), b.map(Math.abs), null, mag);
      for (let i = 0; i < size; i++) {
        const bound = (p.K / 4 + 16) * U * mag[i] + U * Math.abs(want[i]);
        if (!(Math.abs(got[i] - want[i]) <= bound)) expect.fail(`${what} [${i}]: ${got[i]} vs ${want[i]}, bound ${bound}`);
      }
    }
    // fewer than 4 rows of A: the transposed copy would cost more than the product, and the reference runs
    const p = planMatmul({ shape: [3, 8], dtype: 'f32' }, { shape: [8, 4], dtype: 'f32' }, undefined, {});
    expect(wasm.matmul(p, new Float32Array(24), new Float32Array(32), 'f32', null, new Float32Array(12))).toBe(false);
  });

  // quantized rows: x's 16-bit rounding, 1.5e-5 of a block's largest |x| per value, against q8_0's own 4e-3 in w
  it('stay within 1e-6 (float rows) and 5e-5 (quantized) of the output peak at real widths, weights resident', () => {
    for (const dtype of ['f32', 'bf16', 'q8_0', 'q4_0'] as const) {
      for (const K of [1024, 3072]) {
        const c = { M: 3, N: 9, K, dtype };
        for (let rep = 0; rep < 2; rep++) {
          const { got, want } = run(c);
          const peak = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
          const worst = got.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0);
          expect(worst / peak, `${dtype} K=${K}`).toBeLessThan(isQuant(dtype) ? 5e-5 : 1e-6);
        }
      }
    }
  });

  it('hand rows to the workers (a worker that wakes after the caller took every chunk takes none: retried)', () => {
    expect(threaded.threads).toBe(3);
    const before = threaded.pool!.workerRows;
    const [N, K] = [16384, 1024];
    const p = planMatmul({ shape: [1, K], dtype: 'f32' }, { shape: [N, K], dtype: 'bf16' }, undefined, { transB: true });
    const w = new Uint16Array(N * K).fill(0x3c00);
    const [x, y] = [new Float32Array(K).fill(1), new Float32Array(N)];
    for (let r = 0; r < 20 && threaded.pool!.workerRows === before; r++) threaded.matmul(p, x, w, 'bf16', null, y);
    expect(threaded.pool!.workerRows).toBeGreaterThan(before);
    expect(y.every((v) => v === K * 0.0078125)).toBe(true); // 0x3c00 is bf16 2^-7
  });

  it('split a real-width GEMV among the threads with the same bits, and keep the backend weights in the heap', () => {
    const one = new CpuBackend('f32', { threads: 1 });
    const two = new CpuBackend('f32', { threads: 2 });
    expect([one.name, two.name]).toEqual([`cpu (f32, ${SIMD})`, `cpu (f32, ${SIMD}, 2 threads)`]);
    const rng = new Rng(5);
    const [N, K] = [3072, 1024];
    const wv = rng.normals(N * K, 0.05);
    const xv = rng.normals(2 * K);
    for (const dtype of ['bf16', 'q8_0', 'q4_0'] as const) {
      const [w1, w2] = [one.fromValues(wv, [N, K], dtype), two.fromValues(wv, [N, K], dtype)];
      // held once: the tensor's array is the kernels' heap (a shared memory), which a grow does not detach
      expect(two.wasm!.holds(two.data(w2) as Uint8Array), dtype).toBe(true);
      expect(one.wasm!.holds(one.data(w1) as Uint8Array), dtype).toBe(true);
      const y1 = one.data(F.linear(one.fromValues(xv, [2, K]), w1));
      const y2 = two.data(F.linear(two.fromValues(xv, [2, K]), w2));
      expect(Buffer.from(y2.buffer).equals(Buffer.from(y1.buffer)), dtype).toBe(true);
    }
    // the reference on the same bytes, which it reads from the heap like any array
    const ref = new CpuBackend('f32', { kernels: 'ts' });
    const wr = ref.fromBytes(two.readBytesSync(two.fromValues(wv, [N, K], 'bf16')), [N, K], 'bf16');
    const yr = <Float32Array>ref.data(F.linear(ref.fromValues(xv, [2, K]), wr));
    const y2 = <Float32Array>two.data(F.linear(two.fromValues(xv, [2, K]), two.fromValues(wv, [N, K], 'bf16')));
    const peak = yr.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    expect(yr.reduce((m, v, i) => Math.max(m, Math.abs(v - y2[i])), 0) / peak).toBeLessThan(1e-6);
  });

  it('keep the backend\'s zeros (a KV cache) in the heap until their last tensor is disposed', () => {
    const be = new CpuBackend('f32', { threads: 2 });
    const wasmOf = be.wasm!;
    const cache = be.zeros([96, 8, 128]);
    const data = be.data(cache) as Float32Array;
    expect(wasmOf.holds(data)).toBe(true);
    expect(data.every((x) => x === 0)).toBe(true);
    // a reshape and a view share the bytes: disposing the cache itself leaves them allocated
    const flat = cache.reshape([96 * 8 * 128]);
    const rows = cache.view(8 * 128, [4, 8, 128]);
    cache.dispose();
    (be.data(rows) as Float32Array).fill(7);
    const other = be.zeros([96, 8, 128]);
    expect(be.data(other).byteOffset).not.toBe(data.byteOffset);
    expect(be.data(other).every((x) => x === 0)).toBe(true);
    expect(Array.from(be.data(flat).subarray(1024, 1027))).toEqual([7, 7, 7]);
    flat.dispose();
    rows.dispose();
    // the last one gone, the block is the heap's again: the next buffer of that size is zeroed in it
    const again = be.zeros([96, 8, 128]);
    expect(be.data(again).byteOffset).toBe(data.byteOffset);
    expect(be.data(again).every((x) => x === 0)).toBe(true);
    other.dispose();
    again.dispose();
    // f64 backends and the other dtypes keep arrays of their own
    const ref = new CpuBackend('f64');
    expect(ref.data(ref.zeros([4])) instanceof Float64Array).toBe(true);
    expect(wasmOf.holds(be.data(be.zeros([4], 'i32')))).toBe(false);
  });

  it('take their thread count from RMAS_CPU_THREADS, else the hardware', () => {
    const was = process.env.RMAS_CPU_THREADS;
    try {
      process.env.RMAS_CPU_THREADS = '1';
      expect(defaultCpuThreads()).toBe(1);
      expect(new CpuBackend().name).toBe(`cpu (f32, ${SIMD})`);
      process.env.RMAS_CPU_THREADS = '3';
      expect([defaultCpuThreads(), new CpuBackend().wasm!.threads]).toEqual([3, 3]);
      process.env.RMAS_CPU_THREADS = 'all';
      expect(() => new CpuBackend()).toThrow('RMAS_CPU_THREADS=all: expected a whole number of threads, 1 to 256');
      delete process.env.RMAS_CPU_THREADS;
      expect(defaultCpuThreads()).toBe(Math.min(16, availableParallelism()));
    } finally {
      if (was === undefined) delete process.env.RMAS_CPU_THREADS;
      else process.env.RMAS_CPU_THREADS = was;
    }
  });

  it('run the CPU backend by default, and leave f16, f64 and B stored [K, N] to the reference', () => {
    expect(new CpuBackend('f32', { threads: 1 }).name).toBe(`cpu (f32, ${SIMD})`);
    expect(new CpuBackend('f32', { kernels: 'ts' }).name).toBe('cpu (f32)');
    expect(new CpuBackend('f64').name).toBe('cpu (f64)');
    // RMAS_CPU_KERNELS names the default (the tiny systems' builds take the reference they were recorded on)
    const was = process.env.RMAS_CPU_KERNELS;
    try {
      process.env.RMAS_CPU_KERNELS = 'ts';
      const names = [new CpuBackend().name, new CpuBackend('f32', { kernels: 'wasm', threads: 1 }).name];
      expect(names).toEqual(['cpu (f32)', `cpu (f32, ${SIMD})`]);
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
