/**
 * The training loop both link loops share: data order (seeded shuffle per epoch, or file order), batches of
 * `batchSize` with `gradAccumSteps` micro-batches per optimizer step, the learning-rate schedule over
 * optimizer steps (transformers' LambdaLR semantics: the first step runs at factor(0)), clipping and AdamW
 * (AdamW), one small readback per step (the gradient norm), progress events, periodic and final
 * saves, pause and stop between steps, and an exact resume from a saved TrainerState.
 *
 * What a batch computes is the caller's (inner.ts / outer.ts through the jobs): `runBatch` runs forward and
 * backward for the samples it is given, with losses scaled by `scale` (1 / gradAccumSteps), and gathers
 * the gradients into the optimizer's flat buffers.
 *
 * Data parallelism (hooks.parallel, src/dist under mpirun): every rank draws the same data order, each
 * micro-batch is `batchSize` samples per rank (the global batch is batchSize × world size, in order, rank r
 * taking the r-th slice), the jobs normalise by the global batch (BatchShard), the gradients are summed
 * across ranks before clipping and AdamW, and the step's figures are the global ones, so that N ranks make
 * the same updates as one process with the whole batch. The saved state counts global samples, so a run
 * resumes at any world size.
 */
import type { AdamW } from '../autograd/ops/optim';
import { Cancelled, InvalidArgument, NonFiniteLoss } from '../errors';
import { Rng } from '../util/rng';
import { yieldToEventLoop } from '../util/yield';
import type { TrainerState } from './checkpoint';
import { lrFactor, type SchedulerType } from './schedule';

export interface LoopOptions {
  maxSteps: number;
  batchSize: number;
  gradAccumSteps: number;
  lr: number;
  scheduler: SchedulerType;
  warmupSteps: number;
  seed: number;
  /** false: every epoch in file order (reproducible comparisons). */
  shuffle: boolean;
  /** Save every N optimizer steps (0: only at the end). */
  saveSteps: number;
}

export interface BatchResult {
  /** The batch's loss (already the batch mean), for logging. */
  loss: number;
  tokens: number;
  /** Samples that contributed; 0 means the batch was entirely skipped. */
  valid: number;
  skipped: Record<string, number>;
}

export interface StepEvent {
  /** Optimizer steps done (1-based after the first). */
  step: number;
  maxSteps: number;
  epoch: number;
  loss: number;
  lr: number;
  gradNorm: number;
  tokens: number;
  tokensPerSec: number;
  elapsedSec: number;
  etaSec: number;
  skipped: Record<string, number>;
  /** Sample indices of every micro-batch of this step. */
  batches: number[][];
  /** The step had no valid sample: no update was made. */
  empty: boolean;
}

/** The whole batch a rank's samples belong to, for normalisers that span ranks. */
export interface BatchShard {
  /** Every sample of this micro-batch across ranks (this rank's `indices` are one slice of it). */
  global: readonly number[];
  /** Element-wise sums across ranks (the values themselves in one process). */
  sum(values: readonly number[]): Promise<number[]>;
}

/** A data-parallel world (src/dist/group.ts dataParallel). */
export interface DataParallel {
  rank: number;
  size: number;
  /** Element-wise sums across ranks. */
  sum(values: readonly number[]): Promise<number[]>;
  /** Every rank's JSON value, in rank order. */
  gather<T>(value: T): Promise<T[]>;
  /** Sums the gathered gradients across ranks, in place on every rank. */
  reduceGradients(): Promise<void>;
}

const ONE_PROCESS: BatchShard['sum'] = async (values) => [...values];
/** A batch that is the whole batch (one process). */
export const wholeBatch = (indices: readonly number[]): BatchShard => ({ global: indices, sum: ONE_PROCESS });

