/**
 * Message ablations (src/mas/ablation.ts) on the committed tiny_sequential system, CPU backend: a run records
 * every message its links send, by round and link; a run on another question with those messages replacing its
 * own reads exactly them in its slots; a zeroed run reads zeros; recording changes nothing; mismatched
 * recordings and text mode are refused by name. The preparation `rmas ask` and the tab share: checkAblation's
 * refusals, and prepareAblation's donor run with the question's settings, no answer retry and its messages recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgument } from '../../src/errors';
import { taskSplit } from '../../src/eval/tiny-task';
import { ablationLabel, checkAblation, messageKey, prepareAblation, type RecordedMessages } from '../../src/mas/ablation';
import { ask, type AskOptions, type AskResult, type StageRecord } from '../../src/mas/ask';
import { type MasSystem } from '../../src/mas/system';
import { loadSystem } from '../../src/mas/system-folders';
import { CpuBackend } from '../../src/tensor/cpu';

const M = 6;
let system: MasSystem;
const [q1, q2] = taskSplit('test').map((r) => r.question);

beforeAll(async () => {
  system = await loadSystem('tiny_sequential', { backend: new CpuBackend('f32'), task: 'math' });
});
afterAll(() => system?.dispose());

/** A 2-round latent ask; each stage's slot inputs read back, by messageKey of the link that filled them. */
async function run(question: string, extra: Partial<AskOptions> = {}) {
  const inputs = new Map<string, Float32Array>();
  const r = await ask(system, {
    question,
    task: 'math',
    rounds: 2,
    latentSteps: M,
    sampling: { greedy: true },
    maxNewTokens: 12,
    ...extra,
    onStage: async (rec: StageRecord) => {
      for (const [i, [, key]] of stageFill(rec).entries()) {
        // a slot of round r reads the message its link sent last: this round's, or the round before's (feedback)
        inputs.set(`${rec.round}:${rec.role}:${key}`, await rec.latentsIn[i]!.read());
      }
    },
  });
  return { r, inputs };
}
const stageFill = (rec: StageRecord) => {
  const fill = system.style.stages(rec.round, 2).find((s) => s.role === rec.role)!.fill;
  return fill;
};

