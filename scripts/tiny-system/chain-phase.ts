/**
 * The chain phase, the tiny build's last stage: the solver learns to answer from the message the running
 * system sends it, together with outer_23, the link that writes that message.
 *
 * Why: the critic's latent rollout keeps the form of a refined plan but loses its numbers (README), so the
 * message outer_23 writes from it is out of anything the text-trained solver has read; the solver then
 * copies wrong numbers (or loses the question's). Here the solver reads, in one mixture:
 *   - messages: Outer_23(Inner_critic(H)) where H is the critic's latent rollout as `ask` runs it (latent
 *     mode, greedy, the style's m) in the system as it stands, in 1-round asks and in every round of 3-round
 *     asks (each ask runs when a batch first needs it); the loss is the solver's cross-entropy on the row's
 *     gold answer, and its gradient trains the solver's weights and outer_23;
 *   - its text chats, the refined-plan slot holding the gold refined plan, nothing, the gold one with some
 *     numbers changed, or another row's: the answer is always the row's own, so it checks what it reads;
 *   - arithmetic drills in its answer's tokens ("a op b = c, …"), loss on the results, so that it can work
 *     the answer out when what it reads is wrong.
 * The planner, the critic, the inner links, outer_12 and outer_31 are not changed. Writes the solver's
 * model.safetensors and outer/outer_23.pt into --system.
 *
 *   npx tsx scripts/tiny-system/build.ts chain --system DIR [--seed S] [--steps N] [--losses FILE.json]
 *
 * On the CPU backend the run is a pure function of the system and the seed.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { F, noGrad, Tape } from '../../src/autograd/index.ts';
import { AdamW } from '../../src/autograd/ops/optim.ts';
import { InvalidArgument } from '../../src/errors.ts';
import { OuterLink } from '../../src/mas/links.ts';
import { ask } from '../../src/mas/ask.ts';
import type { MasSystem } from '../../src/mas/system.ts';
import { loadSystem } from '../../src/mas/system-folders.ts';
import { readLinkFile, writeLinkFile } from '../../src/mas/upstream.ts';
import { parseDecoderConfig } from '../../src/model/config.ts';
import { createTrainableDecoder, saveDecoderCheckpoint } from '../../src/model/trainable.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { tidy } from '../../src/tensor/scope.ts';
import type { Tensor } from '../../src/tensor/tensor.ts';
import type { Decoder } from '../../src/model/decoder.ts';
import { Rng } from '../../src/util/rng.ts';
import { loadTokenizerFromDir } from '../../src/tokenizer/index.ts';
import { initialState, trainLoop } from '../../src/train/loop.ts';
import { taskSplit, type TaskRow } from '../../src/eval/tiny-task.ts';
import { drillExamples, loadF32Checkpoint, recordSteps, rolePrompt, sequenceStep } from './train-agents.ts';

/** The settings of the committed system's chain phase. */
export const CHAIN_DEFAULTS = {
  steps: 2000,
  batchSize: 4,
  lr: 2e-3,
  warmup: 20,
  /** Train rows whose messages come from 1-round asks, then rows whose messages come from every round of 3-round asks. */
  messageRows: { oneRound: 800, threeRounds: 300 },
  drills: 2000,
} as const;

export interface ChainPhaseOptions {
  system: string;
  seed?: number;
  steps?: number;
  /** Fewer rows for tests: message rows per kind, chats and drills. */
  messageRows?: { oneRound: number; threeRounds: number };
  chatRows?: number;
  drills?: number;
  /** Stop after this many optimizer steps of the `steps`-step schedule (tests). */
  stopAfter?: number;
  backend?: Backend;
  log?: (line: string) => void;
}

export interface ChainPhaseResult {
  losses: number[];
  /** Time in the asks that produce the messages, and in the rest of the training. */
  seconds: { asks: number; training: number };
  examples: { messages: number; chats: number; drills: number };
}

/** What the solver read in one stage of a latent ask: the pieces around its slot and the critic's rollout states. */
export interface MessageExample {
  pieces: number[][];
  /** The critic's rollout states [m, d_critic] (values; the message is made from them with grad). */
  hidden: Float32Array;
  m: number;
  target: number[];
}

type TextExample = { ids: number[]; lossMask: number[] };

/**
 * The refined plan with some numbers changed (each with probability 1/2, to another value of 1..60), as a
 * wrong refined plan may read.
 */
export function corruptNumbers(text: string, rng: Rng): string {
  return text.replace(/\d+/g, (d) => (rng.next() < 0.5 ? String(1 + rng.int(60)) : d));
}

/**
 * The solver's chats of this phase: row i's slot holds (i mod 4) the gold refined plan, nothing, the gold
 * one with numbers changed, or another row's; the target is always row i's gold answer.
 */
