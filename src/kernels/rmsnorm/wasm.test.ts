// RMSNorm on the CPU backend's WebAssembly kernels (matmul/wasm.ts `rmsnorm`) against the TypeScript reference
// (cpu.ts rmsnormForward): the same bits, on one thread and on three, for even and odd row widths, Gemma's offset of
// 1, a bf16 weight widened as the backend widens it, and rows of zeros, tiny, huge, infinite and NaN values.
import { describe, expect, it } from 'vitest';
import { bf16BitsToF32 } from '../../formats/dtype';
import { Rng } from '../../util/rng';
import { WasmKernels } from '../matmul/wasm';
import { floatValues, rmsnormForward } from './cpu';

const one = WasmKernels.load();
const three = WasmKernels.load({ threads: 3, minParallelMacs: 0 });
if (typeof one === 'string' || typeof three === 'string' || !three.pool) throw new Error('the WebAssembly kernels did not load');

describe('rmsnorm on the WebAssembly kernels', () => {
  it('gives the reference\'s bits on one thread and on three', () => {
    const rng = new Rng(21);
    const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer));
    for (const [rows, cols, eps, offset] of [[7, 1024, 1e-6, 0], [33, 128, 1e-6, 1], [5, 37, 1e-5, 0], [4, 1, 1e-6, 1]] as const) {
      const x = new Float32Array(rows * cols);
      for (let i = 0; i < x.length; i++) x[i] = rng.normal() * (i % 5 === 0 ? 40 : 1);
      // special rows: zeros, values near f32's least normal, near its largest, an infinity, a NaN
      const special = [0, 1e-38, 3e38, Infinity, NaN];
      for (let r = 0; r < Math.min(rows - 1, special.length); r++) {
        for (let c = 0; c < cols; c++) {
          x[(r + 1) * cols + c] = r < 3 ? special[r]! * (c % 2 ? -1 : 1) : c === cols >> 1 ? special[r]! : x[c];
        }
      }
      // a bf16 weight, widened to f64 as the backend's floatValues does, and the same values as f32
      const wBits = Uint16Array.from({ length: cols }, () => Math.round(0x3f80 + 200 * (rng.next() - 0.5)));
      const w64 = floatValues(wBits, 'bf16');
      const w32 = Float32Array.from(wBits, bf16BitsToF32);
      const want = new Float32Array(rows * cols);
      rmsnormForward(x, w64, cols, eps, offset, want);
      for (const k of [one, three]) {
        for (const w of [w64, w32]) {
          const got = new Float32Array(rows * cols);
          expect(k.rmsnorm(x, w, cols, eps, offset, got)).toBe(true);
          expect(bits(got), `${rows}×${cols} offset ${offset} on ${k.threads} thread(s), w ${w.constructor.name}`).toEqual(bits(want));
        }
      }
    }
    // f64 arrays stay with the reference
    expect(one.rmsnorm(new Float64Array(8), new Float64Array(4), 4, 1e-6, 0, new Float64Array(8))).toBe(false);
  });
});