describe('message ablations', () => {
  let recorded: RecordedMessages;
  let plain: Awaited<ReturnType<typeof run>>;

  it('a run records every message by round and link, [m, d of the receiver], and recording changes nothing', async () => {
    const rec = await run(q1!, { recordMessages: true });
    recorded = rec.r.messages!;
    expect(recorded.question).toBe(q1);
    expect([...recorded.messages.keys()].sort()).toEqual(['0:outer_12', '0:outer_23', '0:outer_31', '1:outer_12', '1:outer_23']);
    const d = (role: string) => system.agents.get(role)!.decoder.config.hidden;
    expect(recorded.messages.get('0:outer_12')!.shape).toEqual([M, d('critic')]);
    expect(recorded.messages.get('0:outer_31')!.shape).toEqual([M, d('planner')]);
    // each slot read the message recorded for its link (the critic of round 2 reads round 2's outer_12)
    expect(rec.inputs.get('1:critic:outer_12')).toEqual(recorded.messages.get(messageKey(1, 'outer_12'))!.data);
    expect(rec.inputs.get('1:planner:outer_31')).toEqual(recorded.messages.get(messageKey(0, 'outer_31'))!.data);
    const again = await run(q1!);
    expect(again.r.text).toBe(rec.r.text);
    expect(again.inputs).toEqual(rec.inputs);
  });

  it("replaced: a run on another question reads the recorded run's messages in every slot, round for round", async () => {
    plain = await run(q2!);
    const swapped = await run(q2!, { ablation: { kind: 'replaced', from: recorded } });
    const msg = (round: number, key: string) => recorded.messages.get(messageKey(round, key))!.data;
    expect(swapped.inputs.get('0:critic:outer_12')).toEqual(msg(0, 'outer_12'));
    expect(swapped.inputs.get('0:solver:outer_23')).toEqual(msg(0, 'outer_23'));
    expect(swapped.inputs.get('1:planner:outer_31')).toEqual(msg(0, 'outer_31'));
    expect(swapped.inputs.get('1:critic:outer_12')).toEqual(msg(1, 'outer_12'));
    expect(swapped.inputs.get('1:solver:outer_23')).toEqual(msg(1, 'outer_23'));
    // its own messages differ from q1's
    expect(plain.inputs.get('0:critic:outer_12')).not.toEqual(msg(0, 'outer_12'));
  });

  it('zeroed: every slot reads zeros of the message shape', async () => {
    const z = await run(q2!, { ablation: { kind: 'zeroed' } });
    expect(z.inputs.size).toBe(5);
    for (const [k, v] of z.inputs) {
      expect(v.length, k).toBe(plain.inputs.get(k)!.length);
      expect(v.every((x) => x === 0), k).toBe(true);
    }
  });

  it('zeroed on named links: only their messages are zeros (the feedback zeroed, the first hand-offs kept)', async () => {
    const z = await run(q2!, { ablation: { kind: 'zeroed', links: ['outer_31'] } });
    expect([...z.inputs.keys()].sort()).toEqual([...plain.inputs.keys()].sort());
    for (const [k, v] of z.inputs) {
      if (k.endsWith(':outer_31')) expect(v.every((x) => x === 0), k).toBe(true);
      // round 1's hand-offs are the plain run's; round 2's follow from a planner that read zeros
      else if (k.startsWith('0:')) expect(v, k).toEqual(plain.inputs.get(k));
      else expect(v.some((x) => x !== 0), k).toBe(true);
    }
    expect(z.inputs.get('1:critic:outer_12')).not.toEqual(plain.inputs.get('1:critic:outer_12'));
  });

  it('removed on the feedback: its reader gets its first-round prompt; round 2 repeats round 1 and answers as 1 round does', async () => {
    const stages: { round: number; role: string; slots: readonly string[]; ids: number[][]; inputs: Float32Array[] }[] = [];
    const opts = { question: q2!, task: 'math' as const, latentSteps: M, sampling: { greedy: true }, maxNewTokens: 12 };
    const two = await ask(system, {
      ...opts,
      rounds: 2,
      ablation: { kind: 'removed', links: ['outer_31'] },
      onStage: async (rec) => {
        const inputs = await Promise.all(rec.latentsIn.map((L) => L.read()));
        stages.push({ round: rec.round, role: rec.role, slots: rec.slots, ids: rec.ids.map((p) => [...p]), inputs });
      },
    });
    const one = await ask(system, { ...opts, rounds: 1 });
    expect(stages.map((st) => `${st.round}:${st.role}:${st.slots.length}`)).toEqual(
      ['0:planner:0', '0:critic:1', '0:solver:1', '1:planner:0', '1:critic:1', '1:solver:1'],
    );
    // the same prompt ids and the same message in every slot, stage for stage
    for (let i = 0; i < 3; i++) {
      expect(stages[i + 3]!.ids).toEqual(stages[i]!.ids);
      expect(stages[i + 3]!.inputs).toEqual(stages[i]!.inputs);
    }
    expect(two.text).toBe(one.text);
    expect(two.latentSteps).toBe(5 * M);
  });

  it('removed: a first-round stage that reads only removed links has no prompt to run instead, and is refused', async () => {
    const err = await run(q2!, { ablation: { kind: 'removed', links: ['outer_12'] } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/critic prompt \(first, round 1\) reads only removed links, and there is no earlier prompt/);
  });

  it('a recording of other latent steps or fewer rounds, and text mode, are refused by name', async () => {
    const short = (await run(q1!, { recordMessages: true, latentSteps: M - 1 })).r.messages!;
    await expect(run(q2!, { ablation: { kind: 'replaced', from: short } })).rejects.toThrow(
      /recorded message on outer_12 in round 1 is \[5,\d+\], this run sends \[6,\d+\]; record it with the same latent steps/,
    );
    const oneRound = await ask(system, {
      question: q1!,
      task: 'math',
      rounds: 1,
      latentSteps: M,
      sampling: { greedy: true },
      maxNewTokens: 4,
      recordMessages: true,
    });
    const err = await run(q2!, { ablation: { kind: 'replaced', from: oneRound.messages! } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toMatch(/sent nothing on outer_31 in round 1; record it with as many rounds as this run/);
    await expect(run(q2!, { mode: 'text', ablation: { kind: 'zeroed' } })).rejects.toThrow(/text mode sends none/);
  });
});

describe('preparing an ablation (rmas ask and the tab)', () => {
  it('checkAblation: the donor trimmed; text mode, an empty donor and another kind refused, with the caller\'s name', () => {
    expect(checkAblation(undefined, 'text', 'x')).toBeUndefined();
    expect(checkAblation({ kind: 'zeroed' }, 'latent', 'x')).toEqual({ kind: 'zeroed' });
    expect(checkAblation({ kind: 'from', question: ' Q? \n' }, 'latent', 'x')).toEqual({ kind: 'from', question: 'Q?' });
    const refused = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e as Error;
      }
      throw new Error('not refused');
    };
    const text = refused(() => checkAblation({ kind: 'zeroed' }, 'text', '--zero_messages'));
    expect(text).toBeInstanceOf(InvalidArgument);
    expect(text.message).toBe('--zero_messages replaces latent messages; text mode sends none');
    expect(refused(() => checkAblation({ kind: 'from', question: '  ' }, 'latent', 'ask: a message ablation')).message).toBe(
      'ask: a message ablation: the donor question is empty',
    );
    const odd = { kind: 'shuffled' } as unknown as Parameters<typeof checkAblation>[0];
    expect(refused(() => checkAblation(odd, 'latent', 'the ablation')).message).toMatch(/^the ablation must be \{kind: 'zeroed'\}/);
    const usage = refused(() => checkAblation({ kind: 'zeroed' }, 'text', '--zero_messages', (why) => new RangeError(why)));
    expect(usage).toBeInstanceOf(RangeError);
  });

  it("prepareAblation: 'from' asks the donor once with its settings, no answer retry, messages recorded; zeroed asks nothing", async () => {
    const asked: AskOptions[] = [];
    const recorded: RecordedMessages = { question: 'D', messages: new Map() };
    const fake = async (o: AskOptions) => (asked.push(o), { messages: recorded, seconds: 1.5 } as AskResult);
    const settings = (q: string) => ({ task: q === 'D' ? ('choice' as const) : ('math' as const), maxNewTokens: q.length, sampling: {} });
    expect(await prepareAblation(undefined, settings, fake)).toEqual({});
    expect(await prepareAblation({ kind: 'zeroed' }, settings, fake)).toEqual({ ablation: { kind: 'zeroed' } });
    expect(asked).toEqual([]);
    const p = await prepareAblation({ kind: 'from', question: 'D' }, settings, fake);
    expect(asked).toEqual([{ task: 'choice', maxNewTokens: 1, sampling: {}, question: 'D', answerRetry: false, recordMessages: true }]);
    expect(p.ablation).toEqual({ kind: 'replaced', from: recorded });
    expect(p.donor?.seconds).toBe(1.5);
    expect([ablationLabel({ kind: 'zeroed' }), ablationLabel({ kind: 'from', question: ' D ' })]).toEqual(['zeroed', 'from: D']);
  });
});
