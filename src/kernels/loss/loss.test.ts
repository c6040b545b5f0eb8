import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import { TOL, assertClose } from '../workbench/close';
import { Rng } from '../../util/rng';
// torch 1.13 float64 numbers, made by scripts/golden/losses.py (inputs included)
import golden from './golden/losses.json';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const GOLD = { atol: 1e-12, rtol: 1e-10 };
const f64Of = (t: Tensor) => f64.data(t) as Float64Array;

/** Loss value and the gradients of `inputs` (made trainable), all on the f64 backend. */
async function lossAndGrads(fn: () => Tensor, inputs: Tensor[]): Promise<[number, Float64Array[]]> {
  for (const t of inputs) {
    t.requiresGrad = true;
    t.grad?.dispose();
    t.grad = null;
  }
  const tape = new Tape();
  const loss = tape.run(fn);
  const value = f64Of(loss)[0];
  await tape.backward(loss);
  tape.dispose();
  return [value, inputs.map((t) => f64Of(t.grad!))];
}


describe('cross-entropy (CPU reference)', () => {
  it('matches a hand-computed case with an ignored row', async () => {
    const x = f64.fromValues([0, 0, 0, 9, 9, 9, 0, Math.log(3), 0], [3, 3]);
    const labels = f64.fromValues([1, -100, 0], [3], 'i32');
    const [loss, [g]] = await lossAndGrads(() => F.crossEntropy(x, labels), [x]);
    expect(loss).toBeCloseTo((Math.log(3) + Math.log(5)) / 2, 12);
    const want = [1 / 3, 1 / 3 - 1, 1 / 3, 0, 0, 0, 1 / 5 - 1, 3 / 5, 1 / 5].map((v) => v / 2);
    assertClose(g, want, GOLD, 'dlogits');
  });

  it('matches torch 1.13 (loss and gradient, also for logits in the thousands)', async () => {
    const c = golden.cross_entropy;
    const labels = f64.fromValues(c.labels, [4], 'i32');
    for (const [vals, loss, grad] of [[c.logits, c.loss, c.grad], [c.big_logits, c.big_loss, c.big_grad]] as const) {
      const x = f64.fromValues(vals, c.shape);
      const [l, [g]] = await lossAndGrads(() => F.crossEntropy(x, labels), [x]);
      assertClose([l], [loss], GOLD, 'loss');
      assertClose(g, grad, GOLD, 'grad');
    }
  });

  it('gives 0 and zero gradients when no row is labelled (torch gives NaN)', async () => {
    expect(golden.cross_entropy.all_ignored_torch).toBe('nan');
    const x = f64.fromValues([1, 2, 3, 4], [2, 2]);
    const [l, [g]] = await lossAndGrads(() => F.crossEntropy(x, f64.fromValues([-100, -100], [2], 'i32')), [x]);
    expect(l).toBe(0);
    expect([...g]).toEqual([0, 0, 0, 0]);
  });

  it('honours another ignore index and passes gradcheck', async () => {
    const rng = new Rng(11);
    const x = f64.fromValues(rng.normals(4 * 7), [2, 2, 7]);
    const labels = f64.fromValues([3, -1, 6, 0], [2, 2], 'i32');
    const l1 = (await F.crossEntropy(x, labels, { ignoreIndex: -1 }).read())[0];
    const only = f64.fromValues([3, 6, 0], [3], 'i32');
    const x3 = f64.fromValues([...f64Of(x).slice(0, 7), ...f64Of(x).slice(14)], [3, 7]);
    expect(l1).toBeCloseTo((await F.crossEntropy(x3, only).read())[0], 6);
    x.requiresGrad = true;
    const r = await gradcheck((t) => F.crossEntropy(t, labels, { ignoreIndex: -1 }), [x]);
    expect(r.ok, r.message).toBe(true);
  });

  it('rejects labels out of range, non-i32 labels and mismatched shapes', () => {
    const x = cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => F.crossEntropy(x, cpu.fromValues([0, 3], [2], 'i32'))).toThrow(InvalidArgument);
    expect(() => F.crossEntropy(x, cpu.fromValues([-1, 0], [2], 'i32'))).toThrow(/outside \[0, 3\)/);
    expect(() => F.crossEntropy(x, cpu.fromValues([0, 1], [2]))).toThrow(DTypeMismatch);
    expect(() => F.crossEntropy(x, cpu.fromValues([0, 1, 2], [3], 'i32'))).toThrow(ShapeMismatch);
  });
});

