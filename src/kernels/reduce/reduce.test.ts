import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { clipGradNormKernel, reduceBackwardKernel } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const vals = async (t: { read(): Promise<Float32Array> }) => [...(await t.read())];

describe('reduce (CPU reference)', () => {
  const x = cpu.fromValues([1, -2, 3, 4, 5, -6], [2, 3]);

  it('sums, averages and sums squares over all elements', async () => {
    expect(await vals(F.sum(x))).toEqual([5]);
    expect((await vals(F.mean(x)))[0]).toBeCloseTo(5 / 6, 6);
    expect(await vals(F.sumSquares(x))).toEqual([1 + 4 + 9 + 16 + 25 + 36]);
    expect(F.sum(x).shape).toEqual([1]);
  });

  it('reduces over the last dim to the leading shape', async () => {
    expect(await vals(F.sumLastDim(x))).toEqual([2, 3]);
    expect(await vals(F.meanLastDim(x))).toEqual([2 / 3, 1].map(Math.fround));
    expect(F.sumLastDim(cpu.fromValues([1, 2, 3, 4], [2, 1, 2])).shape).toEqual([2, 1]);
    const v = F.sumLastDim(cpu.fromValues([1, 2, 3], [3]));
    expect(v.shape).toEqual([1]);
    expect(await vals(v)).toEqual([6]);
  });

  it('gives 0 for an empty sum and NaN for an empty mean (torch)', async () => {
    const e = cpu.zeros([0]);
    expect(await vals(F.sum(e))).toEqual([0]);
    expect((await vals(F.mean(e)))[0]).toBeNaN();
    expect(await vals(F.sumLastDim(cpu.zeros([2, 0])))).toEqual([0, 0]);
  });

  it('backpropagates a broadcast of the output gradient', async () => {
    const w = cpu.fromValues([1, -2, 3, 4, 5, -6], [2, 3]);
    w.requiresGrad = true;
    const tape = new Tape();
    // L = sum(w) + 2 mean(w) + sumSquares(w): dL/dw = 1 + 2/6 + 2w
    const loss = tape.run(() => F.add(F.add(F.sum(w), F.scale(F.mean(w), 2)), F.sumSquares(w)));
    await tape.backward(loss);
    tape.dispose();
    const want = [1, -2, 3, 4, 5, -6].map((v) => Math.fround(1 + 2 / 6 + 2 * v));
    expect(await vals(w.grad!)).toEqual(want);
  });

  it('passes gradcheck for all five reductions', async () => {
    const rng = new Rng(5);
    const a = f64.fromValues(rng.normals(3 * 4 * 5), [3, 4, 5]);
    a.requiresGrad = true;
    const fns: [string, (t: any) => any][] = [
      ['sum', F.sum],
      ['mean', F.mean],
      ['sumSquares', F.sumSquares],
      ['sumLastDim', F.sumLastDim],
      ['meanLastDim', F.meanLastDim],
    ];
    for (const [name, fn] of fns) {
      const r = await gradcheck(fn, [a]);
      expect(r.ok, `${name}\n${r.message}`).toBe(true);
    }
  });

  it('rejects non-f32 inputs and rank-0 last-dim reductions', () => {
    expect(() => F.sum(cpu.fromValues([1, 2], [2], 'i32'))).toThrow(DTypeMismatch);
    expect(() => F.sumLastDim(cpu.fromValues([1], []))).toThrow(ShapeMismatch);
    const g = cpu.fromValues([1, 2], [2]);
    expect(() => cpu.run(reduceBackwardKernel, [g], { op: 'sum', axis: 'all', shape: [2, 3] })).toThrow(ShapeMismatch);
    expect(() => cpu.run(reduceBackwardKernel, [cpu.fromValues([1], [1], 'f16')], { op: 'sum', axis: 'all', shape: [2, 3] })).toThrow(
      DTypeMismatch,
    );
    expect(() => cpu.run(reduceBackwardKernel, [g], { op: 'sumsq', axis: 'last', shape: [2, 3] })).toThrow(InvalidArgument);
    expect(() => cpu.run(reduceBackwardKernel, [g, cpu.zeros([3, 2])], { op: 'sumsq', axis: 'last', shape: [2, 3] })).toThrow(
      ShapeMismatch,
    );
  });
});

describe('clip_grad_norm (CPU reference)', () => {
  it('scales every gradient by maxNorm / (total + 1e-6) when the norm is larger', async () => {
    const a = cpu.fromValues([3, 0], [2]);
    const b = cpu.fromValues([0, 4, 0], [1, 3]);
    const [total] = cpu.run(clipGradNormKernel, [a, b], { maxNorm: 1 });
    expect(await vals(total)).toEqual([5]);
    const c = 1 / (5 + 1e-6);
    expect(await vals(a)).toEqual([3 * c, 0].map(Math.fround));
    expect(await vals(b)).toEqual([0, 4 * c, 0].map(Math.fround));
  });

  it('leaves gradients with a smaller norm alone', async () => {
    const a = cpu.fromValues([0.3, -0.4], [2]);
    const [total] = cpu.run(clipGradNormKernel, [a], { maxNorm: 1 });
    expect((await vals(total))[0]).toBeCloseTo(0.5, 7);
    expect(await vals(a)).toEqual([0.3, -0.4].map(Math.fround));
  });

  it('rejects an empty list and a non-positive maxNorm', () => {
    expect(() => cpu.run(clipGradNormKernel, [], { maxNorm: 1 })).toThrow();
    expect(() => cpu.run(clipGradNormKernel, [cpu.zeros([2])], { maxNorm: 0 })).toThrow(InvalidArgument);
    expect(() => cpu.run(clipGradNormKernel, [cpu.zeros([2]), cpu.zeros([2], 'bf16')], { maxNorm: 1 })).toThrow(DTypeMismatch);
  });
});
