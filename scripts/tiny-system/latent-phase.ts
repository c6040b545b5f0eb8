/**
 * The latent-reading phase of the tiny system (issue 7): each agent, already trained in text, learns to
 * read its own inner link's output, together with the link.
 *
 * Why: agents trained from scratch on discrete tokens only are brittle off the embedding rows. Fed
 * Inner(h) in place of the next token, the text-trained critic drifted into garbage after about five
 * latent steps (argmax of lm_head over its rollout), although the same agent tolerates Gaussian noise of
 * 30 % of an embedding's norm, and rescaling Inner(h) to the embeddings' norm changed nothing: the link's
 * outputs were simply not read as the tokens they stand for. Released backbones read soft inputs from
 * pretraining at scale; these agents have to be taught.
 *
 * What: per step, for each chat of the role (as train-agents builds them), the agent's text loss (masked
 * LM cross-entropy over the assistant span) plus the inner loop's loss with the read-back term
 * (src/train/inner.ts: cosine to the next token's embedding, and the cross-entropy of the agent reading
 * its whole assistant span as Inner(Hs[t]) rows), backpropagated into both the agent's weights and the
 * link's. One AdamW (no weight decay) over both, in one or more cosine cycles (warm restarts). It starts
 * from the text-trained agent and the link `rmas train-inner --adapter_ce_weight 1` made for it, and writes
 * both back (the agent's model.safetensors, the link's adapter.pt in upstream layout, f32).
 *
 *   npx tsx scripts/tiny-system/build.ts latent --system DIR --role R --link FILE.pt [--steps N (one cycle)] [--seed S]
 *     [--losses FILE.json]
 *
 * On the CPU backend the run is a pure function of its inputs and the seed.
 */
import { AdamW } from '../../src/autograd/ops/optim.ts';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { InvalidArgument } from '../../src/errors.ts';
import { InnerLink } from '../../src/mas/links.ts';
import { readLinkFile, writeLinkFile } from '../../src/mas/upstream.ts';
import { parseDecoderConfig } from '../../src/model/config.ts';
import { createTrainableDecoder, saveDecoderCheckpoint } from '../../src/model/trainable.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { loadTokenizerFromDir } from '../../src/tokenizer/index.ts';
import { innerPairs, innerSampleStep, rolloutSampleStep } from '../../src/train/inner.ts';
import { initialState, trainLoop } from '../../src/train/loop.ts';
import { taskSplit } from '../../src/eval/tiny-task.ts';
import { drillExamples, loadF32Checkpoint, recordSteps, ROLES, roleExamples, sequenceStep, type AgentRole } from './train-agents.ts';

/**
 * Settings of the committed system's latent phase. Each role runs one or more cosine cycles (warm
 * restarts: a fresh optimizer and schedule, data order from seed + k for cycle k); the critic, whose
 * rollout copies operands and computes, needs most.
 */
export const LATENT_DEFAULTS = {
  cycles: { planner: [300], critic: [500], solver: [300] } as Record<AgentRole, readonly number[]>,
  /** Weight of the rollout read-back term in each cycle (0: off). */
  rollout: { planner: [0], critic: [0], solver: [0] } as Record<AgentRole, readonly number[]>,
  /** Arithmetic drill sequences mixed into each cycle's chats (0: none). */
  drills: { planner: [0], critic: [0], solver: [0] } as Record<AgentRole, readonly number[]>,
  batchSize: 8,
  lr: 1e-3,
  warmup: 10,
  /** Weights of the link's loss terms (src/train/inner.ts); the agent's text loss has weight 1. */
  weights: { cos: 1, mse: 0, ce: 1 },
  maxLength: 512,
} as const;

export interface LatentPhaseOptions {
  /** The system folder: the agent is read from and written to DIR/<role>/. */
  system: string;
  role: AgentRole;
  /** The inner link to start from (upstream .pt); the result is written to DIR/<role>/adapter.pt. */
  link: string;
  /** Steps of each cosine cycle (default LATENT_DEFAULTS.cycles[role]). */
  cycles?: readonly number[];
  seed?: number;
  backend?: Backend;
  /** Use only the first N train rows (tests). */
  trainRows?: number;
  /** Stop after this many steps in all (tests); nothing is written then. */
  stopAfter?: number;
  /**
   * Weight of the rollout read-back term (src/train/inner.ts rolloutSampleStep) in each cycle, added to
   * every chat's loss (0: off); default LATENT_DEFAULTS.rollout[role], or 0 for every cycle given in `cycles`.
   */
  rolloutWeights?: readonly number[];
  /** Learning rate (default LATENT_DEFAULTS.lr). */
  lr?: number;
  /**
   * Arithmetic drills (train-agents' drillExamples, drawn from the cycle's seed) mixed into each cycle's
   * chats: text loss on their results, and the link's terms with the whole drill read back as link
   * outputs, scored on the results; default LATENT_DEFAULTS.drills[role], or none in every cycle given in `cycles`.
   */
  drills?: readonly number[];
  log?: (line: string) => void;
}

export interface LatentPhaseResult {
  role: AgentRole;
  /** Loss of every step: text cross-entropy + cos + read-back cross-entropy, batch means. */
  losses: number[];
  seconds: number;
}