export interface LoopHooks {
  optimizer: AdamW;
  /**
   * Forward and backward of this rank's samples, gradients gathered into the optimizer's buffers. With data
   * parallelism the result's loss is this rank's part of the global batch loss (the ranks' parts sum to it).
   */
  runBatch(indices: number[], scale: number, shard: BatchShard): Promise<BatchResult>;
  /** Several ranks (mpirun); absent: one process. */
  parallel?: DataParallel;
  onStep?(e: StepEvent): void | Promise<void>;
  /** Periodic (final false) and last (final true) saves, with the state to resume from. */
  save?(state: TrainerState, final: boolean): Promise<void>;
  /**
   * Held-out evaluation between steps (src/eval/held-out.ts): `run` gets the state before the run's first step and
   * after each step `due` names (before that step's periodic save), so that it can keep the best links as a checkpoint.
   */
  heldOut?: { due(step: number): boolean; run(state: TrainerState): Promise<void> };
  /** Awaited between steps: a paused run waits here. */
  waitIfPaused?(): Promise<void>;
  signal?: AbortSignal;
}

/** A fresh state for `n` samples (the first epoch's order drawn from the seeded Rng). */
export function initialState(n: number, opts: Pick<LoopOptions, 'seed' | 'shuffle'>): TrainerState {
  const rng = new Rng(opts.seed);
  return { step: 0, epoch: 0, sampleCursor: 0, order: epochOrder(n, rng, opts.shuffle), rng: rng.state(), skipped: {}, tokensSeen: 0 };
}

function epochOrder(n: number, rng: Rng, shuffle: boolean): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  if (shuffle) {
    for (let i = n - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [order[i], order[j]] = [order[j], order[i]];
    }
  }
  return order;
}

/**
 * Runs optimizer steps until `maxSteps` (or a stop); returns the final state. `state` is a fresh
 * initialState() or one loaded from a checkpoint (then the run continues exactly where it stopped).
 */
