/**
 * The cuda hooks of matmul and attention, checked without a GPU: a fake CudaLauncher records the launches, whose
 * names and ints must match the layouts documented in native/cuda/src/kernels/*.cu (and the gemm_lt contract).
 * Each launch is then run by a TypeScript model of its kernel (same index math, ranges, tiles and splits as
 * the .cu, f64 arithmetic) on NaN-filled outputs, and the result is compared with the CPU reference: a wrong
 * stride, flag or range in a hook (or in the kernel logic the model mirrors) shows up as a wrong number.
 * The kernels themselves run only on a GPU (npm run test:cuda).
 */
import { describe, expect, it } from 'vitest';
import { InvalidArgument } from '../src/errors.ts';
import { type DType, QK, bf16BitsToF32, f16BitsToF32, rowBytes } from '../src/formats/dtype.ts';
import { encode } from '../src/formats/encode.ts';
import {
  attentionBackwardKVKernel, attentionBackwardQKernel, attentionKernel, attentionRowDotKernel, kvAppendKernel,
} from '../src/kernels/attention/index.ts';
import type { AttentionAttrs } from '../src/kernels/attention/index.ts';
import {
  type CpuArray,
  type CudaLauncher,
  type CudaRef,
  type HalfGemm,
  type KernelDef,
  type Meta,
  numelOf,
} from '../src/kernels/kernel.ts';
import { type MatmulAttrs, matmulKernel } from '../src/kernels/matmul/index.ts';
import { assertClose } from '../src/kernels/workbench/close';
import { Rng } from '../src/util/rng.ts';

// --- a fake device: buffers by base address, launches recorded and run by kernel models ---

interface Launch {
  kernel: string;
  ptrs: bigint[];
  ints: number[];
  floats: number[];
}

class FakeDevice implements CudaLauncher {
  readonly capability = { major: 9, minor: 0 };
  constructor(readonly halfGemm: HalfGemm = 'round') {}
  readonly launches: Launch[] = [];
  readonly temps: number[] = [];
  private readonly bufs = new Map<bigint, CpuArray>();
  private next = 0x10000n;

  alloc(data: CpuArray): bigint {
    const p = this.next;
    this.next += 0x10000n;
    this.bufs.set(p, data);
    return p;
  }
  buf(p: bigint): Float64Array {
    const b = this.bufs.get(p);
    if (!(b instanceof Float64Array)) throw new Error(`no f64 buffer at ${p}`);
    return b;
  }
  raw(p: bigint): CpuArray {
    const b = this.bufs.get(p);
    if (!b) throw new Error(`no buffer at ${p}`);
    return b;
  }
  launch(kernel: string, ptrs: readonly bigint[], ints: readonly number[] = [], floats: readonly number[] = []) {
    this.launches.push({ kernel, ptrs: [...ptrs], ints: [...ints], floats: [...floats] });
  }
  temp(bytes: number): bigint {
    this.temps.push(bytes);
    return this.alloc(new Float64Array(bytes / 4).fill(NaN));
  }
  /** Runs the recorded launches in order through the kernel models. */
  run() {
    for (const l of this.launches) {
      const model = MODELS[l.kernel];
      if (!model) throw new Error(`no model for kernel ${l.kernel}`);
      model(this, l);
    }
  }
}

/** Bounds-checked read and write: a model that strays outside a buffer fails the test. */
function rd(a: ArrayLike<number>, i: number): number {
  if (!Number.isInteger(i) || i < 0 || i >= a.length) throw new Error(`read at ${i} outside a buffer of ${a.length}`);
  return a[i];
}
function wr(a: Float64Array, i: number, v: number) {
  if (!Number.isInteger(i) || i < 0 || i >= a.length) throw new Error(`write at ${i} outside a buffer of ${a.length}`);
  a[i] = v;
}

const CODE: Record<number, DType> = { 0: 'f32', 1: 'f16', 2: 'bf16', 3: 'q8_0', 4: 'q4_0', 5: 'i32' };

