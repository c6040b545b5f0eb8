/**
 * The inner loop's read-back term (`--adapter_ce_weight`, src/train/inner.ts): the agent reads its assistant
 * span as Inner(Hs[t]) rows and is scored on the gold tokens. Checked on CpuBackend f64 against a reference
 * assembled here from the model's parts (which rows are replaced, which labels count, cross-entropy in f64 from
 * the logits), and its gradient into the link against central finite differences.
 */
import { describe, expect, it } from 'vitest';
import { F, noGrad } from '../../src/autograd';
import { InvalidArgument } from '../../src/errors';
import { InnerLink } from '../../src/mas/links';
import { loadDecoderFromDir } from '../../src/model';
import type { Decoder } from '../../src/model/decoder';
import { CpuBackend } from '../../src/tensor/cpu';
import { Rng } from '../../src/testing/rng';
import { LinkOptimizer } from '../../src/train/optim';
import { innerPairs, innerSampleStep, type InnerExample } from '../../src/train/inner';

const be = new CpuBackend('f64');

async function setup() {
  const decoder = await loadDecoderFromDir('models/tiny/qwen3-tiny', be);
  const link = InnerLink.create(be, decoder.config.hidden, { seed: 11, name: 'readback' });
  const rng = new Rng(5);
  const T = 12;
  const P = 5;
  const ex: InnerExample = {
    ids: Array.from({ length: T }, () => rng.int(decoder.config.vocabSize)),
    lossMask: Array.from({ length: T }, (_, t) => (t >= P ? 1 : 0)),
  };
  return { decoder, link, ex, P, T };
}

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
  let sum = 0;
  for (let t = P; t < T - 1; t++) {
    const row = Array.from(logits.slice(t * V, (t + 1) * V));
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
    sum += lse - row[ex.ids[t + 1]!]!;
  }
  return sum / (T - 1 - P);
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
    link.dispose();
    decoder.dispose();
  }, 60_000);

  it('reaches the link through the agent: gradients match finite differences', async () => {
    const { decoder, link, ex, P } = await setup();
    const opt = new LinkOptimizer([link.params]);
    opt.zeroGrad();
    const l = await innerSampleStep(decoder, link, ex, { cos: 0, mse: 0, ce: 1 }, innerPairs(ex));
    l.dispose();
    opt.gather();
    const grads = await link.params.export('grad');
    const values = await link.params.export('data');
    const rng = new Rng(9);
    // the loss carries f32-level rounding (~1e-7: parameters are imported through f32 bytes, and the
    // cross-entropy kernel rounds in places), so the step is large and the bound loose; a wrong gradient
    // (a missed path, a sign, a dropped row) is off by far more
    const eps = 1e-2;
    let checked = 0;
    for (const name of ['proj1.weight', 'proj1.bias', 'proj2.weight', 'post_ln.weight', 'pre_ln.bias']) {
      const g = grads.get(name)!;
      for (let k = 0; k < 3; k++) {
        const i = rng.int(g.length);
        const at = (delta: number) => {
          const v = Float64Array.from(values.get(name)!);
          v[i] += delta;
          link.params.import(new Map([[name, v]]), { partial: true });
        };
        at(eps);
        const up = await reference(decoder, link, ex, P);
        at(-eps);
        const down = await reference(decoder, link, ex, P);
        at(0);
        const fd = (up - down) / (2 * eps);
        expect(Math.abs(g[i]! - fd), `${name}[${i}]: ${g[i]} vs ${fd}`).toBeLessThan(5e-4 * Math.abs(fd) + 5e-5);
        checked++;
      }
    }
    expect(checked).toBe(15);
    link.dispose();
    decoder.dispose();
  }, 120_000);

  it('needs a prompt followed by one assistant span that ends the sample', async () => {
    const { decoder, link, ex } = await setup();
    const broken: InnerExample = { ids: ex.ids, lossMask: ex.lossMask.map((m, t) => (t === ex.ids.length - 1 ? 0 : m)) };
    await expect(innerSampleStep(decoder, link, broken, { cos: 1, mse: 0, ce: 1 }, innerPairs(broken))).rejects.toThrow(InvalidArgument);
    await expect(innerSampleStep(decoder, link, broken, { cos: 1, mse: 0, ce: 1 }, innerPairs(broken))).rejects.toThrow(/--adapter_ce_weight/);
    // without the term the same example trains as before
    const l = await innerSampleStep(decoder, link, broken, { cos: 1, mse: 0 }, innerPairs(broken));
    expect((await l.read())[0]).toBeGreaterThan(0);
    link.dispose();
    decoder.dispose();
  }, 60_000);
});