export async function trainLoop(
  n: number,
  opts: LoopOptions,
  hooks: LoopHooks,
  state: TrainerState,
): Promise<TrainerState & { stopped: boolean }> {
  const { gradAccumSteps, maxSteps } = opts;
  const dp = hooks.parallel;
  const world = dp?.size ?? 1;
  const rank = dp?.rank ?? 0;
  // the order is drawn in global batches; this rank trains on its slice of each
  const batchSize = opts.batchSize * world;
  if (!Number.isInteger(opts.batchSize) || opts.batchSize < 1)
    throw new InvalidArgument(`batch size must be a positive integer, got ${opts.batchSize}`);
  if (!Number.isInteger(gradAccumSteps) || gradAccumSteps < 1)
    throw new InvalidArgument(`gradient accumulation steps must be a positive integer, got ${gradAccumSteps}`);
  if (!Number.isInteger(maxSteps) || maxSteps < 1) throw new InvalidArgument(`max steps must be a positive integer, got ${maxSteps}`);
  if (n < batchSize)
    throw new InvalidArgument(
      `${n} usable samples cannot fill one batch of ${batchSize}${world > 1 ? ` (${opts.batchSize} on each of ${world} ranks)` : ''} ` +
        '(batches drop the remainder, as upstream); lower --batch_size or add data',
    );
  if (state.order.length !== n)
    throw new InvalidArgument(
      `the saved data order has ${state.order.length} samples but the data now has ${n}; resume with the same dataset and filters`,
    );
  const rng = Rng.fromState(state.rng);
  const s: TrainerState = { ...state, order: [...state.order], skipped: { ...state.skipped } };
  const opt = hooks.optimizer;
  const t0 = performance.now();
  const stepsAtStart = s.step;

  const nextBatch = (): number[] => {
    // drop_last: a new epoch starts when the rest of the order cannot fill a batch
    if (s.sampleCursor + batchSize > n) {
      s.epoch++;
      s.order = epochOrder(n, rng, opts.shuffle);
      s.sampleCursor = 0;
    }
    const b = s.order.slice(s.sampleCursor, s.sampleCursor + batchSize);
    s.sampleCursor += batchSize;
    return b;
  };
  const snapshot = (): TrainerState => ({ ...s, order: [...s.order], skipped: { ...s.skipped }, rng: rng.state() });
  // the links are checked before every save: an update can overflow (a learning rate of 1e308) with a finite loss and norm
  const save = async (final: boolean) => {
    if (!hooks.save) return;
    await checkFiniteParams(opt, s.step, final);
    await hooks.save(snapshot(), final);
  };
  if (s.step < maxSteps) await hooks.heldOut?.run(snapshot());

  while (s.step < maxSteps) {
    await yieldToEventLoop();
    await hooks.waitIfPaused?.();
    if (hooks.signal?.aborted) {
      await save(true);
      return { ...snapshot(), stopped: true };
    }
    const ts = performance.now();
    opt.zeroGrad();
    let loss = 0;
    let tokens = 0;
    let valid = 0;
    const skipped: Record<string, number> = {};
    const batches: number[][] = [];
    for (let a = 0; a < gradAccumSteps; a++) {
      const global = nextBatch();
      batches.push(global);
      const idx = global.slice(rank * opts.batchSize, (rank + 1) * opts.batchSize);
      const r = await hooks.runBatch(idx, 1 / gradAccumSteps, { global, sum: dp ? dp.sum : ONE_PROCESS });
      loss += r.loss / gradAccumSteps;
      tokens += r.tokens;
      valid += r.valid;
      for (const [k, v] of Object.entries(r.skipped)) skipped[k] = (skipped[k] ?? 0) + v;
    }
    if (hooks.signal?.aborted) throw new Cancelled(`cancelled during step ${s.step + 1}; the last saved checkpoint is intact`);
    if (dp) {
      // the global step: gradients summed before clipping, figures summed over ranks (identical on every rank)
      await dp.reduceGradients();
      const all = await dp.gather({ loss, tokens, valid, skipped });
      loss = all.reduce((x, r) => x + r.loss, 0);
      tokens = all.reduce((x, r) => x + r.tokens, 0);
      valid = all.reduce((x, r) => x + r.valid, 0);
      for (const k of Object.keys(skipped)) delete skipped[k];
      for (const r of all) for (const [k, v] of Object.entries(r.skipped)) skipped[k] = (skipped[k] ?? 0) + v;
    }
    // the schedule follows optimizer updates (a step with no valid sample makes none)
    const lr = opts.lr * lrFactor(opts.scheduler, opt.t, opts.warmupSteps, maxSteps);
    let gradNorm = 0;
    if (valid > 0) {
      const where = `step ${s.step + 1}`;
      if (!Number.isFinite(loss)) throw new NonFiniteLoss(`${where}: the loss is ${loss}; no update was made`);
      gradNorm = await opt.checkedStep(lr, where);
    }
    s.step++;
    s.tokensSeen += tokens;
    for (const [k, v] of Object.entries(skipped)) s.skipped[k] = (s.skipped[k] ?? 0) + v;
    const now = performance.now();
    const perStep = (now - t0) / 1000 / (s.step - stepsAtStart);
    await hooks.onStep?.({
      step: s.step,
      maxSteps,
      epoch: s.epoch,
      loss,
      lr,
      gradNorm,
      tokens,
      tokensPerSec: tokens / Math.max(1e-9, (now - ts) / 1000),
      elapsedSec: (now - t0) / 1000,
      etaSec: perStep * (maxSteps - s.step),
      skipped,
      batches,
      empty: valid === 0,
    });
    if (hooks.heldOut?.due(s.step)) await hooks.heldOut.run(snapshot());
    if (opts.saveSteps > 0 && s.step % opts.saveSteps === 0 && s.step < maxSteps) await save(false);
  }
  await save(true);
  return { ...snapshot(), stopped: false };
}

/**
 * NonFiniteLoss when a link parameter is NaN or infinite after step `step` (one readback per flat buffer): the save it
 * precedes is not made, so no checkpoint ever holds a non-finite value.
 */
async function checkFiniteParams(opt: AdamW, step: number, final: boolean) {
  let bad = 0;
  let total = 0;
  let first: string | null = null;
  for (const p of opt.params) {
    const all = await p.readFlat('data');
    for (const e of p.entries) {
      total += e.numel;
      for (let i = e.offset; i < e.offset + e.numel; i++) {
        if (Number.isFinite(all[i]!)) continue;
        bad++;
        first ??= `${all[i]} in ${e.name}[${i - e.offset}]`;
      }
    }
  }
  if (!bad) return;
  throw new NonFiniteLoss(`step ${step}: after its update the links hold ${bad} of ${total} values non-finite (the first, ${first}); ` +
    `the ${final ? 'final save' : `save of step ${step}`} was not made`);
}
