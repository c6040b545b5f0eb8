/**
 * The held-out score of a training run: every N steps, a few validation questions through the system as it stands
 * (its agents, their inner links and the outer links being trained), greedy, scored as `rmas run` scores them, and
 * the best step so far. The loss alone can fall while answers get worse (issue 37); this is what says so during the
 * run. Both apps train through it: `rmas train-outer` prints each score, the tab's trainer sends it as an event.
 */
import { Cancelled, InvalidArgument } from '../errors';
import { defaultMaxNewTokens } from '../mas/budget';
import type { MasSystem } from '../mas/system';
import type { TrainerState } from '../train/checkpoint';
import type { Row } from '../train/data';
import type { LoopHooks } from '../train/loop';
import { toItems, type EvalItem } from './datasets';
import { evaluate } from './evaluate';

/** How a run scores itself on held-out questions. */
export interface HeldOutOptions {
  /** Validation rows (question and answer), asked in this order. */
  rows: readonly Row[];
  /** Score every N optimizer steps (and before the first, and after the last). */
  every: number;
  /** The recursion rounds and latent steps the questions are asked with (the setting the run trains for). */
  rounds: number;
  latentSteps: number;
  /** Questions asked at once (the same answers as one at a time). Default 4. */
  batchSize?: number;
}

/** One held-out score: the step whose links answered (0: the links the run started from). */
export interface HeldOutPoint {
  step: number;
  correct: number;
  total: number;
}

export const heldOutAccuracy = (p: HeldOutPoint): number => (p.total ? p.correct / p.total : 0);

/** '37/40 (92.5%)'. */
export const heldOutText = (p: HeldOutPoint): string => `${p.correct}/${p.total} (${(100 * heldOutAccuracy(p)).toFixed(1)}%)`;

/** Whether step `step` of `maxSteps` is scored: the start, every `every`-th step, and the last. */
export function heldOutDue(step: number, every: number, maxSteps: number): boolean {
  return step === 0 || step === maxSteps || (every > 0 && step % every === 0);
}

/**
 * The best score so far: a later step replaces it only when it answers more questions right (a tie keeps the
 * earlier step, which trained less). `offer` says whether the point became the best.
 */
export class BestHeldOut {
  best: HeldOutPoint | null;

  constructor(from: HeldOutPoint | null = null) {
    this.best = from;
  }

  offer(p: HeldOutPoint): boolean {
    if (this.best && p.total !== this.best.total)
      throw new InvalidArgument(`held-out scores over ${p.total} and ${this.best.total} questions cannot be compared`);
    if (this.best && p.correct <= this.best.correct) return false;
    this.best = { ...p };
    return true;
  }
}

/** The questions of `rows` as evaluation items (math answers, as `rmas run` reads a plain file). */
export async function heldOutItems(rows: readonly Row[]): Promise<EvalItem[]> {
  if (!rows.length) throw new InvalidArgument('held-out evaluation: no validation rows; give some or turn it off');
  return toItems(null, rows);
}

/** Scores `system` as it stands on `items`, greedy, in latent mode, at the options' rounds and latent steps. */
export async function heldOutScore(
  system: MasSystem, items: readonly EvalItem[], o: Pick<HeldOutOptions, 'rounds' | 'latentSteps' | 'batchSize'>, step: number,
  signal?: AbortSignal,
): Promise<HeldOutPoint> {
  const { summary } = await evaluate(system, items, {
    mode: 'latent', rounds: o.rounds, latentSteps: o.latentSteps, sampling: { greedy: true }, batchSize: o.batchSize ?? 4,
    maxNewTokens: defaultMaxNewTokens(system.style, { task: items[0]?.task ?? 'math' }),
    judge: 'off', ...(signal ? { signal } : {}),
  });
  return { step, correct: Math.round(summary.accuracy * summary.samples), total: summary.samples };
}

/** What a run does with each held-out score: print or send it, and keep the links of a new best as a checkpoint. */
export type HeldOutSink = (point: HeldOutPoint, best: boolean, state: TrainerState) => Promise<void>;

/**
 * trainLoop's held-out hook (LoopHooks.heldOut) over `system`: the questions scored before the first step, every
 * `every` steps and after the last, each score offered to `best` and handed to `sink`. `signal` (a stop) cuts a
 * scoring short and skips it: the loop then ends with its final save.
 */
export async function heldOutHook(
  system: MasSystem, o: HeldOutOptions, maxSteps: number, sink: HeldOutSink, best = new BestHeldOut(), signal?: AbortSignal,
): Promise<NonNullable<LoopHooks['heldOut']>> {
  if (!Number.isInteger(o.every) || o.every < 1)
    throw new InvalidArgument(`held-out evaluation every ${o.every} steps: give a positive integer`);
  const items = await heldOutItems(o.rows);
  return {
    due: (step) => heldOutDue(step, o.every, maxSteps),
    async run(state) {
      if (signal?.aborted) return;
      let p: HeldOutPoint;
      try {
        p = await heldOutScore(system, items, o, state.step, signal);
      } catch (e) {
        if (signal?.aborted && e instanceof Cancelled) return;
        throw e;
      }
      await sink(p, best.offer(p), state);
    },
  };
}
