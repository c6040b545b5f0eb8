import { describe, expect, it } from 'vitest';
import { F, gradcheck } from '../../autograd';
import { ShapeMismatch, DTypeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');

describe('elementwise (CPU reference)', () => {
  it('adds, subtracts and multiplies with row broadcast', async () => {
    const a = cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    const b = cpu.fromValues([10, 20, 30], [3]);
    expect([...(await F.add(a, b).read())]).toEqual([11, 22, 33, 14, 25, 36]);
    expect([...(await F.sub(a, b).read())]).toEqual([-9, -18, -27, -6, -15, -24]);
    expect([...(await F.mul(a, b).read())]).toEqual([10, 40, 90, 40, 100, 180]);
    expect([...(await F.scale(a, 2, 1).read())]).toEqual([3, 5, 7, 9, 11, 13]);
    expect([...(await F.sumRows(a, [3]).read())]).toEqual([5, 7, 9]);
  });

  it('rejects operands that do not broadcast and non-f32 activations', () => {
    const a = cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => F.add(a, cpu.fromValues([1, 2], [2]))).toThrow(ShapeMismatch);
    expect(() => F.add(a, cpu.fromValues([1, 2, 3], [3], 'bf16'))).toThrow(DTypeMismatch);
    expect(() => F.mul(cpu.fromValues([1, 2], [2], 'f16'), cpu.fromValues([1, 2], [2]))).toThrow(DTypeMismatch);
    expect(() => F.sumRows(a, [2])).toThrow(ShapeMismatch);
    expect(() => F.sumRows(a, [1, 2, 3])).toThrow(/not a trailing part/);
    expect(() => F.scale(cpu.fromValues([1, 2], [2], 'i32'), 2)).toThrow(DTypeMismatch);
  });

  it('passes gradcheck for add/sub/mul with broadcast, scale and sumRows', async () => {
    const rng = new Rng(3);
    const x = f64.fromValues(rng.normals(12), [4, 3]);
    const y = f64.fromValues(rng.normals(3), [3]);
    const z = f64.fromValues(rng.normals(12), [4, 3]);
    for (const t of [x, y, z]) t.requiresGrad = true;
    const fns: [string, (...t: any[]) => any, any[]][] = [
      ['add', (a, b) => F.add(a, b), [x, y]],
      ['sub', (a, b) => F.sub(a, b), [x, y]],
      ['mul broadcast', (a, b) => F.mul(a, b), [x, y]],
      ['mul same', (a, b) => F.mul(a, b), [x, z]],
      ['fan-out', (a) => F.mul(a, a), [x]],
      ['scale', (a) => F.scale(a, -1.5, 2), [x]],
      ['sumRows', (a) => F.sumRows(a, [3]), [x]],
    ];
    for (const [name, fn, inputs] of fns) {
      const r = await gradcheck(fn, inputs);
      expect(r.ok, `${name}\n${r.message}`).toBe(true);
    }
  });
});
