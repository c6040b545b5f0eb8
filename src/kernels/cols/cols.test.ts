import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import type { CudaLauncher, CudaRef, KernelDef } from '../kernel';
import { Rng } from '../../util/rng';
import { concatColsKernel, concatColsWgsl, sliceColsKernel, splitColsKernel } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const seq = (n: number, from = 1) => Array.from({ length: n }, (_, i) => from + i);

describe('column ops (CPU reference)', () => {
  it('splitCols cuts the last dim into parts of any rank, in order', async () => {
    // [2, 6]: rows 1..6 and 7..12 into widths 1 | 3 | 2
    const x = cpu.fromValues(seq(12), [2, 6]);
    const [a, b, c] = F.splitCols(x, [1, 3, 2]);
    expect([a.shape, b.shape, c.shape]).toEqual([[2, 1], [2, 3], [2, 2]]);
    expect([...(await a.read())]).toEqual([1, 7]);
    expect([...(await b.read())]).toEqual([2, 3, 4, 8, 9, 10]);
    expect([...(await c.read())]).toEqual([5, 6, 11, 12]);
    // rank 3: [2, 2, 4] into halves; rank 1: [5] into 2 | 3; one part copies
    const [q, g] = F.splitCols(cpu.fromValues(seq(16), [2, 2, 4]), [2, 2]);
    expect(q.shape).toEqual([2, 2, 2]);
    expect([...(await q.read())]).toEqual([1, 2, 5, 6, 9, 10, 13, 14]);
    expect([...(await g.read())]).toEqual([3, 4, 7, 8, 11, 12, 15, 16]);
    const [u, v] = F.splitCols(cpu.fromValues([10, 20, 30, 40, 50], [5]), [2, 3]);
    expect([...(await u.read())]).toEqual([10, 20]);
    expect([...(await v.read())]).toEqual([30, 40, 50]);
    const [whole] = F.splitCols(x, [6]);
    expect(whole).not.toBe(x);
    expect([...(await whole.read())]).toEqual(seq(12));
  });

  it('concatCols lays rows side by side; sliceCols takes one range of columns', async () => {
    const a = cpu.fromValues([1, 2, 3, 4], [2, 2]);
    const b = cpu.fromValues([5, 6], [2, 1]);
    const c = cpu.fromValues([7, 8, 9, 10, 11, 12], [2, 3]);
    const y = F.concatCols([a, b, c]);
    expect(y.shape).toEqual([2, 6]);
    expect([...(await y.read())]).toEqual([1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12]);
    expect([...(await F.concatCols([b]).read())]).toEqual([5, 6]);
    const s = cpu.run(sliceColsKernel, [y], { start: 2, width: 3 })[0];
    expect(s.shape).toEqual([2, 3]);
    expect([...(await s.read())]).toEqual([5, 7, 8, 6, 10, 11]);
    // zero rows pass through with their shape
    const e = F.concatCols([cpu.fromValues([], [0, 2]), cpu.fromValues([], [0, 3])]);
    expect(e.shape).toEqual([0, 5]);
  });

  it('passes gradcheck (f64) through splitCols, with an unused part, and concatCols', async () => {
    const rng = new Rng(5);
    const mk = (shape: number[]) => {
      const t = f64.fromValues(rng.normals(shape.reduce((p, q) => p * q, 1)), shape);
      t.requiresGrad = true;
      return t;
    };
    const x = mk([3, 7]);
    // the middle part is unused (its gradient is null: zeros), the last one is used twice
    const r1 = await gradcheck((x) => {
      const [a, , c] = F.splitCols(x, [2, 1, 4]);
      return F.concatCols([F.mul(c, c), a, c]);
    }, [x]);
    expect(r1.ok, r1.message).toBe(true);
    const a = mk([2, 3, 2]);
    const b = mk([2, 3, 1]);
    const r2 = await gradcheck((a, b) => F.mul(F.concatCols([a, b, a]), F.concatCols([b, a, a])), [a, b]);
    expect(r2.ok, r2.message).toBe(true);
  });

  it('routes part gradients into x with zeros where a part got none; frozen concat inputs get none', async () => {
    const x = cpu.fromValues(seq(8), [2, 4]);
    x.requiresGrad = true;
    const tape = new Tape();
    const [, b] = tape.run(() => F.splitCols(x, [1, 2, 1]));
    await tape.backward(b, cpu.fromValues([10, 20, 30, 40], [2, 2]));
    expect([...(await x.grad!.read())]).toEqual([0, 10, 20, 0, 0, 30, 40, 0]);
    tape.dispose();

    const p = cpu.fromValues([1, 2], [2, 1]);
    const frozen = cpu.fromValues([0, 0], [2, 1]);
    p.requiresGrad = true;
    const t2 = new Tape();
    const y = t2.run(() => F.concatCols([frozen, p]));
    await t2.backward(y, cpu.fromValues([1, 2, 3, 4], [2, 2]));
    expect([...(await p.grad!.read())]).toEqual([2, 4]);
    expect(frozen.grad).toBeNull();
    t2.dispose();
  });

  it('throws named errors for bad widths, ranges, shapes, counts and dtypes', () => {
    const x = cpu.fromValues(seq(12), [2, 6]);
    expect(() => F.splitCols(x, [2, 3])).toThrow(InvalidArgument);
    expect(() => F.splitCols(x, [2, 3])).toThrow(/widths \[2,3\] sum to 5 but x \[2,6\] has 6 columns/);
    expect(() => F.splitCols(x, [0, 6])).toThrow(/positive integers/);
    expect(() => F.splitCols(x, [1.5, 4.5])).toThrow(InvalidArgument);
    expect(() => F.splitCols(x, [])).toThrow(InvalidArgument);
    expect(() => F.splitCols(x, [1, 1, 1, 1, 1, 1, 0])).toThrow(/positive integers/);
    expect(() => F.splitCols(cpu.fromValues(seq(7), [7]), [1, 1, 1, 1, 1, 1, 1])).toThrow(/7 parts, at most 6/);
    expect(() => F.splitCols(cpu.fromValues([1], []), [1])).toThrow(ShapeMismatch);
    expect(() => F.splitCols(cpu.fromValues([1, 2], [2], 'i32'), [1, 1])).toThrow(DTypeMismatch);
    expect(() => cpu.run(splitColsKernel, [x], { widths: [7] })).toThrow(InvalidArgument);

    expect(() => F.concatCols([])).toThrow(/at least one tensor/);
    expect(() => F.concatCols([x, cpu.fromValues(seq(6), [3, 2])])).toThrow(ShapeMismatch);
    expect(() => F.concatCols([x, cpu.fromValues(seq(6), [3, 2])])).toThrow(/input 1 has shape \[3,2\] but input 0 has \[2,6\]/);
    expect(() => F.concatCols([x, cpu.fromValues(seq(6), [2, 1, 3])])).toThrow(ShapeMismatch);
    const col = cpu.fromValues([1, 2], [2, 1]);
    expect(() => F.concatCols(Array(7).fill(col))).toThrow(/7 inputs, at most 6/);
    expect(() => F.concatCols([x, cpu.fromValues([1, 2], [2, 1], 'f16')])).toThrow(DTypeMismatch);

    expect(() => cpu.run(sliceColsKernel, [x], { start: 4, width: 3 })).toThrow(/columns \[4, 7\) do not lie inside the 6 columns/);
    expect(() => cpu.run(sliceColsKernel, [x], { start: -1, width: 1 })).toThrow(InvalidArgument);
    expect(() => cpu.run(sliceColsKernel, [x], { start: 0.5, width: 1 })).toThrow(InvalidArgument);
  });

  it('builds one WGSL concat per part count, the last part taking the columns left', () => {
    const w = concatColsWgsl(256, 3);
    expect(w).toContain('struct P { n: u32, c: u32, w0: u32, w1: u32, w2: u32 }');
    expect(w).toContain('@group(0) @binding(4) var<storage, read_write> out: array<u32>;');
    expect(w).toContain('if (col < u.w1) { out[i] = p1[r * u.w1 + col]; return; }');
    expect(w).toContain('  out[i] = p2[r * u.w2 + col];');
    expect(w).not.toContain('u.w2) {');
  });

  it('launches slice_cols once per part and concat_cols with [out, parts...] and ints [R, widths...] on cuda', () => {
    const record = <A>(def: KernelDef<A>, shapes: number[][], attrs: A) => {
      const launches: { name: string; ptrs: bigint[]; ints: number[] }[] = [];
      const ctx: CudaLauncher = {
        launch: (name, ptrs, ints = []) => void launches.push({ name, ptrs: [...ptrs], ints: [...ints] }),
        temp: () => 0n,
        capability: { major: 9, minor: 0 },
      };
      const ins: CudaRef[] = shapes.map((shape, i) => ({ meta: { shape, dtype: 'f32' }, ptr: BigInt(0x1000 * (i + 1)) }));
      const outs = def
        .outputs(
          ins.map((r) => r.meta),
          attrs,
        )
        .map((meta, i): CudaRef => ({ meta, ptr: BigInt(0x1000 * (shapes.length + i + 1)) }));
      def.cuda!(ctx, ins, outs, attrs);
      return launches;
    };
    expect(record(splitColsKernel, [[3, 2, 7]], { widths: [4, 2, 1] })).toEqual([
      { name: 'slice_cols', ptrs: [0x1000n, 0x2000n], ints: [6, 7, 0, 4] },
      { name: 'slice_cols', ptrs: [0x1000n, 0x3000n], ints: [6, 7, 4, 2] },
      { name: 'slice_cols', ptrs: [0x1000n, 0x4000n], ints: [6, 7, 6, 1] },
    ]);
    expect(
      record(
        concatColsKernel,
        [
          [5, 2],
          [5, 3],
        ],
        undefined,
      ),
    ).toEqual([{ name: 'concat_cols', ptrs: [0x3000n, 0x1000n, 0x2000n], ints: [5, 2, 3] }]);
    expect(record(sliceColsKernel, [[0, 4]], { start: 1, width: 2 })).toEqual([]);
  });
});