export function solverCheckChats(
  tok: Awaited<ReturnType<typeof loadTokenizerFromDir>>,
  rows: readonly TaskRow[],
  seed: number,
): TextExample[] {
  const rng = new Rng(seed);
  const enc = (t: string) => tok.encode(t, { addSpecialTokens: false });
  return rows.map((row, i) => {
    const k = i % 4;
    const slot =
      k === 0
        ? row.refined_plan
        : k === 1
          ? ''
          : k === 2
            ? corruptNumbers(row.refined_plan, rng)
            : rows[(i * 7 + 13) % rows.length]!.refined_plan;
    const prompt = enc(rolePrompt(tok, 'solver', 'first', row.question, slot));
    const target = enc(`${row.answer}<|im_end|>`);
    return { ids: [...prompt, ...target], lossMask: [...prompt.map(() => 0), ...target.map(() => 1)] };
  });
}

/**
 * The solver stages of latent asks, run when first needed (a 1-round ask gives one stage, a 3-round ask
 * three): each stage's prompt pieces around its slot and the critic rollout it reads. Asks are greedy, so
 * a stage is the same whenever it is asked for.
 */
export class MessageSource {
  private readonly cache = new Map<string, MessageExample[]>();
  constructor(
    private readonly system: MasSystem,
    private readonly encTarget: (row: TaskRow) => number[],
  ) {}

  async get(row: TaskRow, rounds: number, round: number): Promise<MessageExample> {
    const key = `${rounds}:${row.question}`;
    let stages = this.cache.get(key);
    if (!stages) {
      stages = await this.run(row, rounds);
      this.cache.set(key, stages);
    }
    return stages[round]!;
  }

  private async run(row: TaskRow, rounds: number): Promise<MessageExample[]> {
    const critic = new Map<number, { hidden: Float32Array; m: number }>();
    const out: MessageExample[] = [];
    await ask(this.system, {
      question: row.question, task: 'math', rounds, mode: 'latent', sampling: { greedy: true }, maxNewTokens: 1, answerRetry: false,
      onStage: async (rec) => {
        if (rec.role === 'critic') {
          if (!rec.hidden) throw new InvalidArgument('chain phase: the critic stage recorded no rollout states');
          critic.set(rec.round, { hidden: await rec.hidden.read(), m: rec.hidden.shape[0]! });
        } else if (rec.role === 'solver') {
          const c = critic.get(rec.round);
          if (!c || rec.ids.length !== 2)
            throw new InvalidArgument(`chain phase: the solver stage of round ${rec.round + 1} has no critic message before it`);
          out.push({ pieces: rec.ids.map((p) => [...p]), hidden: c.hidden, m: c.m, target: this.encTarget(row) });
        }
      },
    });
    if (out.length !== rounds) throw new InvalidArgument(`chain phase: a ${rounds}-round ask ran ${out.length} solver stages`);
    return out;
  }
}

