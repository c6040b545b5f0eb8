/**
 * The rollout read-back term (src/train/inner.ts rolloutSampleStep): the agent's own latent rollout, read
 * back with grad, scored on the gold span. Checked on CpuBackend f64: its value against the cross-entropy of
 * lm_head over `latentRollout`'s states (the inference path, with a KV cache), and its gradient into the
 * link against central finite differences of the same loss with H_roll held fixed.
 */
import { describe, expect, it } from 'vitest';
import { F, noGrad } from '../../src/autograd';
import { AdamW } from '../../src/autograd/ops/optim';
import { InvalidArgument } from '../../src/errors';
import { InnerLink } from '../../src/mas/links';
import { latentRollout } from '../../src/mas/rollout';
import type { Decoder } from '../../src/model/decoder';
import { CpuBackend } from '../../src/tensor/cpu';
import type { Tensor } from '../../src/tensor/tensor';
import { innerPairs, rolloutSampleStep, type InnerExample } from '../../src/train/inner';
import { checkLinkGrads, meanCrossEntropy, readBackSetup } from './fixtures';

const be = new CpuBackend('f64');

const setup = () => readBackSetup(be, { linkSeed: 13, rowSeed: 21, T: 13, P: 6 });

/** Mean over k of CE(lm_head(H[k]), ids[P + k]) in f64 in JS. */
async function meanCe(decoder: Decoder, H: Tensor, gold: readonly number[]): Promise<number> {
  const logits = await noGrad(() => F.linear(H, decoder.weights.lmHead)).read();
  return meanCrossEntropy(logits, decoder.config.vocabSize, gold);
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
    const opt = new AdamW([link.params]);
    opt.zeroGrad();
    const l = await rolloutSampleStep(decoder, link, ex, 1, innerPairs(ex), { hidden: H });
    expect(Math.abs((await l.read())[0]! - (await fixedReference(decoder, link, ex, P, H)))).toBeLessThan(1e-6);
    l.dispose();
    opt.gather();
    const checked = await checkLinkGrads(
      link,
      ['proj1.weight', 'proj2.weight', 'proj2.bias', 'post_ln.weight'],
      () => fixedReference(decoder, link, ex, P, H),
      { seed: 3 },
    );
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
