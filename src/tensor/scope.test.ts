import { describe, expect, it } from 'vitest';
import { F, Tape } from '../autograd';
import { CpuBackend } from './cpu';
import { tidy } from './scope';

const cpu = new CpuBackend();

describe('tidy', () => {
  it('disposes intermediates, keeps what is returned, and hands it to the enclosing scope', async () => {
    const a = cpu.fromValues([1, 2], [2]);
    let inner: ReturnType<typeof F.scale> | null = null;
    let mid: ReturnType<typeof F.scale> | null = null;
    const outer = tidy(() => {
      const kept = tidy(() => {
        inner = F.scale(a, 2);
        return F.add(inner, a);
      });
      mid = F.scale(kept, 10);
      expect(kept.disposed).toBe(false);
      return { kept };
    });
    expect(inner!.disposed).toBe(true);
    expect(mid!.disposed).toBe(true);
    expect(a.disposed).toBe(false);
    expect([...(await outer.kept.read())]).toEqual([3, 6]);
  });

  it('leaves tensors that a tape recorded to the tape', async () => {
    const x = cpu.fromValues([1, 2], [2]);
    x.requiresGrad = true;
    const tape = new Tape();
    const y = tidy(() => tape.run(() => F.scale(F.mul(x, x), 3)));
    expect(tape.nodes.every((n) => n.outputs.every((o) => !o.disposed))).toBe(true);
    await tape.backward(y, cpu.fromValues([1, 1], [2]));
    expect([...(await x.grad!.read())]).toEqual([6, 12]);
    tape.dispose();
    expect(y.disposed).toBe(true);
  });
});
