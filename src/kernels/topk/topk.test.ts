import { describe, expect, it } from 'vitest';
import { F, Tape } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { TOPK_MAX, comesBefore, topkWgsl } from '.';

const cpu = new CpuBackend();

async function topk(values: number[], shape: number[], k: number) {
  const r = F.topk(cpu.fromValues(values, shape), k);
  return { shape: r.values.shape, values: [...(await r.values.read())], indices: [...(await r.indices.readI32())] };
}

describe('topk (CPU reference)', () => {
  it('returns the k largest per row, descending, with their indices', async () => {
    const r = await topk([0.5, -1, 3, 2, 7, 0, 1, 1.5], [2, 4], 2);
    expect(r.shape).toEqual([2, 2]);
    expect(r.values).toEqual([3, 2, 7, 1.5]);
    expect(r.indices).toEqual([2, 3, 0, 3]);
  });

  it('breaks ties by the lower index, -0 and +0 included', async () => {
    const r = await topk([1, 5, 2, 5, 5, 2], [6], 4);
    expect(r.indices).toEqual([1, 3, 4, 2]);
    expect(r.values).toEqual([5, 5, 5, 2]);
    const z = await topk([-1, -0, 0, -0], [4], 3);
    expect(z.indices).toEqual([1, 2, 3]);
    expect(Object.is(z.values[0], -0)).toBe(true); // the value itself is passed through
  });

  it('sorts NaN after every number (also after -Infinity), NaNs by index', async () => {
    const r = await topk([NaN, -Infinity, 2, NaN, Infinity], [5], 5);
    expect(r.indices).toEqual([4, 2, 1, 0, 3]);
    expect(r.values.slice(0, 3)).toEqual([Infinity, 2, -Infinity]);
    expect(r.values.slice(3).every(Number.isNaN)).toBe(true);
    expect((await topk([NaN, NaN, -5], [3], 1)).indices).toEqual([2]);
    expect(comesBefore(NaN, 0, NaN, 1)).toBe(true);
    expect(comesBefore(-Infinity, 9, NaN, 0)).toBe(true);
  });

  it('k = V is a full descending sort; k = 1 is argmax', async () => {
    const x = new Rng(5).normals(3 * 17);
    const full = await topk([...x], [3, 17], 17);
    for (let r = 0; r < 3; r++) {
      const want = [...x.subarray(r * 17, (r + 1) * 17)].map((v, i) => [v, i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
      expect(full.indices.slice(r * 17, (r + 1) * 17)).toEqual(want.map(([, i]) => i));
      expect(full.values.slice(r * 17, (r + 1) * 17)).toEqual(want.map(([v]) => v));
    }
    const one = await topk([...x], [3, 17], 1);
    expect(one.indices).toEqual([...(await F.argmax(cpu.fromValues(x, [3, 17])).readI32())]);
    expect((await topk([4], [1, 1], 1)).indices).toEqual([0]);
  });

  it('keeps leading dims and handles ascending rows (every element inserts)', async () => {
    const asc = Array.from({ length: 2 * 3 * 40 }, (_, i) => i);
    const r = await topk(asc, [2, 3, 40], 3);
    expect(r.shape).toEqual([2, 3, 3]);
    expect(r.indices).toEqual(Array.from({ length: 6 }, () => [39, 38, 37]).flat());
    expect(r.values.slice(0, 3)).toEqual([39, 38, 37]);
    expect(r.values.slice(15)).toEqual([239, 238, 237]);
    expect((await topk([], [0, 5], 2)).shape).toEqual([0, 2]);
  });

  it('is not differentiable: nothing is recorded', () => {
    const x = cpu.fromValues([1, 2, 3], [3]);
    x.requiresGrad = true;
    const tape = new Tape();
    const { values, indices } = tape.run(() => F.topk(x, 2));
    expect(tape.nodes.length).toBe(0);
    expect(values.requiresGrad).toBe(false);
    expect([values.dtype, indices.dtype]).toEqual(['f32', 'i32']);
  });

  it('rejects bad k, shapes and dtypes with named errors', () => {
    const x = cpu.fromValues([1, 2, 3, 4], [2, 2]);
    expect(() => F.topk(x, 3)).toThrow(InvalidArgument);
    expect(() => F.topk(x, 3)).toThrow(/k 3 must be an integer in \[1, 2\]/);
    expect(() => F.topk(x, 0)).toThrow(InvalidArgument);
    expect(() => F.topk(x, 1.5)).toThrow(InvalidArgument);
    expect(() => F.topk(cpu.fromValues(new Float32Array(40), [40]), TOPK_MAX + 1)).toThrow(/at most 32/);
    expect(() => F.topk(cpu.fromValues([1], []), 1)).toThrow(ShapeMismatch);
    expect(() => F.topk(cpu.fromValues([1, 2], [2], 'i32'), 1)).toThrow(DTypeMismatch);
  });

  it('builds one WGSL pipeline with k and offsets from uniforms, and two barriers per merge round', () => {
    const w = topkWgsl(256);
    expect(w).toContain('@workgroup_size(256)');
    expect(w).toContain(`var lk: array<u32, ${TOPK_MAX}>;`);
    expect(w).toContain('struct P { rows: u32, V: u32, k: u32, inOff: u32, outOff: u32 }');
    expect(w.match(/workgroupBarrier\(\)/g)?.length).toBe(2);
    expect(() => topkWgsl(100)).toThrow(/multiple of 16/);
  });
});