/** load_b of matmul.cu: B's stored element (row, col), quantized rows decoded byte by byte as the kernel does. */
function loadB(b: CpuArray, dt: DType, row: number, col: number, cols: number): number {
  if (dt === 'f32') return rd(b, row * cols + col);
  if (dt === 'f16') return f16BitsToF32(rd(b, row * cols + col));
  if (dt === 'bf16') return bf16BitsToF32(rd(b, row * cols + col));
  const bytes = b as Uint8Array;
  const base = row * rowBytes(dt, cols);
  const qBytes = dt === 'q8_0' ? cols : cols / 2;
  const blk = Math.floor(col / QK);
  const j = col % QK;
  const sOff = base + qBytes + 2 * blk;
  const d = f16BitsToF32(rd(bytes, sOff) | (rd(bytes, sOff + 1) << 8));
  if (dt === 'q8_0') return ((rd(bytes, base + col) << 24) >> 24) * d;
  const byte = rd(bytes, base + blk * (QK / 2) + (j & 15));
  return ((j < 16 ? byte & 15 : byte >> 4) - 8) * d;
}

type Model = (dev: FakeDevice, l: Launch) => void;

const MODELS: Record<string, Model> = {
  // the gemm_lt contract: row-major C[M, N] = alpha·op(A)·op(B) (+ bias[N]) (+ C when accumulate), batched
  gemm_lt(dev, { ptrs, ints, floats }) {
    expect(ptrs.length).toBe(4);
    expect(ints.length).toBe(16);
    expect(floats.length).toBe(1);
    const [M, N, K, batch, tA, tB, lda, ldb, ldc, sA, sB, sC, dtA, dtB, accumulate, split] = ints;
    expect(CODE[dtA]).toBe('f32');
    // split (hi + lo halves of A) only with a half B; the model multiplies exactly, as split approximates
    expect(split === 0 || (split === 1 && CODE[dtB] !== 'f32')).toBe(true);
    expect(lda).toBeGreaterThanOrEqual(tA ? M : K);
    expect(ldb).toBeGreaterThanOrEqual(tB ? K : N);
    expect(ldc).toBeGreaterThanOrEqual(N);
    const a = dev.buf(ptrs[0]);
    const b = dev.raw(ptrs[1]);
    const c = dev.buf(ptrs[2]);
    const bias = ptrs[3] ? dev.buf(ptrs[3]) : null;
    for (let bi = 0; bi < batch; bi++) for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) {
        const av = rd(a, bi * sA + (tA ? k * lda + m : m * lda + k));
        const bv = loadB(b, CODE[dtB], bi * sB + (tB ? n * ldb + k : k * ldb + n), 0, 1);
        s += av * bv;
      }
      const ci = bi * sC + m * ldc + n;
      wr(c, ci, floats[0] * s + (bias ? rd(bias, n) : 0) + (accumulate ? rd(c, ci) : 0));
    }
  },
  matmul_tiled(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([4, 14, 0]);
    const [batch, M, N, K, asb, asm, ask, bsbr, cols, transB, csb, csm, csn, dtB] = ints;
    const a = dev.buf(ptrs[0]);
    const b = dev.raw(ptrs[1]);
    const c = dev.buf(ptrs[2]);
    const bias = ptrs[3] ? dev.buf(ptrs[3]) : null;
    for (let bi = 0; bi < batch; bi++) for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) {
        const bv = transB ? loadB(b, CODE[dtB], bi * bsbr + n, k, cols) : loadB(b, CODE[dtB], bi * bsbr + k, n, cols);
        s += rd(a, bi * asb + m * asm + k * ask) * bv;
      }
      wr(c, bi * csb + m * csm + n * csn, s + (bias ? rd(bias, n) : 0));
    }
  },
  matmul_gemv_q(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([4, 6, 0]);
    const [M, N, K, lda, ldc, dtB] = ints;
    expect(K % QK).toBe(0);
    const a = dev.buf(ptrs[0]);
    const w = dev.raw(ptrs[1]);
    const c = dev.buf(ptrs[2]);
    const bias = ptrs[3] ? dev.buf(ptrs[3]) : null;
    for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += rd(a, m * lda + k) * loadB(w, CODE[dtB], n, k, K);
      wr(c, m * ldc + n, s + (bias ? rd(bias, n) : 0));
    }
  },
  attention_fwd(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([5, 10, 1]);
    const p = attnDims(ints, floats);
    const [splitBase, splitLen, n] = ints.slice(7);
    const [q, k, v, o, lse] = ptrs.map((x) => dev.buf(x));
    const R = p.T * p.group;
    for (let z = 0; z < n; z++) for (let kh = 0; kh < p.Hkv; kh++) for (let r0 = 0; r0 < R; r0 += ROWS) {
      const rLast = Math.min(r0 + ROWS, R) - 1;
      const kbeg = Math.max(splitBase + z * splitLen, keyLo(p, Math.floor(r0 / p.group)));
      const kend = Math.min(splitBase + (z + 1) * splitLen, keyHi(p, Math.floor(rLast / p.group)));
      for (let r = r0; r <= rLast; r++) {
        const { t, h } = rowOf(p, kh, r);
        const lo = Math.max(keyLo(p, t), kbeg);
        const hi = Math.min(keyHi(p, t), kend);
        let m = -Infinity;
        let l = 0;
        const acc = new Float64Array(p.D);
        for (let j0 = kbeg; j0 < kend; j0 += KT) {
          const s = Array.from({ length: KT }, (_, lane) => {
            const j = j0 + lane;
            return j >= lo && j < hi ? dot(q, qIdx(p, t, h), k, kIdx(p, j, kh), p.D) * p.scale : -Infinity;
          });
          const mNew = Math.max(m, ...s);
          if (mNew === -Infinity) continue;
          const alpha = Math.exp(m - mNew);
          const pr = s.map((x) => (x === -Infinity ? 0 : Math.exp(x - mNew)));
          l = l * alpha + pr.reduce((x, y) => x + y, 0);
          m = mNew;
          for (let d = 0; d < p.D; d++) {
            acc[d] *= alpha;
            for (let lane = 0; lane < KT; lane++) if (pr[lane]) acc[d] += pr[lane] * rd(v, kIdx(p, j0 + lane, kh) + d);
          }
        }
        const ob = z * p.T * p.Hq * p.D + qIdx(p, t, h);
        for (let d = 0; d < p.D; d++) wr(o, ob + d, l > 0 ? acc[d] / l : 0);
        wr(lse, z * p.Hq * p.T + h * p.T + t, l > 0 ? m + Math.log(l) : -Infinity);
      }
    }
  },
  attention_combine(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([4, 4, 0]);
    const [T, Hq, D, n] = ints;
    const [po, pl, o, lse] = ptrs.map((x) => dev.buf(x));
    const total = T * Hq * D;
    for (let i = 0; i < total; i++) {
      const d = i % D;
      const th = Math.floor(i / D);
      const li = (th % Hq) * T + Math.floor(th / Hq);
      let mx = -Infinity;
      for (let z = 0; z < n; z++) mx = Math.max(mx, rd(pl, z * Hq * T + li));
      let sum = 0;
      let acc = 0;
      for (let z = 0; z < n; z++) {
        const w = Math.exp(rd(pl, z * Hq * T + li) - mx);
        sum += w;
        acc += w * rd(po, z * total + i);
      }
      wr(o, i, acc / sum);
      if (d === 0) wr(lse, li, mx + Math.log(sum));
    }
  },
  attention_row_dot(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([3, 3, 0]);
    const [T, Hq, D] = ints;
    const [o, dO, di] = ptrs.map((x) => dev.buf(x));
    for (let r = 0; r < T * Hq; r++) wr(di, (r % Hq) * T + Math.floor(r / Hq), dot(o, r * D, dO, r * D, D));
  },
  attention_bwd_q(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([7, 7, 1]);
    const p = attnDims(ints, floats);
    const [q, k, v, lse, di, dO, dq] = ptrs.map((x) => dev.buf(x));
    const R = p.T * p.group;
    for (let kh = 0; kh < p.Hkv; kh++) for (let r0 = 0; r0 < R; r0 += ROWS) {
      const rLast = Math.min(r0 + ROWS, R) - 1;
      const kbeg = keyLo(p, Math.floor(r0 / p.group));
      const kend = keyHi(p, Math.floor(rLast / p.group));
      for (let r = r0; r <= rLast; r++) {
        const { t, h } = rowOf(p, kh, r);
        const acc = new Float64Array(p.D);
        for (let j = kbeg; j < kend; j++) {
          if (j < keyLo(p, t) || j >= keyHi(p, t)) continue;
          const pr = Math.exp(dot(q, qIdx(p, t, h), k, kIdx(p, j, kh), p.D) * p.scale - rd(lse, h * p.T + t));
          const ds = pr * (dot(dO, qIdx(p, t, h), v, kIdx(p, j, kh), p.D) - rd(di, h * p.T + t)) * p.scale;
          for (let d = 0; d < p.D; d++) acc[d] += ds * rd(k, kIdx(p, j, kh) + d);
        }
        for (let d = 0; d < p.D; d++) wr(dq, qIdx(p, t, h) + d, acc[d]);
      }
    }
  },
  attention_bwd_kv(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([8, 7, 1]);
    const p = attnDims(ints, floats);
    const [q, k, v, lse, di, dO, dk, dv] = ptrs.map((x) => dev.buf(x));
    for (let kh = 0; kh < p.Hkv; kh++) for (let j0 = 0; j0 < p.S; j0 += ROWS) {
      const jEnd = Math.min(j0 + ROWS, p.S);
      // the query range of the kernel: pos ≥ j0 and, with a window, pos ≤ jEnd − 1 + W − 1
      let tBeg = Math.max(j0 - p.past, 0);
      let tEnd = p.T;
      if (p.window > 0) tEnd = Math.min(tEnd, jEnd - 1 + p.window - p.past);
      tBeg = Math.min(tBeg, tEnd);
      for (let j = j0; j < jEnd; j++) {
        const gk = new Float64Array(p.D);
        const gv = new Float64Array(p.D);
        for (let r = tBeg * p.group; r < tEnd * p.group; r++) {
          const { t, h } = rowOf(p, kh, r);
          if (j < keyLo(p, t) || j >= keyHi(p, t)) continue;
          const pr = Math.exp(dot(q, qIdx(p, t, h), k, kIdx(p, j, kh), p.D) * p.scale - rd(lse, h * p.T + t));
          const ds = pr * (dot(dO, qIdx(p, t, h), v, kIdx(p, j, kh), p.D) - rd(di, h * p.T + t)) * p.scale;
          for (let d = 0; d < p.D; d++) {
            gk[d] += ds * rd(q, qIdx(p, t, h) + d);
            gv[d] += pr * rd(dO, qIdx(p, t, h) + d);
          }
        }
        for (let d = 0; d < p.D; d++) {
          wr(dk, kIdx(p, j, kh) + d, gk[d]);
          wr(dv, kIdx(p, j, kh) + d, gv[d]);
        }
      }
    }
  },
  kv_append(dev, { ptrs, ints, floats }) {
    expect([ptrs.length, ints.length, floats.length]).toEqual([2, 3, 0]);
    const [at, n, rowElems] = ints;
    const [cache, rows] = ptrs.map((x) => dev.buf(x));
    for (let i = 0; i < n * rowElems; i++) wr(cache, at * rowElems + i, rd(rows, i));
  },
};

