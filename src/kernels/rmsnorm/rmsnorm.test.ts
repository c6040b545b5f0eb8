import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { assertClose } from '../workbench/close';
import { Rng } from '../../util/rng';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');

describe('rmsnorm (CPU reference)', () => {
  it('normalizes by the root mean square and scales by w or (1 + w)', async () => {
    const x = f64.fromValues([1, 2, 3, 4, -2, 0, 0, 2], [2, 4]);
    const w = f64.fromValues([1, 1, 2, 0.5], [4]);
    // row 0: mean(x²) = 7.5; row 1: mean(x²) = 2
    const r0 = 1 / Math.sqrt(7.5 + 1e-6);
    const r1 = 1 / Math.sqrt(2 + 1e-6);
    const y = await F.rmsNorm(x, w, 1e-6).read();
    assertClose(y, [1 * r0, 2 * r0, 6 * r0, 2 * r0, -2 * r1, 0, 0, 1 * r1], { atol: 1e-7, rtol: 1e-7 }, 'llama');
    const yg = await F.rmsNorm(x, w, 1e-6, { offset: 1 }).read();
    assertClose(yg, [2 * r0, 4 * r0, 9 * r0, 6 * r0, -4 * r1, 0, 0, 3 * r1], { atol: 1e-7, rtol: 1e-7 }, 'gemma');
    // eps = 1 inside the root, exact in f64 (at 1e-6 it is within a few f32 ulps of eps = 0)
    const e0 = 1 / Math.sqrt(8.5);
    const e1 = 1 / Math.sqrt(3);
    const ye = f64.data(F.rmsNorm(x, w, 1)) as Float64Array;
    assertClose(ye, [1 * e0, 2 * e0, 6 * e0, 2 * e0, -2 * e1, 0, 0, 1 * e1], { atol: 1e-14, rtol: 1e-14 }, 'eps 1');
  });

  it('reads f16 and bf16 weights exactly like their f32 values', async () => {
    const rng = new Rng(5);
    const x = cpu.fromValues(rng.normals(3 * 17), [3, 17]);
    // multiples of 1/64 below 4 are exact in f16 and bf16
    const wv = Array.from({ length: 17 }, () => Math.round(rng.uniform(-2, 2) * 64) / 64);
    const ref = await F.rmsNorm(x, cpu.fromValues(wv, [17]), 1e-5).read();
    for (const dt of ['f16', 'bf16'] as const) {
      const y = await F.rmsNorm(x, cpu.fromValues(wv, [17], dt), 1e-5).read();
      expect([...y]).toEqual([...ref]);
    }
  });

  it('normalizes each head of [tokens, heads, head_dim] separately (Qwen3 q/k norm)', async () => {
    const rng = new Rng(6);
    const xv = rng.normals(2 * 3 * 4);
    const w = f64.fromValues([0.5, 1, 1.5, 2], [4]);
    const y = await F.rmsNorm(f64.fromValues(xv, [2, 3, 4]), w, 1e-6).read();
    const y2 = await F.rmsNorm(f64.fromValues(xv, [6, 4]), w, 1e-6).read();
    expect([...y]).toEqual([...y2]);
  });

  it('passes gradcheck for x and w, plain and Gemma, and with either side frozen', async () => {
    const rng = new Rng(3);
    for (const offset of [0, 1]) {
      for (const [nx, nw] of [[true, true], [true, false], [false, true]]) {
        const x = f64.fromValues(rng.normals(4 * 7), [4, 7]);
        const w = f64.fromValues(rng.normals(7), [7]);
        x.requiresGrad = nx;
        w.requiresGrad = nw;
        const r = await gradcheck((a, b) => F.rmsNorm(a, b, 1e-5, { offset }), [x, w]);
        expect(r.ok, `offset ${offset} x ${nx} w ${nw}\n${r.message}`).toBe(true);
      }
    }
  });

  it('gives no weight gradient to a frozen bf16 weight and rejects a trainable one', async () => {
    const x = f64.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    const w = f64.fromValues([1, 0.5, 2], [3], 'bf16');
    x.requiresGrad = true;
    const tape = new Tape();
    const y = tape.run(() => F.rmsNorm(x, w, 1e-6));
    await tape.backward(y, f64.fromValues([1, 0, 0, 0, 1, 0], [2, 3]));
    expect(x.grad).not.toBeNull();
    expect(w.grad).toBeNull();
    tape.dispose();
    w.requiresGrad = true;
    expect(() => F.rmsNorm(x, w, 1e-6)).toThrow(DTypeMismatch);
  });

  it('rejects mismatched shapes and dtypes with named errors', () => {
    const x = cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => F.rmsNorm(x, cpu.fromValues([1, 2], [2]), 1e-6)).toThrow(ShapeMismatch);
    expect(() => F.rmsNorm(x, cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]), 1e-6)).toThrow(/expected \[3\]/);
    expect(() => F.rmsNorm(cpu.fromValues([1, 2, 3], [3], 'bf16'), cpu.fromValues([1, 2, 3], [3]), 1e-6)).toThrow(DTypeMismatch);
    expect(() => F.rmsNorm(x, cpu.fromValues([1, 2, 3], [3], 'i32'), 1e-6)).toThrow(DTypeMismatch);
  });
});
