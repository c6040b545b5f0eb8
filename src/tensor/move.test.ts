import { describe, expect, it } from 'vitest';
import { F, Tape } from '../autograd';
import { BackendMismatch, UnsupportedFeature } from '../errors';
import type { Backend } from './backend';
import { CpuBackend } from './cpu';
import { moveTensor } from './move';
import type { Tensor } from './tensor';

// Two CPU backends stand for two devices: a tensor of one is foreign to the other's ops.
const dev0 = new CpuBackend('f64');
const dev1 = new CpuBackend('f64');
const values = (t: Tensor) => Array.from((t.backend as CpuBackend).data(t));

describe('moveTensor', () => {
  it('copies values, shape and dtype to the other backend; the copy owns its storage', () => {
    const a = dev0.fromValues([0.1, -2.5, 1 / 3, 7], [2, 2]);
    const b = moveTensor(a, dev1);
    expect(b.backend).toBe(dev1);
    expect(b.shape).toEqual([2, 2]);
    expect(b.dtype).toBe('f32');
    expect(values(b)).toEqual([0.1, -2.5, 1 / 3, 7]); // f64 to f64: exact, not through f32 bytes
    (dev0.data(a) as Float64Array)[0] = 99;
    expect(values(b)[0]).toBe(0.1);
    a.dispose();
    expect(values(b)).toEqual([0.1, -2.5, 1 / 3, 7]);
  });

  it('on its own backend it is a view of the same storage', () => {
    const a = dev0.fromValues([1, 2, 3], [3]);
    const b = moveTensor(a, dev0);
    expect(b).not.toBe(a);
    (dev0.data(a) as Float64Array)[1] = 5;
    expect(values(b)).toEqual([1, 5, 3]);
  });

  it('goes through bytes between backends of different precision (f64 values rounded to f32), i32 and f16 included', () => {
    const f32 = new CpuBackend('f32');
    const x = moveTensor(dev0.fromValues([0.1, 3], [2]), f32);
    expect(Array.from(f32.data(x))).toEqual([Math.fround(0.1), 3]);
    const ids = moveTensor(f32.fromValues([3, -1, 70000], [3], 'i32'), dev0);
    expect(ids.dtype).toBe('i32');
    expect(values(ids)).toEqual([3, -1, 70000]);
    const half = moveTensor(f32.fromValues([1.5, -0.25], [2], 'f16'), dev1);
    expect(half.dtype).toBe('f16');
    expect(half.backend).toBe(dev1);
    return half.read().then((v) => expect(Array.from(v)).toEqual([1.5, -0.25]));
  });

  it('ops refuse a tensor of another backend, and name the way out', () => {
    const a = dev0.fromValues([1, 2], [2]);
    const b = dev1.fromValues([3, 4], [2]);
    expect(() => F.add(a, b)).toThrow(BackendMismatch);
    expect(() => F.add(a, b)).toThrow(/move it first/);
    expect(values(F.add(moveTensor(a, dev1), b))).toEqual([4, 6]);
  });

  it('a backend that reads back asynchronously (WebGPU) cannot be moved from: UnsupportedFeature', () => {
    const a = dev0.fromValues([1], [1]);
    const asyncOnly = {
      kind: 'webgpu', name: 'webgpu (stand-in)', fromValues: () => a, fromBytes: () => a, zeros: () => a,
      read: async () => new Float32Array(1), readBytes: async () => new Uint8Array(4), run: () => [a], reshape: () => a, view: () => a,
      release: () => {}, sync: async () => {},
    } as Backend;
    const t = { backend: asyncOnly, shape: [1], dtype: 'f32' } as unknown as Tensor;
    expect(() => moveTensor(t, dev1)).toThrow(UnsupportedFeature);
    expect(() => moveTensor(t, dev1)).toThrow(/read back asynchronously/);
  });
});

describe('F.moveTo', () => {
  it('gradients cross back: a two-backend graph has the one-backend graph gradients', async () => {
    // loss = sum(silu(W1 x) moved to dev1 · W2) with W1 on dev0 and W2 on dev1, against the same on dev0 alone
    const w1 = [0.3, -0.2, 0.5, 0.1, 0.7, -0.4];
    const w2 = [0.25, -0.5, 1.5];
    const x = [1, -2];
    const run = (second: Backend) => {
      const W1 = dev0.fromValues(w1, [3, 2]);
      const W2 = second.fromValues(w2, [3, 1]);
      W1.requiresGrad = true;
      W2.requiresGrad = true;
      const tape = new Tape();
      const loss = tape.run(() => {
        const h = F.silu(F.matmul(dev0.fromValues(x, [1, 2]), W1, { transB: true })); // [1, 3]
        return F.sum(F.matmul(F.moveTo(h, second), W2)); // [1, 1]
      });
      return { tape, loss, W1, W2 };
    };
    const one = run(dev0);
    const two = run(dev1);
    expect(two.loss.backend).toBe(dev1);
    expect(values(two.loss)).toEqual(values(one.loss));
    await one.tape.backward(one.loss);
    await two.tape.backward(two.loss);
    expect(two.W1.grad!.backend).toBe(dev0);
    expect(two.W2.grad!.backend).toBe(dev1);
    expect(values(two.W1.grad!)).toEqual(values(one.W1.grad!));
    expect(values(two.W2.grad!)).toEqual(values(one.W2.grad!));
    // and they are the analytic ones: dL/dW2 = h^T, dL/dW1[i] = w2[i] silu'(z_i) x
    const z = [0, 1, 2].map((i) => w1[2 * i] * x[0] + w1[2 * i + 1] * x[1]);
    const sig = z.map((v) => 1 / (1 + Math.exp(-v)));
    const h = z.map((v, i) => v * sig[i]);
    expect(values(two.W2.grad!).map((v, i) => v - h[i]).every((d) => Math.abs(d) < 1e-12)).toBe(true);
    const g1 = [0, 1, 2].flatMap((i) => x.map((xj) => w2[i] * sig[i] * (1 + z[i] * (1 - sig[i])) * xj));
    expect(values(two.W1.grad!).map((v, i) => v - g1[i]).every((d) => Math.abs(d) < 1e-12)).toBe(true);
    one.tape.dispose();
    two.tape.dispose();
  });
});

describe('F.clipGradNorm over gradients on two backends', () => {
  // each backend's norm comes back as f32 bytes (what GPUs hold): agreement to f32 precision
  it('clips by the global norm, as if they were on one backend (to f32 precision)', () => {
    const a = [3, -4, 0.5];
    const b = [12, 1, -2, 0.25];
    for (const maxNorm of [1, 5, 100]) {
      const one = [dev0.fromValues(a, [3]), dev0.fromValues(b, [4])];
      const two = [dev0.fromValues(a, [3]), dev1.fromValues(b, [4])];
      const n1 = F.clipGradNorm(one, maxNorm);
      const n2 = F.clipGradNorm(two, maxNorm);
      expect(n2.backend).toBe(dev0);
      const total = Math.hypot(...a, ...b);
      expect(values(n1)[0]).toBeCloseTo(total, 12);
      expect(Math.abs(values(n2)[0] / total - 1)).toBeLessThan(1e-7);
      const coef = Math.min(1, maxNorm / (total + 1e-6));
      for (let k = 0; k < 2; k++) {
        const want = [a, b][k].map((v) => v * coef);
        values(two[k]).forEach((v, i) => expect(Math.abs(v - want[i])).toBeLessThan(1e-7 * Math.abs(want[i]) + 1e-15));
        values(one[k]).forEach((v, i) => expect(v).toBeCloseTo(want[i], 12));
      }
    }
  });
});