// attention.cu's constants and row mapping
const ROWS = 16;
const KT = 32;
interface P {
  T: number;
  S: number;
  Hq: number;
  Hkv: number;
  D: number;
  kvLen: number;
  window: number;
  past: number;
  group: number;
  scale: number;
}
function attnDims(ints: number[], floats: number[]): P {
  const [T, S, Hq, Hkv, D, kvLen, window] = ints;
  expect(D).toBeLessThanOrEqual(256);
  return { T, S, Hq, Hkv, D, kvLen, window, past: kvLen - T, group: Hq / Hkv, scale: floats[0] };
}
const keyLo = (p: P, t: number) => (p.window > 0 ? Math.max(0, p.past + t - p.window + 1) : 0);
const keyHi = (p: P, t: number) => p.past + t + 1;
const rowOf = (p: P, kh: number, r: number) => ({ t: Math.floor(r / p.group), h: kh * p.group + (r % p.group) });
const qIdx = (p: P, t: number, h: number) => (t * p.Hq + h) * p.D;
const kIdx = (p: P, j: number, kh: number) => (j * p.Hkv + kh) * p.D;
function dot(a: Float64Array, ao: number, b: Float64Array, bo: number, n: number) {
  let s = 0;
  for (let i = 0; i < n; i++) s += rd(a, ao + i) * rd(b, bo + i);
  return s;
}

