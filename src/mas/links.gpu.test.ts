/**
 * Links on Node WebGPU (Dawn on lavapipe) against the CPU backend in f64: the output and every gradient (input and
 * parameters) of a random inner and outer link. The CPU side is held to torch and a plain-JS reference in links.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Tape } from '../autograd';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import type { Tensor } from '../tensor/tensor';
import { Rng } from '../util/rng';
import { compare } from '../../test/golden/check';
import { gpuBackend } from '../../test/util/gpu';
import { InnerLink, type LinkTensor, OuterLink, innerLinkShapes, outerLinkShapes } from './links';

/** Values at the backend's own precision (f64 on CpuBackend('f64')). */
const vals = async (t: Tensor): Promise<Float64Array> =>
  t.backend instanceof CpuBackend ? Float64Array.from(t.backend.data(t) as Float64Array) : Float64Array.from(await t.read());

/** A random state dict (LN params away from 1/0 so that they matter). */
const randomState = (shapes: [string, number[]][], rng: Rng): Map<string, LinkTensor> =>
  new Map(shapes.map(([name, shape]) => [name, { shape, data: rng.uniforms(shape.reduce((a, b) => a * b, 1), -0.8, 0.8) }]));

/** The output, the input gradient and every parameter gradient of one forward and backward, by name. */
async function forwardBackward(b: Backend, make: (b: Backend) => InnerLink | OuterLink): Promise<Map<string, Float64Array>> {
  const link = make(b);
  const x = b.fromValues(new Rng(8).uniforms(7 * link.dIn, -2, 2), [7, link.dIn]);
  x.requiresGrad = true;
  const seedT = b.fromValues(new Rng(9).uniforms(7 * link.dOut), [7, link.dOut]);
  const tape = new Tape();
  const y = tape.run(() => link.forward(x));
  await tape.backward(y, seedT);
  const out = new Map([['y', await vals(y)], ['x', await vals(x.grad!)]]);
  for (const e of link.params.entries) out.set(e.name, await vals(link.params.get(e.name).grad!));
  tape.dispose();
  [x, seedT].forEach((t) => t.dispose());
  link.dispose();
  return out;
}

async function expectParity(make: (b: Backend) => InnerLink | OuterLink) {
  const want = await forwardBackward(new CpuBackend('f64'), make);
  const got = await forwardBackward(await gpuBackend(), make);
  const reports = compare([...want].map(([label, expected]) => ({ label, expected, actual: got.get(label)! })), { atol: 1e-4, rtol: 1e-4 });
  expect(reports.filter((r) => !r.ok).map((r) => r.message)).toEqual([]);
}

describe('GPU parity (node WebGPU)', () => {
  it('inner ln_res_adapter (d 17): output and every gradient', async () => {
    const s = randomState(innerLinkShapes('ln_res_adapter', 17), new Rng(21));
    await expectParity((b) => InnerLink.fromStateDict(b, s));
  });
  it('outer outer_ln_res_adapter (17 → 12): output and every gradient', async () => {
    const s = randomState(outerLinkShapes('outer_ln_res_adapter', 17, 12), new Rng(22));
    await expectParity((b) => OuterLink.fromStateDict(b, s));
  });
});