export async function latentPhase(opts: LatentPhaseOptions): Promise<LatentPhaseResult> {
  const cycles = opts.cycles ?? LATENT_DEFAULTS.cycles[opts.role];
  if (!cycles.length || cycles.some((n) => !Number.isInteger(n) || n < 1))
    throw new InvalidArgument(`latent phase: cycles must be positive step counts, got [${cycles}]`);
  // a per-cycle setting: as given, else the defaults' with the default cycles, else 0 in every given cycle
  const perCycle = (given: readonly number[] | undefined, defaults: readonly number[], what: string, ok: (x: number) => boolean) => {
    const v = given ?? (opts.cycles ? cycles.map(() => 0) : defaults);
    if (v.length !== cycles.length || !v.every(ok))
      throw new InvalidArgument(`latent phase: one ${what} per cycle expected, got [${v}] for cycles [${cycles}]`);
    return v;
  };
  const rollout = perCycle(
    opts.rolloutWeights,
    LATENT_DEFAULTS.rollout[opts.role],
    'non-negative rollout weight',
    (w) => w >= 0 && Number.isFinite(w),
  );
  const drillCounts = perCycle(
    opts.drills,
    LATENT_DEFAULTS.drills[opts.role],
    'drill count (an integer >= 0)',
    (n) => Number.isInteger(n) && n >= 0,
  );
  const seed = opts.seed ?? 7;
  const be = opts.backend ?? new CpuBackend('f32');
  const log = opts.log ?? ((s: string) => process.stdout.write(`${s}\n`));
  const dir = join(resolve(opts.system), opts.role);
  const config = parseDecoderConfig(JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')), join(dir, 'config.json'));
  const tok = await loadTokenizerFromDir(dir);
  const { decoder, params } = createTrainableDecoder(config, be, { seed });
  const link = InnerLink.fromStateDict(be, await readLinkFile(opts.link), { d: config.hidden, name: `${opts.role} inner link` });
  const t0 = performance.now();
  try {
    params.import(await loadF32Checkpoint(join(dir, 'model.safetensors'), 'the latent phase'));
    const rows = taskSplit('train').slice(0, opts.trainRows ?? Infinity);
    const chats = roleExamples(tok, opts.role, rows, LATENT_DEFAULTS.maxLength).examples.map((c) => ({ ...c, textMask: c.lossMask }));
    const losses: number[] = [];
    const stop = new AbortController();
    for (const [k, steps] of cycles.entries()) {
      if (stop.signal.aborted) break;
      const phaseSeed = (seed + k) * 1000 + 700 + ROLES.indexOf(opts.role);
      // a drill as a read-back sample: its first token is the prompt, the rest the span, scored on the results
      const drills = drillExamples(tok, drillCounts[k]!, (seed + k) * 1000 + 77).map((d) => ({
        ids: d.ids, lossMask: d.ids.map((_, t) => (t ? 1 : 0)), readMask: d.lossMask, textMask: d.lossMask,
      }));
      const examples = [...chats, ...drills];
      // a fresh optimizer per cycle: the AdamW moments live in the parameter buffers, so they are zeroed too
      params.resetOptimizerState();
      link.params.resetOptimizerState();
      const optimizer = new AdamW([params, link.params], { weightDecay: 0 });
      optimizer.zeroGrad();
      await trainLoop(
        examples.length,
        {
          maxSteps: steps,
          batchSize: LATENT_DEFAULTS.batchSize,
          gradAccumSteps: 1,
          lr: opts.lr ?? LATENT_DEFAULTS.lr,
          scheduler: 'cosine',
          warmupSteps: Math.min(LATENT_DEFAULTS.warmup, steps - 1),
          seed: phaseSeed,
          shuffle: true,
          saveSteps: 0,
        },
        {
          optimizer,
          signal: stop.signal,
          runBatch: async (indices, scale) => {
            const batchPairs = indices.reduce((n, i) => n + innerPairs(examples[i]!), 0);
            let loss = 0;
            let tokens = 0;
            for (const i of indices) {
              const ex = examples[i]!;
              loss += (await sequenceStep(decoder, { ids: ex.ids, lossMask: ex.textMask }, scale / indices.length)) / indices.length;
              // the link's share is already weighted by the sample's pairs over the batch's
              const share = await innerSampleStep(decoder, link, ex, LATENT_DEFAULTS.weights, batchPairs / scale);
              loss += (await share.read())[0]! / scale;
              share.dispose();
              if (rollout[k] && !('readMask' in ex)) {
                const r = await rolloutSampleStep(decoder, link, ex, rollout[k]!, batchPairs / scale);
                loss += (await r.read())[0]! / scale;
                r.dispose();
              }
              tokens += ex.ids.length;
            }
            optimizer.gather();
            return { loss, tokens, valid: indices.length, skipped: {} };
          },
          onStep: recordSteps(losses, stop, {
            stopAfter: opts.stopAfter,
            every: 20,
            log,
            label: (e) => `${opts.role} latent cycle ${k + 1}/${cycles.length} step ${e.step}/${e.maxSteps}`,
          }),
        },
        initialState(examples.length, { seed: phaseSeed, shuffle: true }),
      );
    }
    if (!stop.signal.aborted) {
      await saveDecoderCheckpoint(dir, params, { dtype: 'f32' });
      await writeLinkFile(link, join(dir, 'adapter.pt'), { dtype: 'f32' });
    }
    return { role: opts.role, losses, seconds: (performance.now() - t0) / 1000 };
  } finally {
    link.dispose();
    params.dispose();
    decoder.dispose();
  }
}