// --- helpers: run a KernelDef's cuda hook on the fake device and its cpu reference on the same values ---

const rng = new Rng(7);
const normals = (n: number) => Float64Array.from({ length: n }, () => rng.normal());

interface Input { meta: Meta; data: CpuArray }
const f64In = (shape: number[]): Input => ({ meta: { shape, dtype: 'f32' }, data: normals(numelOf(shape)) });
/** A weight in dtype's CPU storage form (f16/bf16 bits, quantized row bytes). */
function weight(shape: number[], dtype: DType): Input {
  const values = normals(numelOf(shape));
  if (dtype === 'f32') return { meta: { shape, dtype }, data: values };
  const bytes = encode(dtype, values, shape);
  const data = dtype === 'f16' || dtype === 'bf16' ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2) : bytes;
  return { meta: { shape, dtype }, data };
}

function runBoth<A>(kernel: KernelDef<A>, inputs: Input[], attrs: A, halfGemm?: HalfGemm) {
  const dev = new FakeDevice(halfGemm);
  const metas = inputs.map((x) => x.meta);
  const outMetas = kernel.outputs(metas, attrs);
  // in-place kernels (kv_append) write their inputs: give the device its own copy
  const refs: CudaRef[] = inputs.map((x) => ({ meta: x.meta, ptr: dev.alloc(x.data.slice()) }));
  const outs: CudaRef[] = outMetas.map((m) => ({ meta: m, ptr: dev.alloc(new Float64Array(numelOf(m.shape)).fill(NaN)) }));
  kernel.cuda!(dev, refs, outs, attrs);
  const ref = outMetas.map((m) => new Float64Array(numelOf(m.shape)));
  const cpuIn = inputs.map((x) => x.data.slice());
  kernel.cpu(cpuIn, ref, attrs, { inputs: metas, outputs: outMetas });
  return { dev, refs, outs, ref, cpuIn };
}