describe('cosine and MSE losses (CPU reference)', () => {
  const p = golden.pair;
  const pairInputs = () => [f64.fromValues(p.a, p.shape), f64.fromValues(p.b, p.shape)];

  it('reproduces torch 1.13 cosine_similarity eps handling, values and gradients', async () => {
    // rows 0-3 sit below eps = 1e-8 in norm: torch clamps |a|^2 and |b|^2 separately at eps^2
    // (row 1 gives 0.01, where clamping the product would give 1e-10), and its gradient treats
    // the clamp as the identity; row 4 is ordinary (0.96).
    const c = golden.cosine_similarity;
    expect(c.sim.slice(1, 2)).toEqual([0.010000000000000002]);
    const [rows, d] = c.shape;
    for (let r = 0; r < rows; r++) {
      const a = f64.fromValues(c.a, c.shape);
      const b = f64.fromValues(c.b, c.shape);
      const mask = f64.fromValues(Array.from({ length: rows }, (_, i) => (i === r ? 1 : 0)), [rows]);
      const [l, [ga, gb]] = await lossAndGrads(() => F.cosineLoss(a, b, mask), [a, b]);
      assertClose([1 - l], [c.sim[r]], GOLD, `sim row ${r}`);
      const neg = (v: number[]) => v.slice(r * d, r * d + d).map((x) => -x);
      assertClose(ga.slice(r * d, r * d + d), neg(c.grad_a_of_sum), { atol: 1e-6, rtol: 1e-10 }, `grad a row ${r}`);
      assertClose(gb.slice(r * d, r * d + d), neg(c.grad_b_of_sum), { atol: 1e-6, rtol: 1e-10 }, `grad b row ${r}`);
    }
  });

  it('matches torch 1.13 for the masked and unmasked means', async () => {
    const mask = f64.fromValues(p.mask, [5]);
    const [a, b] = pairInputs();
    let [l, [ga, gb]] = await lossAndGrads(() => F.cosineLoss(a, b, mask), [a, b]);
    assertClose([l], [p.cos_loss], GOLD, 'cos loss');
    assertClose(ga, p.cos_grad_a, GOLD, 'cos grad a');
    assertClose(gb, p.cos_grad_b, GOLD, 'cos grad b');
    [l, [ga, gb]] = await lossAndGrads(() => F.mseLoss(a, b, mask), [a, b]);
    assertClose([l], [p.mse_loss], GOLD, 'mse loss');
    assertClose(ga, p.mse_grad_a, GOLD, 'mse grad a');
    assertClose(gb, p.mse_grad_b, GOLD, 'mse grad b');
    assertClose([(await F.cosineLoss(a, b).read())[0]], [p.cos_loss_unmasked], TOL.f32, 'cos unmasked');
    assertClose([(await F.mseLoss(a, b).read())[0]], [p.mse_loss_unmasked], TOL.f32, 'mse unmasked');
  });

  it('gives 0 and zero gradients for an all-zero mask', async () => {
    const [a, b] = pairInputs();
    const zero = f64.fromValues([0, 0, 0, 0, 0], [5]);
    for (const fn of [F.cosineLoss, F.mseLoss]) {
      const [l, [ga]] = await lossAndGrads(() => fn(a, b, zero), [a, b]);
      expect(l).toBe(0);
      expect(ga.every((v) => v === 0)).toBe(true);
    }
  });

  it('passes gradcheck for a and b, with and without a weighted mask', async () => {
    const rng = new Rng(4);
    const a = f64.fromValues(rng.normals(2 * 3 * 6), [2, 3, 6]);
    const b = f64.fromValues(rng.normals(2 * 3 * 6), [2, 3, 6]);
    const mask = f64.fromValues([1, 0, 1, 0.5, 1, 1], [2, 3]);
    a.requiresGrad = b.requiresGrad = true;
    for (const [name, fn] of [['cosine', F.cosineLoss], ['mse', F.mseLoss]] as const) {
      for (const m of [mask, undefined]) {
        const r = await gradcheck((x, y) => fn(x, y, m), [a, b]);
        expect(r.ok, `${name} mask ${!!m}\n${r.message}`).toBe(true);
      }
    }
    b.requiresGrad = false; // a frozen target (the embedding) gets no gradient
    b.grad?.dispose();
    b.grad = null;
    const [, [ga]] = await lossAndGrads(() => F.cosineLoss(a, b, mask), [a]);
    expect(ga.length).toBe(36);
    expect(b.grad).toBeNull();
  });

  it('rejects mismatched shapes, a wrong-length mask and non-f32 inputs', () => {
    const a = cpu.fromValues([1, 2, 3, 4], [2, 2]);
    for (const fn of [F.cosineLoss, F.mseLoss]) {
      expect(() => fn(a, cpu.fromValues([1, 2], [1, 2]))).toThrow(ShapeMismatch);
      expect(() => fn(a, a, cpu.fromValues([1, 1, 1], [3]))).toThrow(/one mask value per row/);
      expect(() => fn(a, cpu.fromValues([1, 2, 3, 4], [2, 2], 'i32'))).toThrow(DTypeMismatch);
    }
  });
});
