import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { copyWordsWgsl, placeRowsKernel, sliceRowsKernel } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const seq = (n: number, from = 1) => Array.from({ length: n }, (_, i) => from + i);

describe('row ops (CPU reference)', () => {
  it('sliceRows takes rows of any rank', async () => {
    const x = cpu.fromValues(seq(8), [4, 2]);
    const y = F.sliceRows(x, 1, 2);
    expect(y.shape).toEqual([2, 2]);
    expect([...(await y.read())]).toEqual([3, 4, 5, 6]);
    expect([...(await F.sliceRows(cpu.fromValues([10, 20, 30], [3]), 2, 1).read())]).toEqual([30]);
    const x3 = cpu.fromValues(seq(3 * 2 * 2), [3, 2, 2]);
    const y3 = F.sliceRows(x3, 2, 1);
    expect(y3.shape).toEqual([1, 2, 2]);
    expect([...(await y3.read())]).toEqual([9, 10, 11, 12]);
    const none = F.sliceRows(x, 4, 0);
    expect(none.shape).toEqual([0, 2]);
    expect(none.numel).toBe(0);
  });

  it('concatRows joins rows in order, skipping zero-row inputs, and copies a single input', async () => {
    const a = cpu.fromValues([1, 2, 3], [1, 3]);
    const e = cpu.fromValues([], [0, 3]);
    const c = cpu.fromValues([4, 5, 6, 7, 8, 9], [2, 3]);
    const y = F.concatRows([a, e, c, e]);
    expect(y.shape).toEqual([3, 3]);
    expect([...(await y.read())]).toEqual(seq(9));
    const one = F.concatRows([c]);
    expect(one).not.toBe(c);
    expect([...(await one.read())]).toEqual([4, 5, 6, 7, 8, 9]);
    expect(F.concatRows([e, e]).shape).toEqual([0, 3]);
    const r1 = F.concatRows([cpu.fromValues([1], [1]), cpu.fromValues([2, 3], [2])]);
    expect(r1.shape).toEqual([3]);
    expect([...(await r1.read())]).toEqual([1, 2, 3]);
  });

  it('placeRows (sliceRows backward) puts rows into zeros', async () => {
    const g = cpu.fromValues([1, 2, 3, 4], [2, 2]);
    const out = cpu.run(placeRowsKernel, [g], { start: 1, rows: 4 })[0];
    expect(out.shape).toEqual([4, 2]);
    expect([...(await out.read())]).toEqual([0, 0, 1, 2, 3, 4, 0, 0]);
  });

  it('throws named errors for bad shapes, ranges, lists and dtypes', () => {
    const x = cpu.fromValues(seq(6), [3, 2]);
    expect(() => F.concatRows([x, cpu.fromValues(seq(3), [1, 3])])).toThrow(ShapeMismatch);
    expect(() => F.concatRows([x, cpu.fromValues(seq(2), [2])])).toThrow(/input 1 has shape \[2\] but input 0 has \[3,2\]/);
    expect(() => F.concatRows([])).toThrow(InvalidArgument);
    expect(() => F.concatRows([])).toThrow(/at least one tensor/);
    expect(() => F.concatRows([x, cpu.fromValues(seq(2), [1, 2], 'f16')])).toThrow(DTypeMismatch);
    expect(() => F.sliceRows(cpu.fromValues([1, 2], [2], 'i32'), 0, 1)).toThrow(DTypeMismatch);
    expect(() => F.sliceRows(x, 2, 2)).toThrow(InvalidArgument);
    expect(() => F.sliceRows(x, 2, 2)).toThrow(/rows \[2, 4\) do not lie inside the 3 rows/);
    expect(() => F.sliceRows(x, -1, 1)).toThrow(InvalidArgument);
    expect(() => F.sliceRows(x, 0, -1)).toThrow(InvalidArgument);
    expect(() => F.sliceRows(x, 0.5, 1)).toThrow(InvalidArgument);
    expect(() => F.sliceRows(cpu.fromValues([1], []), 0, 1)).toThrow(ShapeMismatch);
    expect(() => cpu.run(placeRowsKernel, [x], { start: 2, rows: 4 })).toThrow(InvalidArgument);
    expect(() => cpu.run(sliceRowsKernel, [x], { start: 0, n: 4 })).toThrow(InvalidArgument);
  });

  it('passes gradcheck through concat(a, slice(b), c) and overlapping slices of one tensor', async () => {
    const rng = new Rng(3);
    const mk = (shape: number[], grad = true) => {
      const t = f64.fromValues(rng.normals(shape.reduce((p, q) => p * q, 1)), shape);
      t.requiresGrad = grad;
      return t;
    };
    const a = mk([2, 3]);
    const b = mk([4, 3]);
    const c = mk([1, 3]);
    const z = mk([0, 3]);
    const r1 = await gradcheck((a, b, c, z) => F.concatRows([a, F.sliceRows(b, 1, 2), z, c]), [a, b, c, z]);
    expect(r1.ok, r1.message).toBe(true);
    const x = mk([3, 2, 2]);
    const r2 = await gradcheck(
      (x) => F.mul(F.concatRows([F.sliceRows(x, 0, 2), F.sliceRows(x, 1, 2)]), F.concatRows([x, F.sliceRows(x, 2, 1)])),
      [x],
    );
    expect(r2.ok, r2.message).toBe(true);
  });

  it('routes each input its slice of the gradient; untouched rows and frozen inputs get none', async () => {
    const a = cpu.fromValues([1, 2], [1, 2]);
    const b = cpu.fromValues(seq(8), [4, 2]);
    const frozen = cpu.fromValues([0, 0], [1, 2]);
    a.requiresGrad = b.requiresGrad = true;
    const tape = new Tape();
    const y = tape.run(() => F.concatRows([a, frozen, F.sliceRows(b, 1, 2)]));
    await tape.backward(y, cpu.fromValues([10, 11, 20, 21, 30, 31, 40, 41], [4, 2]));
    expect([...(await a.grad!.read())]).toEqual([10, 11]);
    expect([...(await b.grad!.read())]).toEqual([0, 0, 30, 31, 40, 41, 0, 0]);
    expect(frozen.grad).toBeNull();
    tape.dispose();
  });

  it('builds one WGSL word copy with offsets and count from uniforms', () => {
    const w = copyWordsWgsl(256);
    expect(w).toContain('@workgroup_size(256)');
    expect(w).toContain('dst[u.dst_off + i] = src[u.src_off + i];');
  });
});