export async function chainPhase(opts: ChainPhaseOptions): Promise<ChainPhaseResult> {
  const seed = opts.seed ?? 7;
  const steps = opts.steps ?? CHAIN_DEFAULTS.steps;
  const be = opts.backend ?? new CpuBackend('f32');
  const log = opts.log ?? ((s: string) => process.stdout.write(`${s}\n`));
  const systemDir = resolve(opts.system);
  const dir = join(systemDir, 'solver');
  const tok = await loadTokenizerFromDir(dir);
  const enc = (t: string) => tok.encode(t, { addSpecialTokens: false });
  const train = taskSplit('train');
  const n = opts.messageRows ?? CHAIN_DEFAULTS.messageRows;
  if (n.oneRound + n.threeRounds > train.length)
    throw new InvalidArgument(`chain phase: ${n.oneRound + n.threeRounds} message rows asked, the train split has ${train.length}`);

  const oneRound = train.slice(0, n.oneRound);
  const threeRounds = train.slice(n.oneRound, n.oneRound + n.threeRounds);
  const chats = solverCheckChats(tok, train.slice(0, opts.chatRows ?? train.length), seed * 1000 + 811);
  const drills = drillExamples(tok, opts.drills ?? CHAIN_DEFAULTS.drills, seed * 1000 + 812, 'answer');
  type Example = ({ kind: 'text' } & TextExample) | { kind: 'message'; row: TaskRow; rounds: number; round: number };
  const examples: Example[] = [
    ...oneRound.map((row) => ({ kind: 'message' as const, row, rounds: 1, round: 0 })),
    ...threeRounds.flatMap((row) => [0, 1, 2].map((round) => ({ kind: 'message' as const, row, rounds: 3, round }))),
    ...chats.map((c) => ({ kind: 'text' as const, ...c })),
    ...drills.map((d) => ({ kind: 'text' as const, ...d })),
  ];
  const nMessages = oneRound.length + 3 * threeRounds.length;

  const config = parseDecoderConfig(await readFile(join(dir, 'config.json'), 'utf8'), join(dir, 'config.json'));
  const { decoder, params } = createTrainableDecoder(config, be, { seed });
  // the system as it stands sends the messages (its solver and outer_23 are not the ones trained here)
  const criticSystem = await loadSystem('tiny_sequential', { backend: be, embeddedRoot: systemDir, task: 'math' });
  const source = new MessageSource(criticSystem, (row) => enc(`${row.answer}<|im_end|>`));
  const criticInner = criticSystem.agents.get('critic')!.inner!;
  const linkFile = join(systemDir, 'outer', 'outer_23.pt');
  const outer = OuterLink.fromStateDict(be, await readLinkFile(linkFile), {
    type: criticSystem.outer.get('outer_23')!.type,
    name: 'outer_23',
    dIn: criticInner.d,
    dOut: config.hidden,
  });
  outer.unfreeze();
  const losses: number[] = [];
  const stop = new AbortController();
  const t0 = performance.now();
  let askSeconds = 0;
  try {
    params.import(await loadF32Checkpoint(join(dir, 'model.safetensors'), 'the chain phase'));
    const optimizer = new AdamW([params, outer.params], { weightDecay: 0.01 });
    optimizer.zeroGrad();
    const phaseSeed = seed * 1000 + 813;
    await trainLoop(
      examples.length,
      {
        maxSteps: steps,
        batchSize: CHAIN_DEFAULTS.batchSize,
        gradAccumSteps: 1,
        lr: CHAIN_DEFAULTS.lr,
        scheduler: 'cosine',
        warmupSteps: Math.min(CHAIN_DEFAULTS.warmup, steps - 1),
        seed: phaseSeed,
        shuffle: true,
        saveSteps: 0,
      },
      {
        optimizer,
        signal: stop.signal,
        runBatch: async (indices, scale) => {
          let loss = 0;
          let tokens = 0;
          for (const i of indices) {
            const ex = examples[i]!;
            const w = scale / indices.length;
            if (ex.kind === 'text') {
              loss += (await sequenceStep(decoder, ex, w)) / indices.length;
              tokens += ex.ids.length;
            } else {
              const a0 = performance.now();
              const msg = await source.get(ex.row, ex.rounds, ex.round);
              askSeconds += (performance.now() - a0) / 1000;
              loss += (await messageStep(decoder, criticInner, outer, msg, w)) / indices.length;
              tokens += msg.pieces[0]!.length + msg.m + msg.pieces[1]!.length + msg.target.length;
            }
          }
          optimizer.gather();
          return { loss, tokens, valid: indices.length, skipped: {} };
        },
        onStep: recordSteps(losses, stop, {
          stopAfter: opts.stopAfter,
          every: 50,
          log,
          label: (e) => `chain phase step ${e.step}/${e.maxSteps}`,
        }),
      },
      initialState(examples.length, { seed: phaseSeed, shuffle: true }),
    );
    if (!stop.signal.aborted) {
      await saveDecoderCheckpoint(dir, params, { dtype: 'f32' });
      await writeLinkFile(outer, linkFile, { dtype: 'f32' });
    }
  } finally {
    params.dispose();
    decoder.dispose();
    outer.dispose();
    criticSystem.dispose();
  }
  const total = (performance.now() - t0) / 1000;
  return {
    losses,
    seconds: { asks: askSeconds, training: total - askSeconds },
    examples: { messages: nMessages, chats: chats.length, drills: drills.length },
  };
}

type Forwardable = { forward(x: Tensor): Tensor };

/**
 * The solver's logits over its answer [L, V] when it reads Outer_23(Inner_critic(H)) in its slot, as `ask`
 * feeds it (prompt piece, message, prompt piece ending with the assistant header), teacher-forced on
 * `ex.target`; row i predicts target token i. In F ops: inside a recording tape, differentiable w.r.t. the
 * solver's weights and outer_23 (the inner link runs without grad).
 */
export function messageLogits(decoder: Decoder, inner: Forwardable, outer: Forwardable, ex: MessageExample): Tensor {
  const be = decoder.backend;
  const h = noGrad(() => inner.forward(be.fromValues(ex.hidden, [ex.m, ex.hidden.length / ex.m], 'f32')));
  const embed = (ids: readonly number[]) => decoder.embed(be.fromValues(ids, [ids.length], 'i32'));
  const parts = [embed(ex.pieces[0]!), outer.forward(h), embed(ex.pieces[1]!), embed(ex.target)];
  const T = ex.pieces[0]!.length + ex.m + ex.pieces[1]!.length + ex.target.length;
  const L = ex.target.length;
  return decoder.forward({ inputsEmbeds: F.concatRows(parts), logits: Array.from({ length: L }, (_, i) => T - L - 1 + i) }).logits!;
}

/**
 * Forward and backward of `weight` · the solver's cross-entropy on its gold answer reading the message
 * (messageLogits); the gradient reaches the solver's weights and outer_23. Returns the unweighted loss.
 */
async function messageStep(decoder: Decoder, inner: Forwardable, outer: OuterLink, ex: MessageExample, weight: number): Promise<number> {
  const be = decoder.backend;
  const tape = new Tape();
  try {
    const loss = tape.run(() =>
      tidy(() => F.crossEntropy(messageLogits(decoder, inner, outer, ex), be.fromValues(ex.target, [ex.target.length], 'i32'))),
    );
    const value = (await loss.read())[0]!;
    await tape.backward(tape.run(() => F.scale(loss, weight)));
    return value;
  } finally {
    tape.dispose();
  }
}
