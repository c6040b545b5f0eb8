import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { decode, encode } from '../../formats/encode';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { embeddingBackwardKernel } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');

describe('embedding (CPU reference)', () => {
  it('gathers rows by ids of any shape', async () => {
    const table = cpu.fromValues([1, 2, 3, 4, 5, 6], [3, 2]);
    const out = F.embedding(cpu.fromValues([2, 0, 1, 2], [2, 2], 'i32'), table);
    expect(out.shape).toEqual([2, 2, 2]);
    expect([...(await out.read())]).toEqual([5, 6, 1, 2, 3, 4, 5, 6]);
    const one = F.embedding(cpu.fromValues([1], [], 'i32'), table);
    expect(one.shape).toEqual([2]);
    expect([...(await one.read())]).toEqual([3, 4]);
  });

  it('gathers f16/bf16/q8_0/q4_0 rows as their decoded values', async () => {
    const rng = new Rng(1);
    const v = rng.normals(4 * 64);
    for (const dt of ['f16', 'bf16', 'q8_0', 'q4_0'] as const) {
      const bytes = encode(dt, v, [4, 64]);
      const dec = decode(dt, bytes, [4, 64]);
      const out = await F.embedding(cpu.fromValues([3, 1, 3], [3], 'i32'), cpu.fromBytes(bytes, [4, 64], dt)).read();
      expect([...out], dt).toEqual([...dec.subarray(192, 256), ...dec.subarray(64, 128), ...dec.subarray(192, 256)]);
    }
  });

  it('scatter-adds the gradient, summing repeated ids', async () => {
    const ids = cpu.fromValues([0, 2, 0], [3], 'i32');
    const g = cpu.fromValues([1, 1, 2, 2, 3, 3], [3, 2]);
    const gt = cpu.run(embeddingBackwardKernel, [ids, g], { V: 3 })[0];
    expect([...(await gt.read())]).toEqual([4, 4, 0, 0, 2, 2]);
  });

  it('throws named errors for out-of-range ids, wrong dtypes and shapes', () => {
    const table = cpu.fromValues([1, 2, 3, 4], [2, 2]);
    expect(() => F.embedding(cpu.fromValues([2], [1], 'i32'), table)).toThrow(InvalidArgument);
    expect(() => F.embedding(cpu.fromValues([-1], [1], 'i32'), table)).toThrow(/outside/);
    expect(() => F.embedding(cpu.fromValues([0], [1]), table)).toThrow(DTypeMismatch);
    expect(() => F.embedding(cpu.fromValues([0], [1], 'i32'), cpu.fromValues([1, 2], [2]))).toThrow(ShapeMismatch);
    expect(() => cpu.run(embeddingBackwardKernel, [cpu.fromValues([0, 1], [2], 'i32'), cpu.fromValues([1, 2], [1, 2])], { V: 2 })).toThrow(
      ShapeMismatch,
    );
  });

  it('passes gradcheck w.r.t. the table with repeated ids; frozen tables get none', async () => {
    const rng = new Rng(2);
    const table = f64.fromValues(rng.normals(5 * 3), [5, 3]);
    table.requiresGrad = true;
    const ids = f64.fromValues([4, 1, 4, 0, 4, 1], [2, 3], 'i32');
    const r = await gradcheck((t) => F.embedding(ids, t), [table]);
    expect(r.ok, r.message).toBe(true);
    // a frozen quantized table passes nothing and records nothing
    const q = f64.fromValues(rng.normals(5 * 32), [5, 32], 'q8_0');
    const tape = new Tape();
    const y = tape.run(() => F.embedding(ids, q));
    expect(y.requiresGrad).toBe(false);
    expect(tape.nodes.length).toBe(0);
  });
});
