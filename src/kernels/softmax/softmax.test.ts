import { describe, expect, it } from 'vitest';
import { F, gradcheck } from '../../autograd';
import { DTypeMismatch, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { assertClose } from '../workbench';
import { softmaxBackwardKernel } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');

describe('softmax (CPU reference)', () => {
  it('matches hand-computed rows', async () => {
    const x = f64.fromValues([0, Math.log(3), 1, 1], [2, 2]);
    assertClose(await F.softmax(x).read(), [0.25, 0.75, 0.5, 0.5], { atol: 1e-7, rtol: 1e-7 });
    const ls = await F.logSoftmax(x).read();
    assertClose(ls, [Math.log(0.25), Math.log(0.75), Math.log(0.5), Math.log(0.5)], { atol: 1e-7, rtol: 1e-7 });
  });

  it('is stable for huge logits, -inf entries and a single column', async () => {
    const x = cpu.fromValues([1000, 1001, -Infinity, 5], [1, 4]);
    const e = 1 / (1 + Math.E + Math.exp(5 - 1001));
    assertClose(await F.softmax(x).read(), [e, Math.E * e, 0, Math.exp(5 - 1001) * e], { atol: 1e-7, rtol: 1e-6 });
    const ls = await F.logSoftmax(x).read();
    expect(ls[2]).toBe(-Infinity);
    assertClose([ls[0], ls[1]], [Math.log(e), 1 + Math.log(e)], { atol: 1e-5, rtol: 1e-6 });
    expect([...(await F.softmax(cpu.fromValues([-3, 7, 0], [3, 1])).read())]).toEqual([1, 1, 1]);
    expect([...(await F.logSoftmax(cpu.fromValues([-3, 7, 0], [3, 1])).read())]).toEqual([0, 0, 0]);
  });

  it('treats leading dims as rows', async () => {
    const rng = new Rng(2);
    const v = rng.normals(24);
    const a = await F.softmax(cpu.fromValues(v, [2, 3, 4])).read();
    const b = await F.softmax(cpu.fromValues(v, [6, 4])).read();
    expect([...a]).toEqual([...b]);
    for (let r = 0; r < 6; r++) expect(a.slice(r * 4, r * 4 + 4).reduce((s, t) => s + t, 0)).toBeCloseTo(1, 6);
  });

  it('backward matches the closed forms on a hand case', async () => {
    const y = f64.fromValues([0.25, 0.75], [1, 2]);
    const dy = f64.fromValues([1, 3], [1, 2]);
    // Σ dy·y = 2.5 -> dx = y·(dy − 2.5)
    assertClose(await f64.run(softmaxBackwardKernel, [y, dy], { log: false })[0].read(), [-0.375, 0.375], { atol: 1e-7, rtol: 0 });
    const ly = f64.fromValues([Math.log(0.25), Math.log(0.75)], [1, 2]);
    // Σ dy = 4 -> dx = dy − softmax·4
    assertClose(await f64.run(softmaxBackwardKernel, [ly, dy], { log: true })[0].read(), [0, 0], { atol: 1e-7, rtol: 0 });
  });

  it('passes gradcheck for softmax and log-softmax', async () => {
    const rng = new Rng(5);
    for (const shape of [[3, 5], [2, 2, 7], [4, 1]]) {
      const n = shape.reduce((a, b) => a * b, 1);
      const x = f64.fromValues(rng.normals(n, 2), shape);
      x.requiresGrad = true;
      for (const [name, fn] of [['softmax', F.softmax], ['logSoftmax', F.logSoftmax]] as const) {
        const r = await gradcheck((a) => fn(a), [x]);
        expect(r.ok, `${name} [${shape}]\n${r.message}`).toBe(true);
      }
    }
  });

  it('rejects non-f32, scalars and mismatched backward shapes', () => {
    expect(() => F.softmax(cpu.fromValues([1, 2], [2], 'bf16'))).toThrow(DTypeMismatch);
    expect(() => F.softmax(cpu.fromValues([1], []))).toThrow(ShapeMismatch);
    const y = cpu.fromValues([0.5, 0.5], [1, 2]);
    expect(() => cpu.run(softmaxBackwardKernel, [y, cpu.fromValues([1, 2, 3], [1, 3])], { log: false })).toThrow(/dy has shape/);
  });
});