/** Runs the launches and compares every output (and, for in-place kernels, the first input) with the reference. */
function expectSameAsCpu(r: ReturnType<typeof runBoth>, tol = { atol: 1e-9, rtol: 1e-9 }) {
  r.dev.run();
  r.outs.forEach((o, i) => assertClose(r.dev.buf(o.ptr), r.ref[i], tol, `output ${i}`));
}

const A = (r: ReturnType<typeof runBoth>) => r.refs.map((x) => x.ptr);
const O = (r: ReturnType<typeof runBoth>) => r.outs.map((x) => x.ptr);

// --- matmul ---

describe('matmul cuda hook', () => {
  const mm = (inputs: Input[], attrs: MatmulAttrs) => runBoth(matmulKernel, inputs, attrs);

  it('plain A·B: one gemm_lt, row-major, no transposes', () => {
    const r = mm([f64In([3, 5]), weight([5, 7], 'f32')], {});
    const [a, b] = A(r);
    expect(r.dev.launches).toEqual([
      { kernel: 'gemm_lt', ptrs: [a, b, O(r)[0], 0n], ints: [3, 7, 5, 1, 0, 0, 5, 7, 7, 15, 0, 21, 0, 0, 0, 0], floats: [1] },
    ]);
    expectSameAsCpu(r);
  });

  it('x [2, 4, 16]·Wᵀ with a bf16 W [8, 16] and a bias: leading dims fold into M, transB, bias pointer', () => {
    const r = mm([f64In([2, 4, 16]), weight([8, 16], 'bf16'), f64In([8])], { transB: true });
    const [a, b, bias] = A(r);
    expect(r.dev.launches).toEqual([
      { kernel: 'gemm_lt', ptrs: [a, b, O(r)[0], bias], ints: [8, 8, 16, 1, 0, 1, 16, 16, 8, 0, 0, 0, 0, 2, 0, 0], floats: [1] },
    ]);
    expectSameAsCpu(r);
  });

  it("HalfGemm 'split' sets gemm_lt's split flag for half weights only", () => {
    const mmSplit = (inputs: Input[], attrs: MatmulAttrs) => runBoth(matmulKernel, inputs, attrs, 'split');
    for (const dt of ['bf16', 'f16'] as const) {
      const r = mmSplit([f64In([2, 4, 16]), weight([8, 16], dt), f64In([8])], { transB: true });
      expect(r.dev.launches.map((l) => [l.kernel, ...l.ints])).toEqual([
        ['gemm_lt', 8, 8, 16, 1, 0, 1, 16, 16, 8, 0, 0, 0, 0, dt === 'bf16' ? 2 : 1, 0, 1],
      ]);
      expectSameAsCpu(r);
    }
    const f = mmSplit([f64In([3, 5]), weight([5, 7], 'f32')], {});
    expect(f.dev.launches.map((l) => l.ints[15])).toEqual([0]);
  });

  it('batched: [2, 3, 4, 5]·[2, 3, 6, 5]ᵀ and [2, 5, 4]ᵀ·[2, 5, 6] map to strided batches', () => {
    const r1 = mm([f64In([2, 3, 4, 5]), weight([2, 3, 6, 5], 'f32')], { transB: true });
    expect(r1.dev.launches.map((l) => l.ints)).toEqual([[4, 6, 5, 6, 0, 1, 5, 5, 6, 20, 30, 24, 0, 0, 0, 0]]);
    expectSameAsCpu(r1);
    const r2 = mm([f64In([2, 5, 4]), weight([2, 5, 6], 'f32')], { transA: true });
    expect(r2.dev.launches.map((l) => l.ints)).toEqual([[4, 6, 5, 2, 1, 0, 4, 6, 6, 20, 30, 24, 0, 0, 0, 0]]);
    expectSameAsCpu(r2);
  });

  it('batch-sum (weight gradient): all rows of every batch form one K, a single transA gemm_lt', () => {
    const r = mm([f64In([2, 3, 4]), weight([2, 3, 5], 'f32')], { transA: true, sumBatch: true });
    expect(r.dev.launches.map((l) => [l.kernel, ...l.ints])).toEqual([['gemm_lt', 4, 5, 6, 1, 1, 0, 4, 5, 5, 0, 0, 0, 0, 0, 0, 0]]);
    expectSameAsCpu(r);
  });

  it('transC: f32 B swaps operands (Cᵀ = op(B)ᵀ·op(A)ᵀ); a bf16 B falls back to matmul_tiled', () => {
    const r1 = mm([f64In([3, 7]), weight([5, 7], 'f32')], { transB: true, transC: true });
    const [a, b] = A(r1);
    expect(r1.dev.launches).toEqual([
      { kernel: 'gemm_lt', ptrs: [b, a, O(r1)[0], 0n], ints: [5, 3, 7, 1, 0, 1, 7, 7, 3, 0, 21, 15, 0, 0, 0, 0], floats: [1] },
    ]);
    expectSameAsCpu(r1);
    const r2 = mm([f64In([3, 7]), weight([5, 7], 'bf16')], { transB: true, transC: true });
    expect(r2.dev.launches.map((l) => [l.kernel, ...l.ints])).toEqual([['matmul_tiled', 1, 3, 5, 7, 21, 7, 1, 0, 7, 1, 15, 1, 3, 2]]);
    expectSameAsCpu(r2);
  });

  it('q8_0 weights: GEMV for M ≤ 8 (with bias), tiled for larger M and for non-transB weights', () => {
    const r1 = mm([f64In([64]), weight([16, 64], 'q8_0'), f64In([16])], { transB: true });
    const [a, w, bias] = A(r1);
    expect(r1.dev.launches).toEqual([{ kernel: 'matmul_gemv_q', ptrs: [a, w, O(r1)[0], bias], ints: [1, 16, 64, 64, 16, 3], floats: [] }]);
    expectSameAsCpu(r1);
    const r2 = mm([f64In([20, 64]), weight([16, 64], 'q8_0')], { transB: true });
    expect(r2.dev.launches.map((l) => [l.kernel, ...l.ints])).toEqual([
      ['matmul_tiled', 1, 20, 16, 64, 1280, 64, 1, 0, 64, 1, 320, 16, 1, 3],
    ]);
    expectSameAsCpu(r2);
    const r3 = mm([f64In([5, 16]), weight([16, 64], 'q8_0')], {});
    expect(r3.dev.launches.map((l) => [l.kernel, ...l.ints])).toEqual([['matmul_tiled', 1, 5, 64, 16, 80, 16, 1, 0, 64, 0, 320, 64, 1, 3]]);
    expectSameAsCpu(r3);
  });

  it('q4_0 weights: GEMV decodes nibbles like the CPU reference; a forced gemv path runs M > 8 too', () => {
    const r1 = mm([f64In([3, 96]), weight([5, 96], 'q4_0')], { transB: true });
    expect(r1.dev.launches.map((l) => [l.kernel, ...l.ints])).toEqual([['matmul_gemv_q', 3, 5, 96, 96, 5, 4]]);
    expectSameAsCpu(r1);
    const r2 = mm([f64In([11, 32]), weight([3, 32], 'q4_0')], { transB: true, path: 'gemv' });
    expect(r2.dev.launches.map((l) => l.kernel)).toEqual(['matmul_gemv_q']);
    expectSameAsCpu(r2);
    expect(() => mm([f64In([2, 3, 32]), weight([2, 5, 32], 'q4_0')], { transB: true, path: 'gemv' })).toThrow(InvalidArgument);
  });

  it('path tiled forces matmul_tiled for f16; K = 0 writes the bias; empty outputs launch nothing', () => {
    const r1 = mm([f64In([4, 6]), weight([6, 3], 'f16')], { path: 'tiled' });
    expect(r1.dev.launches.map((l) => [l.kernel, ...l.ints])).toEqual([['matmul_tiled', 1, 4, 3, 6, 24, 6, 1, 0, 3, 0, 12, 3, 1, 1]]);
    expectSameAsCpu(r1);
    const r2 = mm([f64In([2, 0]), weight([3, 0], 'f32'), f64In([3])], { transB: true });
    expect(r2.dev.launches.map((l) => l.kernel)).toEqual(['matmul_tiled']);
    expectSameAsCpu(r2);
    expect(mm([f64In([0, 4]), weight([4, 3], 'f32')], {}).dev.launches).toEqual([]);
  });
});

