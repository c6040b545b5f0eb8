/**
 * Memory discipline on the GPU: a forward + backward of every differentiable op, then tape.dispose()
 * and disposing outputs and gradients, returns the pool's live bytes to where they were. A training
 * loop that leaks one buffer a step runs out of GPU memory after a few thousand steps.
 */
import { describe, expect, it } from 'vitest';
import { F, FlatParams, Tape } from '../src/autograd';
import { ropeInvFreq } from '../src/kernels/rope';
import type { Tensor } from '../src/tensor/tensor';
import { tidy } from '../src/tensor/scope';
import type { WebGpuBackend } from '../src/tensor/webgpu';
import { Rng } from '../src/util/rng';
import { freshGpuBackend } from './util/gpu';

type Make = (gpu: WebGpuBackend, rng: Rng) => { inputs: Tensor[]; fn: (...t: Tensor[]) => Tensor };

const f32 = (gpu: WebGpuBackend, rng: Rng, shape: number[], grad = true) => {
  const t = gpu.fromValues(rng.normals(shape.reduce((a, b) => a * b, 1)), shape);
  t.requiresGrad = grad;
  return t;
};

const OPS: [string, Make][] = [
  ['add broadcast', (g, r) => ({ inputs: [f32(g, r, [5, 7]), f32(g, r, [7])], fn: F.add })],
  ['mul fan-out', (g, r) => ({ inputs: [f32(g, r, [5, 7])], fn: (a) => F.mul(a, a) })],
  ['linear with bias', (g, r) => ({ inputs: [f32(g, r, [3, 32]), f32(g, r, [16, 32]), f32(g, r, [16])], fn: F.linear })],
  [
    'linear, frozen q4_0 weight',
    (g, r) => ({
      inputs: [f32(g, r, [3, 32]), g.fromValues(r.normals(16 * 32), [16, 32], 'q4_0')],
      fn: (x, w) => F.linear(x, w),
    }),
  ],
  [
    'matmul transA transB',
    (g, r) => ({ inputs: [f32(g, r, [6, 4]), f32(g, r, [5, 6])], fn: (a, b) => F.matmul(a, b, { transA: true, transB: true }) }),
  ],
  ['embedding', (g, r) => ({ inputs: [g.fromValues([1, 3, 1, 0], [4], 'i32'), f32(g, r, [5, 8])], fn: F.embedding })],
  ['cast f16 round trip', (g, r) => ({ inputs: [f32(g, r, [4, 6])], fn: (x) => F.cast(F.cast(x, 'f16'), 'f32') })],
  ['rmsNorm', (g, r) => ({ inputs: [f32(g, r, [4, 16]), f32(g, r, [16])], fn: (x, w) => F.rmsNorm(x, w, 1e-6) })],
  ['layerNorm', (g, r) => ({ inputs: [f32(g, r, [4, 16]), f32(g, r, [16]), f32(g, r, [16])], fn: (x, a, b) => F.layerNorm(x, a, b) })],
  [
    'gelu, silu, geluTanh, swiglu',
    (g, r) => ({
      inputs: [f32(g, r, [4, 8]), f32(g, r, [4, 8])],
      fn: (a, b) => F.swiglu(F.gelu(a), F.add(F.silu(b), F.geluTanh(a))),
    }),
  ],
  [
    'rope',
    (g, r) => ({
      inputs: [f32(g, r, [3, 2, 8]), g.fromValues([0, 5, 9], [3], 'i32')],
      fn: (x, p) => F.rope(x, p, ropeInvFreq({ theta: 10000, headDim: 8 })),
    }),
  ],
  [
    'attention GQA with window',
    (g, r) => ({
      inputs: [f32(g, r, [4, 4, 8]), f32(g, r, [6, 2, 8]), f32(g, r, [6, 2, 8])],
      fn: (q, k, v) => F.attention(q, k, v, { window: 3 }),
    }),
  ],
  ['softmax and logSoftmax', (g, r) => ({ inputs: [f32(g, r, [3, 50])], fn: (x) => F.add(F.softmax(x), F.logSoftmax(x)) })],
  [
    'crossEntropy',
    (g, r) => ({ inputs: [f32(g, r, [4, 50]), g.fromValues([3, -100, 49, 0], [4], 'i32')], fn: (l, y) => F.crossEntropy(l, y) }),
  ],
  [
    'cosineLoss + mseLoss with mask',
    (g, r) => ({
      inputs: [f32(g, r, [4, 16]), f32(g, r, [4, 16], false), g.fromValues([1, 0, 1, 1], [4])],
      fn: (a, b, m) => F.add(F.cosineLoss(a, b, m), F.mseLoss(a, b, m)),
    }),
  ],
  [
    'reductions',
    (g, r) => ({
      inputs: [f32(g, r, [6, 9])],
      fn: (x) => F.add(F.add(F.sum(x), F.mean(x)), F.add(F.sumSquares(x), F.sum(F.meanLastDim(x)))),
    }),
  ],
];

describe('no GPU memory leaks', () => {
  for (const [name, make] of OPS) {
    it(`${name}: forward + backward + dispose returns every buffer`, async () => {
      const gpu = await freshGpuBackend();
      const { inputs, fn } = make(gpu, new Rng(5));
      const before = gpu.ctx.pool.liveBytes;
      for (let step = 0; step < 2; step++) {
        tidy(() => fn(...inputs)).dispose(); // inference: no tape, intermediates freed by tidy
        const tape = new Tape();
        const y = tape.run(() => fn(...inputs));
        const seed = gpu.fromValues(new Float32Array(y.numel).fill(0.5), y.shape);
        await tape.backward(y, seed);
        seed.dispose();
        tape.dispose();
        expect(inputs.some((t) => t.grad !== null)).toBe(true);
        for (const t of inputs) t.grad?.dispose(), (t.grad = null);
        await gpu.sync();
        expect(gpu.ctx.pool.liveBytes, `after step ${step}`).toBe(before);
      }
      gpu.ctx.destroy();
    });
  }

  it('AdamW steps over FlatParams allocate nothing that stays', async () => {
    const gpu = await freshGpuBackend();
    const rng = new Rng(9);
    const fp = new FlatParams(gpu, [
      { name: 'proj1.weight', shape: [8, 8], init: rng.normals(64) },
      { name: 'proj1.bias', shape: [8], init: rng.normals(8) },
    ]);
    const opt = new F.AdamW([fp]);
    const x = f32(gpu, rng, [3, 8], false);
    let before = -1;
    for (let step = 0; step < 3; step++) {
      opt.zeroGrad();
      const tape = new Tape();
      const loss = tape.run(() => F.mean(F.linear(x, fp.get('proj1.weight'), fp.get('proj1.bias'))));
      await tape.backward(loss);
      tape.dispose();
      opt.gather();
      opt.step(1e-3).dispose();
      await gpu.sync();
      if (step === 0) before = gpu.ctx.pool.liveBytes;
      else expect(gpu.ctx.pool.liveBytes, `after step ${step}`).toBe(before);
    }
    gpu.ctx.destroy();
  });
});
