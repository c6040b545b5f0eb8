// Attention on the CPU backend's WebAssembly SIMD kernels (matmul/wasm.ts `attention`) against the TypeScript
// reference (cpu.ts attentionForward, f64) on GQA, a past, a sliding window, a partly filled cache and key counts
// that take both of attn_mix's passes (eight keys at a time, then one).
//
// Tolerance, per output: the kernels round each product of a score to f32 and add in f32 (D/4 + 4 adds in a chain),
// so a score is off by δ ≤ (D/4 + 4)·u·scale·Σ|q·k|, u = 2^-24; a softmax weight then moves by at most a factor
// e^{2δmax} − 1 of itself (δmax the row's largest δ), and the mix adds its own f32 rounding, (n + 4)·u·Σ_j p_j·|v_j|
// over n keys. The bound asserted is that sum, with the p and |v| of the reference, plus u·|o| for the rounding of
// the result to f32. The rows run in attn_rows (scores, softmax, mix), split among the threads: the same bits on one
// thread and on three, with or without the logsumexp; its e^x is the module's `exp`, with Math.exp's bits.
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { WasmKernels, cpuKernelsBytes } from '../matmul/wasm';
import { type AttnDims, attentionForward, keyRange } from './cpu';

const loaded = WasmKernels.load();
if (typeof loaded === 'string') throw new Error(`the WebAssembly kernels did not load: ${loaded}`);
const wasm = loaded;
const threadedLoad = WasmKernels.load({ threads: 3, minParallelMacs: 0 });
if (typeof threadedLoad === 'string' || !threadedLoad.pool) throw new Error(`the threaded kernels did not start: ${String(threadedLoad)}`);
const threaded = threadedLoad;
const U = 2 ** -24;

interface Case {
  T: number;
  S: number;
  hq: number;
  hkv: number;
  D: number;
  kvLen?: number;
  window?: number;
  scale?: number;
}

function check(c: Case, seed: number) {
  const { T, S, hq, hkv, D } = c;
  const dims: AttnDims = { t: T, s: S, hq, hkv, d: D, kvLen: c.kvLen ?? S, scale: c.scale ?? 1 / Math.sqrt(D), window: c.window ?? 0 };
  const rng = new Rng(seed);
  const q = new Float32Array(rng.normals(T * hq * D));
  const k = new Float32Array(rng.normals(S * hkv * D));
  const v = new Float32Array(rng.normals(S * hkv * D));
  const o = new Float32Array(T * hq * D);
  const lse = new Float32Array(hq * T);
  expect(wasm.attention(q, k, v, dims, o, lse), 'taken').toBe(true);
  const want = new Float64Array(T * hq * D);
  const wantLse = new Float64Array(hq * T);
  attentionForward(Float64Array.from(q), Float64Array.from(k), Float64Array.from(v), dims, want, wantLse);
  const group = hq / hkv;
  for (let h = 0; h < hq; h++) {
    const kh = Math.floor(h / group);
    for (let t = 0; t < T; t++) {
      const [lo, hi] = keyRange(dims, t);
      const qo = (t * hq + h) * D;
      // the reference's weights, and each score's bound
      let dMax = 0;
      const p: number[] = [];
      for (let j = lo; j < hi; j++) {
        let mag = 0;
        for (let i = 0; i < D; i++) mag += Math.abs(q[qo + i] * k[(j * hkv + kh) * D + i]);
        dMax = Math.max(dMax, (D / 4 + 4) * U * dims.scale * mag);
        let s = 0;
        for (let i = 0; i < D; i++) s += q[qo + i] * k[(j * hkv + kh) * D + i];
        p.push(Math.exp(s * dims.scale - wantLse[h * T + t]));
      }
      const moved = Math.expm1(2 * dMax);
      for (let i = 0; i < D; i++) {
        let pv = 0;
        for (let j = lo; j < hi; j++) pv += p[j - lo] * Math.abs(v[(j * hkv + kh) * D + i]);
        const bound = moved * pv + (hi - lo + 4) * U * pv + U * Math.abs(want[qo + i]);
        const err = Math.abs(o[qo + i] - want[qo + i]);
        if (!(err <= bound)) expect.fail(`${JSON.stringify(c)} h=${h} t=${t} i=${i}: ${o[qo + i]} vs ${want[qo + i]}, bound ${bound}`);
      }
      const lseErr = Math.abs(lse[h * T + t] - wantLse[h * T + t]);
      expect(lseErr, `lse h=${h} t=${t}`).toBeLessThanOrEqual(dMax + 2 * U * Math.abs(wantLse[h * T + t]));
    }
  }
}