// --- attention ---

describe('attention cuda hooks', () => {
  const qkv = (T: number, S: number, hq: number, hkv: number, D: number) => [f64In([T, hq, D]), f64In([S, hkv, D]), f64In([S, hkv, D])];
  const tol = { atol: 1e-9, rtol: 1e-9 };

  it('prefill: one attention_fwd over all keys, no splits', () => {
    const attrs: AttentionAttrs = {};
    const r = runBoth(attentionKernel, qkv(20, 20, 4, 2, 8), attrs);
    const [q, k, v] = A(r);
    const [o, lse] = O(r);
    expect(r.dev.launches).toEqual([
      { kernel: 'attention_fwd', ptrs: [q, k, v, o, lse], ints: [20, 20, 4, 2, 8, 20, 0, 0, 32, 1], floats: [1 / Math.sqrt(8)] },
    ]);
    expectSameAsCpu(r, tol);
  });

  it('decode on a long cache: flash-decoding splits into temporaries, merged by attention_combine', () => {
    const attrs: AttentionAttrs = { kvLen: 520 };
    const r = runBoth(attentionKernel, qkv(1, 600, 4, 2, 16), attrs);
    const [q, k, v] = A(r);
    const [o, lse] = O(r);
    // 2 blocks → min(floor(520 / 128), ceil(264 / 2)) = 4 splits of 160 keys (a multiple of 32) → ceil(520 / 160) = 4
    expect(r.dev.temps).toEqual([4 * 1 * 4 * 16 * 4, 4 * 4 * 1 * 4]);
    const [po, pl] = r.dev.launches[0].ptrs.slice(3);
    expect(r.dev.launches).toEqual([
      { kernel: 'attention_fwd', ptrs: [q, k, v, po, pl], ints: [1, 600, 4, 2, 16, 520, 0, 0, 160, 4], floats: [0.25] },
      { kernel: 'attention_combine', ptrs: [po, pl, o, lse], ints: [1, 4, 16, 4], floats: [] },
    ]);
    expectSameAsCpu(r, tol);
  });

  it('chunked prefill with a window and forced splits (some splits see no key of some rows), D = 40', () => {
    const r = runBoth(attentionKernel, qkv(21, 90, 6, 2, 40), { kvLen: 85, window: 23, splits: 3, scale: 0.3 });
    expect(r.dev.launches.map((l) => l.kernel)).toEqual(['attention_fwd', 'attention_combine']);
    // base = first key query 0 sees: 64 + 1 − 23 = 42; span 43 in 3 splits → 32-key splits, 2 of them
    expect(r.dev.launches[0].ints).toEqual([21, 90, 6, 2, 40, 85, 23, 42, 32, 2]);
    expectSameAsCpu(r, tol);
  });

  it('backward: row dot, dQ per query block, dK/dV per key block (rows past kvLen zero)', () => {
    const attrs: AttentionAttrs = { kvLen: 45, window: 13 };
    const [T, S, hq, hkv, D] = [37, 50, 6, 3, 24];
    const [q, k, v] = qkv(T, S, hq, hkv, D);
    const fwd = runBoth(attentionKernel, [q, k, v], attrs);
    const [oRef, lseRef] = fwd.ref;
    const dO = f64In([T, hq, D]);

    const rd_ = runBoth(attentionRowDotKernel, [{ meta: q.meta, data: oRef }, dO], attrs);
    expect(rd_.dev.launches).toEqual([{ kernel: 'attention_row_dot', ptrs: [...A(rd_), ...O(rd_)], ints: [T, hq, D], floats: [] }]);
    expectSameAsCpu(rd_, tol);

    const bwdIn: Input[] = [
      q,
      k,
      v,
      { meta: { shape: [hq, T], dtype: 'f32' }, data: lseRef },
      { meta: { shape: [hq, T], dtype: 'f32' }, data: rd_.ref[0] },
      dO,
    ];
    const dims = [T, S, hq, hkv, D, 45, 13];
    const bq = runBoth(attentionBackwardQKernel, bwdIn, attrs);
    expect(bq.dev.launches).toEqual([{ kernel: 'attention_bwd_q', ptrs: [...A(bq), ...O(bq)], ints: dims, floats: [1 / Math.sqrt(D)] }]);
    expectSameAsCpu(bq, tol);
    const bkv = runBoth(attentionBackwardKVKernel, bwdIn, attrs);
    expect(bkv.dev.launches).toEqual([
      { kernel: 'attention_bwd_kv', ptrs: [...A(bkv), ...O(bkv)], ints: dims, floats: [1 / Math.sqrt(D)] },
    ]);
    expectSameAsCpu(bkv, tol);
    expect(bkv.dev.buf(O(bkv)[0]).subarray(45 * hkv * D).every((x) => x === 0)).toBe(true);
  });

  it('kv_append copies rows at `at`; head_dim > 256 is refused with InvalidArgument', () => {
    const cache = f64In([10, 2, 4]);
    const rows = f64In([3, 2, 4]);
    const r = runBoth(kvAppendKernel, [cache, rows], { at: 6 });
    expect(r.dev.launches).toEqual([{ kernel: 'kv_append', ptrs: A(r), ints: [6, 3, 8], floats: [] }]);
    r.dev.run();
    assertClose(r.dev.buf(A(r)[0]), r.cpuIn[0] as Float64Array, { atol: 0, rtol: 0 }, 'cache');
    expect(() => runBoth(attentionKernel, qkv(2, 2, 1, 1, 264), {})).toThrow(InvalidArgument);
  });
});
