/**
 * The rollout read-back term (src/train/inner.ts rolloutSampleStep): the agent's own latent rollout, read
 * back with grad, scored on the gold span. Checked on CpuBackend f64: its value against the cross-entropy of
 * lm_head over `latentRollout`'s states (the inference path, with a KV cache), and its gradient into the
 * link against central finite differences of the same loss with H_roll held fixed.
 */
import { describe, expect, it } from 'vitest';
import { F, noGrad } from '../../src/autograd';
import { InvalidArgument } from '../../src/errors';
import { InnerLink } from '../../src/mas/links';
import { latentRollout } from '../../src/mas/rollout';
import { loadDecoderFromDir } from '../../src/model';
import type { Decoder } from '../../src/model/decoder';
import { CpuBackend } from '../../src/tensor/cpu';
import type { Tensor } from '../../src/tensor/tensor';
import { Rng } from '../../src/testing/rng';
import { LinkOptimizer } from '../../src/train/optim';
import { innerPairs, rolloutSampleStep, type InnerExample } from '../../src/train/inner';

const be = new CpuBackend('f64');

async function setup() {
  const decoder = await loadDecoderFromDir('models/tiny/qwen3-tiny', be);
  const link = InnerLink.create(be, decoder.config.hidden, { seed: 13, name: 'rollout' });
  const rng = new Rng(21);
  const T = 13;
  const P = 6;
  const ex: InnerExample = {
    ids: Array.from({ length: T }, () => rng.int(decoder.config.vocabSize)),
    lossMask: Array.from({ length: T }, (_, t) => (t >= P ? 1 : 0)),
  };
  return { decoder, link, ex, P, T };
}

/** Mean over k of CE(lm_head(H[k]), ids[P + k]) in f64 in JS. */
async function meanCe(decoder: Decoder, H: Tensor, gold: readonly number[]): Promise<number> {
  const logits = await noGrad(() => F.linear(H, decoder.weights.lmHead)).read();
  const V = decoder.config.vocabSize;
  let sum = 0;
  gold.forEach((g, k) => {
    const row = Array.from(logits.slice(k * V, (k + 1) * V));
    const max = Math.max(...row);
    sum += max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0)) - row[g]!;
  });
  return sum / gold.length;
}

/** The loss with H_roll fixed, from the model's parts: prompt ⊕ Inner(H[0..m-2]) read, logits at P-1..T-2. */
async function fixedReference(decoder: Decoder, link: InnerLink, ex: InnerExample, P: number, H: Tensor): Promise<number> {
  const T = ex.ids.length;
  const out = noGrad(() => {
    const prefix = decoder.embed(be.fromValues(ex.ids.slice(0, P), [P], 'i32'));
    const x = F.concatRows([prefix, link.forward(F.sliceRows(H, 0, T - P - 1))]);
    return decoder.forward({ inputsEmbeds: x }).hidden;
  });
  const Hs = noGrad(() => F.sliceRows(out, P - 1, T - P));
  return meanCe(decoder, Hs, ex.ids.slice(P));
}

describe('inner loop: the rollout read-back term', () => {
  it('is the cross-entropy of the rollout the system runs, scaled by weight and batch share', async () => {
    const { decoder, link, ex, P, T } = await setup();
    const H = await latentRollout(decoder, link, [ex.ids.slice(0, P)], T - P);
    const want = await meanCe(decoder, H, ex.ids.slice(P));
    expect(want).toBeGreaterThan(1); // random ids: far from predicted
    const pairs = innerPairs(ex);
    const run = async (weight: number, batchPairs: number) => {
      const l = await rolloutSampleStep(decoder, link, ex, weight, batchPairs);
      const v = (await l.read())[0]!;
      l.dispose();
      return v;
    };
    expect(Math.abs((await run(1, pairs)) - want)).toBeLessThan(1e-6 * want);
    expect(Math.abs((await run(0.5, 4 * pairs)) - want / 8)).toBeLessThan(1e-6 * want);
    // a different link gives a different rollout and a different loss: the term follows the rollout
    const other = InnerLink.create(be, decoder.config.hidden, { seed: 14, name: 'other' });
    const H2 = await latentRollout(decoder, other, [ex.ids.slice(0, P)], T - P);
    const want2 = await meanCe(decoder, H2, ex.ids.slice(P));
    const l2 = await rolloutSampleStep(decoder, other, ex, 1, pairs);
    expect(Math.abs((await l2.read())[0]! - want2)).toBeLessThan(1e-6 * want2);
    expect(Math.abs(want2 - want)).toBeGreaterThan(1e-3);
    for (const t of [H, H2, l2]) t.dispose();
    other.dispose();
    link.dispose();
    decoder.dispose();
  }, 60_000);

  it('reaches the link: gradients match finite differences with H_roll held fixed', async () => {
    const { decoder, link, ex, P, T } = await setup();
    const H = await latentRollout(decoder, link, [ex.ids.slice(0, P)], T - P);
    const opt = new LinkOptimizer([link.params]);
    opt.zeroGrad();
    const l = await rolloutSampleStep(decoder, link, ex, 1, innerPairs(ex), { hidden: H });
    expect(Math.abs((await l.read())[0]! - (await fixedReference(decoder, link, ex, P, H)))).toBeLessThan(1e-6);
    l.dispose();
    opt.gather();
    const grads = await link.params.export('grad');
    const values = await link.params.export('data');
    const rng = new Rng(3);
    const eps = 1e-2;
    let checked = 0;
    for (const name of ['proj1.weight', 'proj2.weight', 'proj2.bias', 'post_ln.weight']) {
      const g = grads.get(name)!;
      for (let k = 0; k < 3; k++) {
        const i = rng.int(g.length);
        const at = (delta: number) => {
          const v = Float64Array.from(values.get(name)!);
          v[i] += delta;
          link.params.import(new Map([[name, v]]), { partial: true });
        };
        at(eps);
        const up = await fixedReference(decoder, link, ex, P, H);
        at(-eps);
        const down = await fixedReference(decoder, link, ex, P, H);
        at(0);
        const fd = (up - down) / (2 * eps);
        expect(Math.abs(g[i]! - fd), `${name}[${i}]: ${g[i]} vs ${fd}`).toBeLessThan(5e-4 * Math.abs(fd) + 5e-5);
        checked++;
      }
    }
    expect(checked).toBe(12);
    H.dispose();
    link.dispose();
    decoder.dispose();
  }, 120_000);

  it('names bad input: a sample without one closing span, an H_roll of the wrong shape', async () => {
    const { decoder, link, ex, P, T } = await setup();
    const broken: InnerExample = { ids: ex.ids, lossMask: ex.lossMask.map((m, t) => (t === T - 1 ? 0 : m)) };
    await expect(rolloutSampleStep(decoder, link, broken, 1, innerPairs(broken))).rejects.toThrow(InvalidArgument);
    const H = be.zeros([T - P - 1, decoder.config.hidden]);
    await expect(rolloutSampleStep(decoder, link, ex, 1, innerPairs(ex), { hidden: H })).rejects.toThrow(/H_roll must be \[7, /);
    H.dispose();
    link.dispose();
    decoder.dispose();
  }, 60_000);
});
