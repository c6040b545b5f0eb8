import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck, noGrad } from '.';
import { InvalidArgument, TensorDisposed } from '../errors';
import { CpuBackend } from '../tensor/cpu';

const cpu = new CpuBackend('f64');
const vals = async (t: { read(): Promise<Float32Array> }) => [...(await t.read())];

describe('autograd tape', () => {
  it('accumulates gradients where a value fans out', async () => {
    // L = sum(x*x*w + x) with x used three times: dL/dx = 2xw + 1, dL/dw = x²
    const x = cpu.fromValues([1, -2, 3], [3]);
    const w = cpu.fromValues([0.5, 2, -1], [3]);
    x.requiresGrad = true;
    w.requiresGrad = true;
    const tape = new Tape();
    const y = tape.run(() => F.add(F.mul(F.mul(x, x), w), x));
    const seed = cpu.fromValues([1, 1, 1], [3]);
    await tape.backward(y, seed);
    expect(await vals(x.grad!)).toEqual([2, -7, -5]);
    expect(await vals(w.grad!)).toEqual([1, 4, 9]);
    tape.dispose();
    expect(y.disposed).toBe(true);
    expect(x.disposed).toBe(false);
  });

  it('gives frozen tensors no gradient but passes activation gradients through them', async () => {
    const x = cpu.fromValues([1, 2], [2]);
    const frozen = cpu.fromValues([3, 4], [2]);
    x.requiresGrad = true;
    const tape = new Tape();
    const h = tape.run(() => F.mul(x, frozen)); // a frozen "weight" between x and the loss
    const out = tape.run(() => F.scale(h, 2));
    expect(h.requiresGrad).toBe(true);
    await tape.backward(out, cpu.fromValues([1, 1], [2]));
    expect(frozen.grad).toBeNull();
    expect(await vals(x.grad!)).toEqual([6, 8]);
    expect(tape.nodes.map((n) => n.name)).toEqual(['binary_mul', 'scale']);
  });

  it('adds into existing leaf gradients across backward calls and records nothing without grad', async () => {
    const x = cpu.fromValues([1, 2], [2]);
    x.requiresGrad = true;
    for (let i = 0; i < 2; i++) {
      const tape = new Tape();
      const y = tape.run(() => F.scale(x, 3));
      await tape.backward(y, cpu.fromValues([1, 1], [2]));
      tape.dispose();
    }
    expect(await vals(x.grad!)).toEqual([6, 6]);
    const tape = new Tape();
    const z = tape.run(() => noGrad(() => F.scale(x, 3)));
    const c = tape.run(() => F.scale(cpu.fromValues([1], [1]), 3));
    expect(tape.nodes.length).toBe(0);
    expect(z.requiresGrad || c.requiresGrad).toBe(false);
  });

  it('refuses to backpropagate from values that need no gradient or are not scalars', async () => {
    const tape = new Tape();
    const a = cpu.fromValues([1, 2], [2]);
    await expect(tape.backward(a)).rejects.toThrow(InvalidArgument);
    a.requiresGrad = true;
    const y = tape.run(() => F.scale(a, 2));
    await expect(tape.backward(y)).rejects.toThrow(/not a scalar/);
    a.dispose();
    expect(() => F.scale(a, 2)).toThrow(TensorDisposed);
  });

  it('gradcheck catches a wrong backward rule', async () => {
    const x = cpu.fromValues([0.3, -0.7, 1.1], [3]);
    x.requiresGrad = true;
    // mul's rule is right; a function whose "gradient" skips one use of x is not: check by detaching.
    const wrong = (t: typeof x) => F.mul(t, noGrad(() => F.scale(t, 1)));
    const r = await gradcheck(wrong, [x]);
    expect(r.ok).toBe(false);
    const right = (t: typeof x) => F.mul(t, t);
    expect((await gradcheck(right, [x])).ok).toBe(true);
  });
});

describe('reshape', () => {
  it('is differentiable and shares storage', async () => {
    const x = cpu.fromValues([0.1, -0.4, 0.9, 1.3, -2, 0.5], [2, 3]);
    x.requiresGrad = true;
    const r = await gradcheck((t) => F.mul(F.reshape(t, [3, 2]), F.reshape(F.scale(t, 2), [3, 2])), [x]);
    expect(r.ok, r.message).toBe(true);
    expect([...(await F.reshape(x, [6]).read())]).toEqual([...(await x.read())]);
  });
});
