/**
 * outerSampleStep's edge cases on the golden tiny system (CPU): left truncation cuts the first prompt
 * piece exactly as if those tokens were never there; a stage that cannot fit, an empty target or a
 * missing stage skip the sample with its reason and add no gradient.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getStyle } from '../../src/mas/styles';
import { CpuBackend } from '../../src/tensor/cpu';
import { outerSampleStep, stageKey, type OuterSample, type OuterStage } from '../../src/train/outer';
import { TRAIN_GOLDEN as G, outerSetup, type OuterSetup } from './golden';

const be = new CpuBackend('f32');
const style = getStyle('sequential_light');
let s: OuterSetup;
beforeAll(async () => { s = await outerSetup(be); });
afterAll(() => s?.dispose());

const opts = (maxLength: number) => ({ rounds: 2, maxLatentTokens: 5, superviseFinalOnly: true, nonLastLossWeight: 0.1, maxLength });
const withStage = (sample: OuterSample, key: string, f: (st: OuterStage) => OuterStage | null) => {
  const m = new Map(sample);
  const st = f(m.get(key)!);
  if (st) m.set(key, st);
  else m.delete(key);
  return m;
};
async function gradSq() {
  let sq = 0;
  for (const l of s.outer.values()) for (const g of (await l.params.export('grad')).values()) for (const x of g) sq += x * x;
  return sq;
}
const zero = () => { for (const l of s.outer.values()) l.params.zeroGrad(); };

describe('outerSampleStep edge cases', () => {
  it('left truncation drops the start of the first piece, nothing else', async () => {
    const sample = s.samples[0];
    const ref = await outerSampleStep(style, s.agents, s.outer, sample, opts(4096), 1);
    // the longest stage, with 7 extra ids in front, under a max_length that forces exactly those out
    const size = (st: OuterStage) => st.pieces.reduce((n, p) => n + p.length, 0) + (st.pieces.length - 1) * 5 + st.target.length;
    const [key, longest] = [...sample].reduce((a, b) => (size(b[1]) > size(a[1]) ? b : a));
    const len = size(longest);
    const longer = withStage(sample, key, (st) => ({ ...st, pieces: [[11, 12, 13, 14, 15, 16, 17, ...st.pieces[0]], ...st.pieces.slice(1)] }));
    const cut = await outerSampleStep(style, s.agents, s.outer, longer, opts(len), 1);
    if (!('loss' in ref) || !('loss' in cut)) throw new Error('unexpected skip');
    expect(cut.loss).toBe(ref.loss);
    expect(cut.ce).toEqual(ref.ce);
    zero();
  });

  it('skips with a reason and adds no gradient', async () => {
    zero();
    const sample = s.samples[1];
    const tooLong = await outerSampleStep(style, s.agents, s.outer, sample, opts(10), 1);
    expect(tooLong).toMatchObject({ skip: 'sequence_too_long' });
    const empty = await outerSampleStep(style, s.agents, s.outer, withStage(sample, stageKey(1, 'solver'), (st) => ({ ...st, target: [] })), opts(4096), 1);
    expect(empty).toMatchObject({ skip: 'empty_span' });
    const missing = await outerSampleStep(style, s.agents, s.outer, withStage(sample, stageKey(1, 'planner'), () => null), opts(4096), 1);
    expect(missing).toMatchObject({ skip: 'missing_stage', detail: expect.stringContaining('planner in round 2') });
    expect(await gradSq()).toBe(0);
    // and a normal sample does add gradient (the check above can fail)
    await outerSampleStep(style, s.agents, s.outer, sample, opts(4096), 1);
    for (const l of s.outer.values()) l.params.gatherGrads({ accumulate: true });
    expect(await gradSq()).toBeGreaterThan(0);
    expect(G.outer.samples.length).toBe(2);
  });
});