describe('attention on the WebAssembly SIMD kernels', () => {
  it('equals the reference within f32 summation error', () => {
    const cases: Case[] = [
      { T: 7, S: 7, hq: 4, hkv: 4, D: 4 },
      { T: 5, S: 9, hq: 4, hkv: 2, D: 8, window: 3 },
      { T: 3, S: 12, hq: 8, hkv: 2, D: 20, kvLen: 10 },
      { T: 1, S: 16, hq: 6, hkv: 3, D: 12, kvLen: 11, window: 5, scale: 0.3 },
      { T: 1, S: 1, hq: 2, hkv: 1, D: 16 },
      // real head widths: a decode step on a partly filled cache, and a prefill
      { T: 1, S: 160, hq: 16, hkv: 8, D: 128, kvLen: 137 },
      { T: 40, S: 40, hq: 4, hkv: 1, D: 256 },
      { T: 24, S: 64, hq: 8, hkv: 4, D: 64, kvLen: 50, window: 17 },
    ];
    cases.forEach((c, i) => check(c, 100 + i));
  });

  it('give the same bits with or without the logsumexp, on one thread and on three', () => {
    const cases: Case[] = [
      { T: 7, S: 7, hq: 4, hkv: 4, D: 4 },
      { T: 5, S: 9, hq: 4, hkv: 2, D: 8, window: 3 },
      { T: 3, S: 12, hq: 8, hkv: 2, D: 20, kvLen: 10 },
      { T: 1, S: 160, hq: 16, hkv: 8, D: 128, kvLen: 137 },
      { T: 33, S: 40, hq: 4, hkv: 1, D: 64, kvLen: 40, scale: 3 },
      { T: 24, S: 64, hq: 8, hkv: 4, D: 64, kvLen: 50, window: 17 },
    ];
    const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer));
    for (const [i, c] of cases.entries()) {
      const { T, S, hq, hkv, D } = c;
      const dims: AttnDims = { t: T, s: S, hq, hkv, d: D, kvLen: c.kvLen ?? S, scale: c.scale ?? 1 / Math.sqrt(D), window: c.window ?? 0 };
      const rng = new Rng(300 + i);
      const [q, k, v] = [rng.normals(T * hq * D), rng.normals(S * hkv * D), rng.normals(S * hkv * D)].map((a) => new Float32Array(a));
      const [o, lse] = [new Float32Array(T * hq * D), new Float32Array(hq * T)];
      expect(wasm.attention(q, k, v, dims, o, lse)).toBe(true);
      for (const [kernels, withLse] of [[wasm, false], [threaded, true], [threaded, false]] as const) {
        const [o2, lse2] = [new Float32Array(T * hq * D), new Float32Array(hq * T)];
        expect(kernels.attention(q, k, v, dims, o2, withLse ? lse2 : null)).toBe(true);
        const what = `${JSON.stringify(c)} on ${kernels.threads} thread(s), lse ${withLse}`;
        expect(bits(o2), what).toEqual(bits(o));
        if (withLse) expect(bits(lse2), what).toEqual(bits(lse));
      }
      // k and v already in the heap (a CPU backend's KV cache, made by zeros): read where they are, the same bits
      const [kh, vh] = [threaded.floatArray(k.length)!, threaded.floatArray(v.length)!];
      expect([threaded.holds(kh), threaded.holds(vh)]).toEqual([true, true]);
      kh.set(k);
      vh.set(v);
      const o3 = new Float32Array(T * hq * D);
      expect(threaded.attention(q, kh, vh, dims, o3, null)).toBe(true);
      expect(bits(o3), `${JSON.stringify(c)}, k and v in the heap`).toEqual(bits(o));
      threaded.free(kh);
      threaded.free(vh);
    }
  });

  it('compute e^x in the module with Math.exp\'s bits', () => {
    const memory = new WebAssembly.Memory({ initial: 1 });
    const inst = new WebAssembly.Instance(new WebAssembly.Module(cpuKernelsBytes()), { env: { memory } });
    const exp = inst.exports.exp as (x: number) => number;
    const xs = [0, -0, 1, -1, 0.5, NaN, Infinity, -Infinity, 709.78, 709.79, -745.13, -745.14, -708.5, -1e4, 2 ** -29, -(2 ** -29),
      0.35, -0.35, 1.04, -1.04, 1e-300, -1021.5 * Math.LN2, 1023.9 * Math.LN2];
    const rng = new Rng(5);
    for (let i = 0; i < 20000; i++) xs.push(-800 * rng.next(), -20 * rng.next(), 1420 * (rng.next() - 0.5));
    const differ = xs.filter((x) => !Object.is(exp(x), Math.exp(x)));
    expect(differ, 'arguments where exp differs from Math.exp').toEqual([]);
    // two at a time ($exp2, through exp_array): every case of fdlibm's beside every other in a pair, and the sweep
    for (let i = 0; i < 4000; i++) xs.push(Math.LN2 * (rng.next() - 0.5), 3 * Math.LN2 * (rng.next() - 0.5), 2 ** -27 * rng.next());
    const pairs = xs.flatMap((a, i) => [a, xs[(i * 7919) % xs.length]!]);
    const exps = inst.exports.exp_array as (x: number, y: number, n: number) => void;
    memory.grow(Math.ceil((16 * pairs.length) / 65536));
    const [xIn, yOut] = [new Float64Array(memory.buffer, 0, pairs.length), new Float64Array(memory.buffer, 8 * pairs.length, pairs.length)];
    xIn.set(pairs);
    for (const n of [pairs.length, pairs.length - 1]) {
      exps(0, 8 * pairs.length, n);
      const wrong = pairs.slice(0, n).filter((x, i) => !Object.is(yOut[i], Math.exp(x)));
      expect(wrong, `arguments where exp_array (n = ${n}) differs from Math.exp`).toEqual([]);
    }
  });

  it('leave what they do not take to the reference (f64 arrays, a head width not a multiple of 4)', () => {
    const dims = (d: number): AttnDims => ({ t: 2, s: 2, hq: 1, hkv: 1, d, kvLen: 2, scale: 1, window: 0 });
    const f = (n: number) => new Float32Array(n);
    expect(wasm.attention(f(12), f(12), f(12), dims(6), f(12), null)).toBe(false);
    expect(wasm.attention(new Float64Array(8), f(8), f(8), dims(4), f(8), null)).toBe(false);
    expect(wasm.attention(f(8), f(8), f(8), dims(4), new Float64Array(8), null)).toBe(false);
    expect(wasm.attention(f(8), f(8), f(8), dims(4), f(8), null)).toBe(true);
  });

  it('run inside the CPU backend (wasm path), the TypeScript path keeping the reference', async () => {
    const rng = new Rng(7);
    const [T, hq, hkv, D] = [6, 4, 2, 32];
    const vals = [rng.normals(T * hq * D), rng.normals(T * hkv * D), rng.normals(T * hkv * D)];
    const outOf = async (b: CpuBackend) => {
      const { F } = await import('../../autograd');
      const [q, k, v] = [b.fromValues(vals[0], [T, hq, D]), b.fromValues(vals[1], [T, hkv, D]), b.fromValues(vals[2], [T, hkv, D])];
      return F.attention(q, k, v).read();
    };
    const [fast, ref] = [await outOf(new CpuBackend('f32', { threads: 1 })), await outOf(new CpuBackend('f32', { kernels: 'ts' }))];
    let maxErr = 0;
    let peak = 0;
    for (let i = 0; i < ref.length; i++) {
      maxErr = Math.max(maxErr, Math.abs(fast[i] - ref[i]));
      peak = Math.max(peak, Math.abs(ref[i]));
    }
    expect(maxErr).toBeGreaterThan(0); // the kernels ran: f32 sums are not the reference's bits
    expect(maxErr).toBeLessThan(1e-6 * peak);
  });
});
