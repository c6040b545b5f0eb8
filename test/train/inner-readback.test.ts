/**
 * The inner loop's read-back term (`--adapter_ce_weight`, src/train/inner.ts): the agent reads its assistant
 * span as Inner(Hs[t]) rows and is scored on the gold tokens. Checked on CpuBackend f64 against a reference
 * assembled here from the model's parts (which rows are replaced, which labels count, cross-entropy in f64 from
 * the logits), and its gradient into the link against central finite differences.
 */
import { describe, expect, it } from 'vitest';
import { F, noGrad } from '../../src/autograd';
import { AdamW } from '../../src/autograd/ops/optim';
import { InvalidArgument } from '../../src/errors';
import { InnerLink } from '../../src/mas/links';
import type { Decoder } from '../../src/model/decoder';
import { CpuBackend } from '../../src/tensor/cpu';
import { innerPairs, innerSampleStep, type InnerExample } from '../../src/train/inner';
import { checkLinkGrads, meanCrossEntropy, readBackSetup } from './fixtures';

const be = new CpuBackend('f64');

const setup = () => readBackSetup(be, { linkSeed: 11, rowSeed: 5, T: 12, P: 5 });

/** mean over t = P..T-2 of CE(logits_t, ids[t+1]), the span read as Inner(Hs[P-1..T-2]); f64 in JS. */
async function reference(decoder: Decoder, link: InnerLink, ex: InnerExample, P: number): Promise<number> {
  const T = ex.ids.length;
  const logits = await noGrad(async () => {
    const ids = be.fromValues(ex.ids, [T], 'i32');
    const hidden = decoder.forward({ inputIds: ids }).hidden;
    const pred = link.forward(hidden);
    const rows = [];
    for (let t = 0; t < T; t++) rows.push(t < P ? decoder.embed(be.fromValues([ex.ids[t]!], [1], 'i32')) : F.sliceRows(pred, t - 1, 1));
    const out = decoder.forward({ inputsEmbeds: F.concatRows(rows), logits: 'all' });
    return out.logits!.read();
  });
  const V = decoder.config.vocabSize;
  // the rows whose target the read-back mask keeps (all of them without one)
  const rows = Array.from({ length: T - 1 - P }, (_, i) => P + i).filter((t) => !ex.readMask || ex.readMask[t + 1]);
  const kept = rows.flatMap((t) => Array.from(logits.slice(t * V, (t + 1) * V)));
  return meanCrossEntropy(kept, V, rows.map((t) => ex.ids[t + 1]!));
}

describe('inner loop: the read-back term', () => {
  it('is the cross-entropy of the agent reading its span as link outputs, and adds to the cosine term', async () => {
    const { decoder, link, ex, P } = await setup();
    const pairs = innerPairs(ex);
    const run = async (w: { cos: number; mse: number; ce?: number }) => {
      const l = await innerSampleStep(decoder, link, ex, w, pairs);
      const v = (await l.read())[0]!;
      l.dispose();
      return v;
    };
    const ce = await run({ cos: 0, mse: 0, ce: 1 });
    const want = await reference(decoder, link, ex, P);
    expect(want).toBeGreaterThan(1); // an untrained link: far from the gold tokens
    // the cross-entropy kernel rounds like f32 in places: agreement to 1e-6, not 1e-15
    expect(Math.abs(ce - want)).toBeLessThan(1e-6 * want);
    const cos = await run({ cos: 1, mse: 0 });
    expect(await run({ cos: 1, mse: 0, ce: 0 })).toBe(cos);
    expect(Math.abs((await run({ cos: 1, mse: 0, ce: 0.5 })) - (cos + 0.5 * want))).toBeLessThan(1e-6);
    // a batch share scales it: the sample holds pairs / batchPairs of the batch
    const l = await innerSampleStep(decoder, link, ex, { cos: 0, mse: 0, ce: 1 }, 4 * pairs);
    expect(Math.abs((await l.read())[0]! - want / 4)).toBeLessThan(1e-6);
    // a read-back mask scores only the span tokens it keeps (an arithmetic drill's results)
    const masked = { ...ex, readMask: ex.ids.map((_, t) => (t % 3 === 0 ? 1 : 0)) };
    const wantMasked = await reference(decoder, link, masked, P);
    expect(Math.abs(wantMasked - want)).toBeGreaterThan(1e-3);
    const lm = await innerSampleStep(decoder, link, masked, { cos: 0, mse: 0, ce: 1 }, pairs);
    expect(Math.abs((await lm.read())[0]! - wantMasked)).toBeLessThan(1e-6 * wantMasked);
    await expect(innerSampleStep(decoder, link, { ...ex, readMask: [1] }, { cos: 0, mse: 0, ce: 1 }, pairs)).rejects.toThrow(
      /read-back mask values/,
    );
    link.dispose();
    decoder.dispose();
  }, 60_000);

  it('reaches the link through the agent: gradients match finite differences', async () => {
    const { decoder, link, ex, P } = await setup();
    const opt = new AdamW([link.params]);
    opt.zeroGrad();
    const l = await innerSampleStep(decoder, link, ex, { cos: 0, mse: 0, ce: 1 }, innerPairs(ex));
    l.dispose();
    opt.gather();
    const checked = await checkLinkGrads(
      link,
      ['proj1.weight', 'proj1.bias', 'proj2.weight', 'post_ln.weight', 'pre_ln.bias'],
      () => reference(decoder, link, ex, P),
      { seed: 9 },
    );
    expect(checked).toBe(15);
    link.dispose();
    decoder.dispose();
  }, 120_000);

  it('needs a prompt followed by one assistant span that ends the sample', async () => {
    const { decoder, link, ex } = await setup();
    const broken: InnerExample = { ids: ex.ids, lossMask: ex.lossMask.map((m, t) => (t === ex.ids.length - 1 ? 0 : m)) };
    await expect(innerSampleStep(decoder, link, broken, { cos: 1, mse: 0, ce: 1 }, innerPairs(broken))).rejects.toThrow(InvalidArgument);
    await expect(innerSampleStep(decoder, link, broken, { cos: 1, mse: 0, ce: 1 }, innerPairs(broken))).rejects.toThrow(
      /--adapter_ce_weight/,
    );
    // without the term the same example trains as before
    const l = await innerSampleStep(decoder, link, broken, { cos: 1, mse: 0 }, innerPairs(broken));
    expect((await l.read())[0]).toBeGreaterThan(0);
    link.dispose();
    decoder.dispose();
  }, 60_000);
});
