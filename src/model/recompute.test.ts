/**
 * Activation recomputation (ForwardInput.recompute, autograd/recompute.ts): the same loss and the same
 * gradients, into every weight and into the input embeddings, as the recorded forward, on CpuBackend f64;
 * and the tape keeps a fraction of the activations.
 */
import { describe, expect, it } from 'vitest';
import { F, Tape, noGrad, recompute } from '../autograd';
import { CpuBackend } from '../tensor/cpu';
import type { Tensor } from '../tensor/tensor';
import { Rng } from '../util/rng';
import { FAMILIES } from './config';
import { tinyConfig, tinyTensors } from '../testing/model';
import { createTrainableDecoder } from './trainable';

const cpu = new CpuBackend('f64');
const data = (t: Tensor) => Float64Array.from(cpu.data(t) as Float64Array);

/** Elements a tape holds for backward: every recorded output and saved tensor. */
const held = (tape: Tape) => tape.nodes.reduce((n, node) => n + [...node.outputs, ...node.saved].reduce((m, t) => m + t.numel, 0), 0);

function setup(family: (typeof FAMILIES)[number]) {
  const config = tinyConfig(family, { num_hidden_layers: 3 });
  const { decoder, params } = createTrainableDecoder(config, cpu, { seed: 3 });
  params.import(new Map([...tinyTensors(config, 5)].map(([n, t]) => [n, t.values])));
  const rng = new Rng(17);
  const T = 9;
  const x = cpu.fromValues(Array.from({ length: T * config.hidden }, () => rng.normal() * 0.5), [T, config.hidden]);
  x.requiresGrad = true;
  const labels = cpu.fromValues(Array.from({ length: T }, (_, t) => (t === 2 ? -100 : rng.int(config.vocabSize))), [T], 'i32');
  return { config, decoder, params, x, labels };
}

describe.each(FAMILIES)('activation recomputation, %s', (family) => {
  it('gives the recorded forward\'s loss and gradients, holding fewer activations', async () => {
    const { decoder, params, x, labels } = setup(family);
    const run = async (recompute: boolean) => {
      params.zeroGrad();
      x.grad?.dispose();
      x.grad = null;
      const tape = new Tape();
      const loss = tape.run(() => F.crossEntropy(decoder.forward({ inputsEmbeds: x, logits: 'all', recompute }).logits!, labels));
      const kept = held(tape);
      await tape.backward(loss);
      const value = data(loss)[0]!;
      tape.dispose();
      params.gatherGrads();
      return { value, kept, grad: data(params.grad), xGrad: data(x.grad!) };
    };
    const plain = await run(false);
    const re = await run(true);
    expect(re.value).toBe(plain.value);
    let worst = 0;
    let scale = 0;
    plain.grad.forEach((g, i) => {
      worst = Math.max(worst, Math.abs(g - re.grad[i]!));
      scale = Math.max(scale, Math.abs(g));
    });
    expect(scale).toBeGreaterThan(1e-3);
    expect(worst).toBeLessThan(1e-12 * Math.max(1, scale));
    plain.xGrad.forEach((g, i) => expect(Math.abs(g - re.xGrad[i]!)).toBeLessThan(1e-12));
    // three layers' activations vs their inputs: the recorded forward keeps several times more
    expect(re.kept * 3).toBeLessThan(plain.kept);
    params.dispose();
    decoder.dispose();
  }, 60_000);
});

describe('recompute', () => {
  it('records when only the params it reads train, and passes frozen inputs through untouched', async () => {
    const w = cpu.fromValues([0.5, -1, 2, 0.25], [2, 2]);
    w.requiresGrad = true;
    const x = cpu.fromValues([1, 2, 3, 4, 5, 6], [3, 2]);
    const f = (t: Tensor) => F.swiglu(F.linear(t, w), F.linear(t, w));
    const grads = async (wrap: boolean) => {
      w.grad = null;
      const tape = new Tape();
      const y = tape.run(() => F.sum(wrap ? recompute(f, [x], [w]) : f(x)));
      await tape.backward(y);
      const g = data(w.grad!);
      tape.dispose();
      return g;
    };
    const want = await grads(false);
    expect(Array.from(await grads(true))).toEqual(Array.from(want));
    expect(want.some((v) => v !== 0)).toBe(true);
    // nothing trains: it is the plain function, recorded nowhere
    w.requiresGrad = false;
    const tape = new Tape();
    tape.run(() => recompute(f, [x], [w]));
    expect(tape.nodes).toHaveLength(0);
    tape.dispose();
    noGrad(() => expect(data(recompute(f, [x], [w]))).toEqual(data(f(x))));
  });
});
