/**
 * outerSampleStep's edge cases on the golden tiny system (CPU): left truncation cuts the first prompt
 * piece exactly as if those tokens were never there; a stage that cannot fit, an empty target or a
 * missing stage skip the sample with its reason and add no gradient. With latents 'rollout', the stages
 * send what inference sends (checked against latentRollout and linkMessage, the inference path).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { F, noGrad } from '../../src/autograd';
import { latentRollout, linkMessage, type Piece } from '../../src/mas/rollout';
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
    const longer = withStage(sample, key, (st) => ({
      ...st,
      pieces: [[11, 12, 13, 14, 15, 16, 17, ...st.pieces[0]], ...st.pieces.slice(1)],
    }));
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
    const empty = await outerSampleStep(
      style,
      s.agents,
      s.outer,
      withStage(sample, stageKey(1, 'solver'), (st) => ({ ...st, target: [] })),
      opts(4096),
      1,
    );
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

describe("outerSampleStep with latents 'rollout'", () => {
  const m = 4;
  const ropts = (rounds: number) => ({
    rounds,
    maxLatentTokens: m,
    superviseFinalOnly: true,
    nonLastLossWeight: 0.1,
    maxLength: 4096,
    latents: 'rollout' as const,
  });
  const embedIds = (role: string, ids: readonly number[]) =>
    noGrad(() => s.agents.get(role)!.decoder.embed(be.fromValues(ids, [ids.length], 'i32')));

  /** One round by the inference path: planner and critic roll out m steps, their messages go on, the solver scores its gold text. */
  async function inferencePathLoss(sample: OuterSample): Promise<number> {
    const roll = async (role: string, pieces: Piece[], key: string) => {
      const a = s.agents.get(role)!;
      const H = await latentRollout(a.decoder, a.inner, pieces, m);
      const L = linkMessage(a.inner, s.outer.get(key)!, H);
      H.dispose();
      return L;
    };
    const P = sample.get(stageKey(0, 'planner'))!;
    const L12 = await roll('planner', [P.pieces[0]], 'outer_12');
    const C = sample.get(stageKey(0, 'critic'))!;
    const L23 = await roll('critic', [C.pieces[0], L12, C.pieces[1]], 'outer_23');
    const S = sample.get(stageKey(0, 'solver'))!;
    const solver = s.agents.get('solver')!.decoder;
    const x = F.concatRows([embedIds('solver', S.pieces[0]), L23, embedIds('solver', S.pieces[1]), embedIds('solver', S.target)]);
    const T = x.shape[0];
    const L = S.target.length;
    const logits = await noGrad(
      () => solver.forward({ inputsEmbeds: x, logits: Array.from({ length: L }, (_, i) => T - L - 1 + i) }).logits!,
    ).read();
    const V = solver.config.vocabSize;
    let sum = 0;
    S.target.forEach((t, i) => {
      const row = Array.from(logits.slice(i * V, (i + 1) * V));
      const max = Math.max(...row);
      sum += max + Math.log(row.reduce((a, b) => a + Math.exp(b - max), 0)) - row[t]!;
    });
    return sum / L;
  }

  it('scores the solver on the latents inference sends, and trains every outer link on the way', async () => {
    zero();
    const sample = s.samples[0];
    const want = await inferencePathLoss(sample);
    const got = await outerSampleStep(style, s.agents, s.outer, sample, ropts(1), 1);
    if (!('loss' in got)) throw new Error(`unexpected skip ${JSON.stringify(got)}`);
    expect(Math.abs(got.loss - want)).toBeLessThan(1e-4 * want);
    // the teacher-forced latents give another loss: the mode is not a no-op
    const teacher = await outerSampleStep(style, s.agents, s.outer, sample, { ...ropts(1), latents: 'teacher' }, 1);
    if (!('loss' in teacher)) throw new Error('unexpected skip');
    expect(Math.abs(teacher.loss - got.loss)).toBeGreaterThan(1e-3);
    zero();
    await outerSampleStep(style, s.agents, s.outer, sample, ropts(1), 1);
    for (const [key, l] of s.outer) {
      l.params.gatherGrads({ accumulate: true });
      let sq = 0;
      for (const g of (await l.params.export('grad')).values()) for (const v of g) sq += v * v;
      // one round: outer_31 (the solver's feedback) is not used; outer_12 trains through the critic's read-back
      if (key === 'outer_31') expect(sq, key).toBe(0);
      else expect(sq, key).toBeGreaterThan(0);
    }
    zero();
  });

  it('sends m latents from every stage that sends, and fits --max_length with them', async () => {
    const sample = s.samples[1];
    const two = await outerSampleStep(style, s.agents, s.outer, sample, ropts(2), 1);
    if (!('loss' in two)) throw new Error('unexpected skip');
    expect(two.ce).toHaveLength(2); // the solver scores its text in both rounds and sends its rollout in the first
    expect(Number.isFinite(two.loss)).toBe(true);
    const tooLong = await outerSampleStep(style, s.agents, s.outer, sample, { ...ropts(2), maxLength: 3 }, 1);
    expect(tooLong).toMatchObject({ skip: 'sequence_too_long' });
    zero();
  });

  it('--gradient_checkpointing: recomputed layers give the same loss and outer-link gradients', async () => {
    const grads = async (recompute: boolean | string[]) => {
      zero();
      const r = await outerSampleStep(style, s.agents, s.outer, s.samples[0], { ...ropts(2), recompute }, 1);
      if (!('loss' in r)) throw new Error('unexpected skip');
      const g: number[] = [];
      for (const l of s.outer.values()) {
        l.params.gatherGrads({ accumulate: true });
        for (const v of (await l.params.export('grad')).values()) g.push(...v);
      }
      return { loss: r.loss, g };
    };
    const plain = await grads(false);
    const scale = Math.max(...plain.g.map(Math.abs));
    expect(scale).toBeGreaterThan(0);
    // every agent, or only the roles listed (what plan-memory's auto picks)
    for (const recompute of [true, ['critic', 'solver']]) {
      const re = await grads(recompute);
      expect(re.loss).toBe(plain.loss);
      re.g.forEach((v, i) => expect(Math.abs(v - plain.g[i]!)).toBeLessThan(1e-5 * scale));
    }
    zero();
  });

  it('the frozen inner links allocate nothing beyond their values (FlatParams buffers come with first use)', async () => {
    const r = await outerSampleStep(style, s.agents, s.outer, s.samples[0], ropts(2), 1);
    expect('loss' in r).toBe(true);
    for (const [role, a] of s.agents) expect(a.inner.params.allocated, role).toEqual([]);
    zero();
  });
});
