// The GPU context's counters against work issued by hand (Dawn in Node): dispatches, submits, readbacks, and the
// bytes bound per dispatch split into weights (markWeight) and activations; a weight buffer given back to the pool
// stops counting as a weight.
import { afterAll, describe, expect, it } from 'vitest';
import { F } from '../autograd';
import { WebGpuBackend } from '../tensor/webgpu';
import { counterDelta } from './counters';

describe('GpuContext counters (node dawn)', () => {
  let gpu: WebGpuBackend | null = null;
  afterAll(() => gpu?.ctx.destroy());

  it('count the dispatches, submits, readbacks and bound bytes of the work a test issues', async () => {
    gpu = await WebGpuBackend.create();
    const b = gpu;
    const x = b.fromValues([1, 2, 3, 4, 5, 6, 7, 8], [2, 4]); // 32 bytes
    const w = b.fromValues(Array.from({ length: 12 }, (_, i) => i / 10), [3, 4]); // 48 bytes: a "weight"
    b.markWeight(w);
    await b.sync();
    const before = b.counters();
    // one dispatch binding x, w and y [2, 3] (24 bytes), and x again in the unused bias slot (matmul binds an operand there)
    const y = F.linear(x, w);
    const s = F.add(y, y); // one dispatch: y twice and s bound
    const got = await s.read(); // one submit, one readback
    const d = counterDelta(before, b.counters());
    // s = 2·x·wᵀ, by hand
    const want = [0, 1].flatMap((r) =>
      [0, 1, 2].map((j) => 2 * [0, 1, 2, 3].reduce((a, k) => a + (r * 4 + k + 1) * ((j * 4 + k) / 10), 0)),
    );
    Array.from(got).forEach((v, i) => expect(v).toBeCloseTo(want[i]!, 4));
    expect([d.dispatches, d.submits, d.readbacks]).toEqual([2, 1, 1]);
    expect(d.weightBytes).toBe(48);
    // linear binds x (32) twice and y (24); add binds y twice and s (24 each)
    expect(d.activationBytes).toBe(2 * 32 + 24 + 3 * 24);
    // released, the weight's buffer may come back as anything: it no longer counts as a weight
    w.dispose();
    const again = b.counters();
    const z = b.fromValues(Array.from({ length: 12 }, () => 1), [3, 4]);
    F.add(z, z).dispose();
    await b.sync();
    expect(counterDelta(again, b.counters()).weightBytes).toBe(0);
    [x, y, s, z].forEach((t) => t.dispose());
  });

  it('reuse a bind group where a dispatch binds what an earlier one bound, and bind the new values', async () => {
    gpu ??= await WebGpuBackend.create();
    const b = gpu;
    const w = b.fromValues(Array.from({ length: 64 * 32 }, (_, i) => ((i % 7) - 3) / 8), [64, 32]);
    await b.sync();
    const made: number[] = [];
    for (let step = 0; step < 5; step++) {
      // a step's tensors are new, of the sizes the last step's were: the pool hands back the same buffers
      const before = b.ctx.bindGroupsMade;
      const xv = Array.from({ length: 2 * 32 }, (_, i) => Math.sin(i + step));
      const x = b.fromValues(xv, [2, 32]);
      const h = F.linear(x, w);
      const y = F.add(h, h);
      const got = await y.read();
      made.push(b.ctx.bindGroupsMade - before);
      // y = 2·x·wᵀ, by hand, for this step's x
      for (let r = 0; r < 2; r++) {
        for (let n = 0; n < 64; n++) {
          let v = 0;
          for (let k = 0; k < 32; k++) v += 2 * xv[r * 32 + k]! * (((n * 32 + k) % 7) - 3) / 8;
          expect(got[r * 64 + n], `step ${step} y[${r}, ${n}]`).toBeCloseTo(v, 4);
        }
      }
      [x, h, y].forEach((t) => t.dispose());
      await b.sync();
    }
    expect(made[0]).toBeGreaterThan(0);
    expect(made.slice(2), `bind groups made per step: ${made}`).toEqual([0, 0, 0]);
    w.dispose();
  });
});
