import { describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import { gradcheck } from '../../autograd/gradcheck';
import { ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { assertClose } from '../workbench/close';

const cpu = new CpuBackend('f32');
const f64 = new CpuBackend('f64');

describe('causal depthwise conv1d (CPU reference)', () => {
  it('computes HF Conv1d(groups=C, padding=K−1)[:T]: w[c, K−1] on the current position, zeros or the state before x', async () => {
    // two channels, K 3: channel 0 weights (1, 10, 100), channel 1 (−1, 0, 2)
    const x = cpu.fromValues([1, 2, 3, 4, 5, 6], [3, 2]);
    const w = cpu.fromValues([1, 10, 100, -1, 0, 2], [2, 3]);
    // channel 0: t0 = 100·1, t1 = 10·1 + 100·3, t2 = 1·1 + 10·3 + 100·5; channel 1: t0 = 2·2, t1 = 2·4, t2 = −1·2 + 2·6
    expect(Array.from(await F.causalConv1d(x, w).read())).toEqual([100, 4, 310, 8, 531, 10]);
    // a state of the two positions before: (7, 8) then (9, 11)
    const st = cpu.fromValues([7, 8, 9, 11], [2, 2]);
    expect(Array.from(await F.causalConv1d(x, w, st).read())).toEqual([7 + 90 + 100, -8 + 4, 9 + 10 + 300, -11 + 8, 531, 10]);
  });

  it('splitting a sequence and passing the last K − 1 rows as the state gives the whole sequence', async () => {
    const T = 9;
    const C = 5;
    const K = 4;
    const xv = Array.from({ length: T * C }, (_, i) => Math.sin(i));
    const w = cpu.fromValues(Array.from({ length: C * K }, (_, i) => Math.cos(i)), [C, K]);
    const whole = await F.causalConv1d(cpu.fromValues(xv, [T, C]), w).read();
    const a = cpu.fromValues(xv.slice(0, 6 * C), [6, C]);
    const b = cpu.fromValues(xv.slice(6 * C), [3, C]);
    const st = cpu.fromValues(xv.slice(3 * C, 6 * C), [3, C]);
    const parts = [...(await F.causalConv1d(a, w).read()), ...(await F.causalConv1d(b, w, st).read())];
    assertClose(parts, whole, { atol: 1e-6, rtol: 1e-6 }, 'split');
  });

  it('passes gradcheck (f64) for x', async () => {
    const x = f64.fromValues(Array.from({ length: 7 * 3 }, (_, i) => Math.sin(1.3 * i)), [7, 3]);
    x.requiresGrad = true;
    const w = f64.fromValues(Array.from({ length: 3 * 4 }, (_, i) => Math.cos(0.7 * i)), [3, 4]);
    const r = await gradcheck((t) => F.causalConv1d(t, w), [x]);
    expect(r.ok, r.message).toBe(true);
  });

  it('passes gradcheck (f64) for w, from zeros and from a state', async () => {
    const x = f64.fromValues(Array.from({ length: 5 * 3 }, (_, i) => Math.sin(1.3 * i)), [5, 3]);
    const w = f64.fromValues(Array.from({ length: 3 * 4 }, (_, i) => Math.cos(0.7 * i)), [3, 4]);
    w.requiresGrad = true;
    const st = f64.fromValues(Array.from({ length: 3 * 3 }, (_, i) => Math.cos(2.1 * i + 1)), [3, 3]);
    for (const state of [undefined, st]) {
      const r = await gradcheck((t) => F.causalConv1d(x, t, state), [w]);
      expect(r.ok, r.message).toBe(true);
    }
  });

  it('refuses wrong shapes and a trainable state by name', () => {
    const x = cpu.fromValues([1, 2, 3, 4], [2, 2]);
    expect(() => F.causalConv1d(x, cpu.fromValues([1, 2, 3], [3, 1]))).toThrow(ShapeMismatch);
    expect(() => F.causalConv1d(x, cpu.fromValues([1, 2, 3, 4], [2, 2]), cpu.fromValues([1, 2, 3, 4], [2, 2]))).toThrow(
      /state has rows \(kernel size − 1\) 2, expected 1/,
    );
    const st = cpu.fromValues([1, 2], [1, 2]);
    st.requiresGrad = true;
    expect(() => F.causalConv1d(x, cpu.fromValues([1, 2, 3, 4], [2, 2]), st)).toThrow(/a cached state is not trained through/);
  });
});
