/**
 * One link-training run of the engine worker (TrainRequest → the shared job and loop of src/train), kept
 * apart from the worker's comlink wiring so that Node tests run it on the CPU backend. A request with
 * `resume` continues an interrupted run exactly: links, AdamW moments and t, and the trainer state (step,
 * epoch, data order, cursor, Rng) from the run's checkpoint, with the loop settings it was started with.
 */
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint } from '../src/errors';
import { type Backend, CpuBackend } from '../src/tensor';
import type { PromptSet, StyleSpec } from '../src/mas';
import type { FileStore } from '../src/train';
import type { TrainEvent, TrainOptions, TrainRequest, TrainResult } from './protocol';

export interface TrainRun {
  id: string;
  /** The train call's signal (cancel(callId)): the run ends after its current step, with a final checkpoint. */
  stop: AbortSignal;
  paused: boolean;
  /** Wakes a loop held in waitIfPaused (resume or stop). */
  wake: (() => void) | null;
  store: FileStore | null;
}

export interface TrainDeps {
  /** The run's checkpoint store (the same one again for the same run id, so a resumed run finds its checkpoints). */
  storeFor(runId: string): Promise<FileStore>;
  /** The backend for the request's wish, and why it differs when it does. */
  backend(want: 'webgpu' | 'cpu' | undefined): Promise<{ backend: Backend; reason?: string }>;
  /** How model and tokenizer files are fetched (default: the global fetch). */
  fetch?: typeof fetch;
}

const RUN_ID = /^run-[A-Za-z0-9_-]{1,64}$/;

/** The folder of a run's store that holds its best held-out checkpoint (TrainRequest.heldOut). */
export const BEST_DIR = 'best';

/** The run id a request trains under: its resume's (checked), else a new one. */
export function runIdFor(req: TrainRequest, fresh: () => string): string {
  const r = req.resume;
  if (r === undefined) return fresh();
  if (typeof r?.runId !== 'string' || !RUN_ID.test(r.runId))
    throw new InvalidArgument(`train: resume.runId must be the id of an earlier run (run-…), got ${JSON.stringify(r?.runId)}`);
  return r.runId;
}

/** Where a resume starts: the named checkpoint folder, else the run's latest; its settings from train_args.json. */
async function resumePoint(
  store: FileStore,
  req: TrainRequest,
): Promise<{ dir: string; options: TrainOptions; args: Record<string, unknown> }> {
  const { latestCheckpoint, TRAINER_STATE_FILE, TRAIN_ARGS_FILE, OPTIMIZER_FILE, inFolder, folderPath } = await import('../src/train');
  const runId = req.resume!.runId;
  let dir: string;
  if (req.resume!.checkpoint !== undefined) dir = folderPath(req.resume!.checkpoint);
  else {
    try {
      dir = (await latestCheckpoint(store, '.')).dir;
    } catch (e) {
      if (!(e instanceof MissingCheckpoint)) throw e;
      throw new MissingCheckpoint(`resume: run ${runId} has no complete checkpoint in this browser's storage; start a new run instead`);
    }
  }
  const where = `checkpoint ${dir || '.'} of run ${runId}`;
  for (const f of [TRAINER_STATE_FILE, OPTIMIZER_FILE, TRAIN_ARGS_FILE]) {
    if (!(await store.exists(inFolder(dir, f)))) {
      throw new CorruptCheckpoint(
        `resume: ${where} has no ${f}, so it cannot be resumed exactly; start a new run from it instead (its links as initLinks)`,
      );
    }
  }
  let args: unknown;
  try {
    args = JSON.parse(new TextDecoder().decode(await store.read(inFolder(dir, TRAIN_ARGS_FILE))));
  } catch (e) {
    throw new CorruptCheckpoint(
      `resume: ${where}: ${TRAIN_ARGS_FILE} is not JSON (${(e as Error).message}); start a new run from it instead`,
    );
  }
  const a = args as { command?: unknown; style?: unknown; role?: unknown; resolved?: unknown };
  if (
    typeof a !== 'object' ||
    a === null ||
    typeof a.resolved !== 'object' ||
    a.resolved === null ||
    typeof (a.resolved as TrainOptions).maxSteps !== 'number'
  ) {
    throw new CorruptCheckpoint(
      `resume: ${where}: ${TRAIN_ARGS_FILE} lacks the run's settings (resolved); start a new run from it instead`,
    );
  }
  if (a.command !== `train-${req.kind}`)
    throw new InvalidArgument(
      `resume: run ${runId} was ${String(a.command)}, not train-${req.kind}; resume it with kind '${String(a.command).replace('train-', '')}'`,
    );
  return { dir, options: a.resolved as TrainOptions, args: a as Record<string, unknown> };
}

/**
 * The request's prompt set: its prompts.json by URL or bytes. An embedded style has its own, which its agents were
 * trained on; without them a run would train its links on upstream's prompts, which the system never asks with.
 */
async function requestPrompts(req: TrainRequest, style: StyleSpec, fetcher: typeof fetch): Promise<PromptSet | undefined> {
  const { loadPromptSet } = await import('../src/mas');
  const p = req.prompts;
  if (p === undefined) {
    if (style.embedded)
      throw new InvalidArgument(`train: style ${style.name} asks with its own prompts; give prompts, the URL of its prompts.json`);
    return undefined;
  }
  if (p instanceof Uint8Array) return loadPromptSet(new TextDecoder().decode(p), 'prompts');
  const res = await fetcher(p);
  if (!res.ok) throw new InvalidArgument(`train: prompts ${p} answered HTTP ${res.status}`);
  return loadPromptSet(await res.text(), p);
}

/** A resumed run's best held-out score before it stopped (its best checkpoint's train_args.json), if it has one. */
async function bestSoFar(store: FileStore): Promise<{ step: number; correct: number; total: number } | null> {
  const { TRAIN_ARGS_FILE, inFolder } = await import('../src/train');
  const file = inFolder(BEST_DIR, TRAIN_ARGS_FILE);
  if (!(await store.exists(file))) return null;
  try {
    type Args = { held_out_best?: { step: number; correct: number; total: number } };
    return (JSON.parse(new TextDecoder().decode(await store.read(file))) as Args).held_out_best ?? null;
  } catch {
    return null; // an unreadable record: the resumed run finds its best anew
  }
}

/** Sets the job up from the request (models fetched by URL), runs trainLoop with pause/stop and saves, and cleans up. */
export async function trainRun(
  req: TrainRequest,
  run: TrainRun,
  emit: (e: TrainEvent) => Promise<void>,
  deps: TrainDeps,
): Promise<TrainResult> {
  const [
    { parseLinkBytes },
    { loadDecoderFromUrl },
    { loadTokenizerFromUrl },
    { saveCheckpoint, loadCheckpoint, initialState, trainLoop, setupTraining, TRAIN_DEFAULTS, trainingRole, trainingStyle },
    { heldOutHook, BestHeldOut },
  ] = await Promise.all([
    import('../src/mas'), import('../src/model'), import('../src/tokenizer'), import('../src/train'), import('../src/eval'),
  ]);
  if (req.kind !== 'inner' && req.kind !== 'outer')
    throw new InvalidArgument(`train: kind must be 'inner' or 'outer', got ${JSON.stringify(req.kind)}`);
  if (!Array.isArray(req.rows))
    throw new InvalidArgument('train: rows must be an array of parsed dataset rows (parseJsonRows / parseJsonlRows)');
  run.store = await deps.storeFor(run.id);
  const resume = req.resume ? await resumePoint(run.store, req) : null;
  // a resumed run keeps the settings it started with (schedule, batch, seed, …), whatever the request says
  const o = resume?.options ?? req.options ?? ({} as TrainOptions);
  const { backend, reason } = await deps.backend(req.backend);
  const net = deps.fetch ? { fetch: deps.fetch } : {};
  const style = trainingStyle(req.style ?? 'sequential_light');
  if (resume && (resume.args.style !== style.name || (req.kind === 'inner' && resume.args.role !== req.role))) {
    throw new InvalidArgument(
      `resume: run ${run.id} trained ${String(resume.args.style)}${req.kind === 'inner' ? ` role ${String(resume.args.role)}` : ''}; resume it with the same style${req.kind === 'inner' ? ' and role' : ''}`,
    );
  }
  if (req.kind === 'inner') {
    if (!req.model) throw new InvalidArgument('train (inner): model, the URL of the model folder, is required');
    if (!req.role) throw new InvalidArgument(`train (inner): role is required (one of ${style.roles.map((r) => r.key).join(', ')})`);
  }
  /** A role's model folder URL; outer (and an inner run's system): with its inner link, both required of every role. */
  const trained = req.kind === 'inner' ? trainingRole(style, req.role!) : null;
  const agent = (role: string) => {
    if (role === trained) return { model: req.model!, innerLink: null };
    const a = req.agents?.[role];
    if (!a?.model || !a.innerLink)
      throw new InvalidArgument(
        `train (${req.kind === 'outer' ? 'outer' : 'inner with heldOut'}): agents.${role} needs model (a folder URL) and innerLink (bytes) ` +
          `for style ${style.name}`,
      );
    return a;
  };
  const prompts = await requestPrompts(req, style, deps.fetch ?? fetch);
  const init = (key: string) => (!resume && req.initLinks?.[key] ? parseLinkBytes(req.initLinks[key], `initLinks.${key}`) : null);
  const setup = await setupTraining({
    kind: req.kind, style, task: o.task, seed: o.seed, maxLength: o.maxLength, batchSize: o.batchSize, ...(prompts ? { prompts } : {}),
    ...(trained ? { role: trained } : {}),
    steps: o.maxSteps, gradAccumSteps: o.gradAccumSteps, lr: o.lr, scheduler: o.scheduler, shuffle: o.shuffle,
    // a short run warms up for a tenth of its steps at most
    warmupSteps: o.warmupSteps ?? Math.min(TRAIN_DEFAULTS.warmupSteps, Math.floor(o.maxSteps / 10)),
    // the page keeps the last checkpoint unless asked for more
    saveSteps: o.saveSteps ?? 0,
    inner: { cos: o.cosWeight, mse: o.mseWeight },
    outer: {
      rounds: o.rounds, maxLatentTokens: o.maxLatentTokens, latents: o.latents, superviseFinalOnly: o.superviseFinalOnly,
      nonLastLossWeight: o.nonLastLossWeight, untilEos: o.untilEos,
    },
  }, req.rows, {
    backend: () => backend,
    decoder: (role, on) =>
      loadDecoderFromUrl(agent(role).model, on, { what: req.kind === 'inner' ? 'model' : `agents.${role}.model`, ...net }),
    tokenizer: (role) => loadTokenizerFromUrl(agent(role).model, net),
    innerLink: async (role) => {
      const bytes = agent(role).innerLink;
      return bytes ? parseLinkBytes(bytes, `agents.${role}.innerLink`) : init('adapter');
    },
    outerLink: async (key) => {
      const state = init(key);
      return state ? { state } : null;
    },
    // an inner run's held-out questions go through the whole system: the other agents and the outer links, frozen
    ...(trained && req.heldOut ? {
      system: {
        innerLink: async (role: string) => parseLinkBytes(agent(role).innerLink!, `agents.${role}.innerLink`),
        outerLink: async (key: string) => {
          const b = req.heldOut!.outerLinks?.[key];
          if (!b) throw new InvalidArgument(`train (inner) with heldOut: heldOut.outerLinks.${key}, the system's outer link, is required`);
          return { state: parseLinkBytes(b, `heldOut.outerLinks.${key}`) };
        },
      },
    } : {}),
  });
  try {
    const { job, manifests, loop: loopOpts, task } = setup;
    const store = run.store;
    const args = resume?.args ?? {
      command: `train-${req.kind}`,
      source: 'playground',
      model: req.model,
      style: style.name,
      role: req.role,
      resolved: { ...o, ...loopOpts, task },
    };
    let state = initialState(job.size, loopOpts);
    if (resume) {
      // weights, moments and t go into the links just built; the state carries step, epoch, order, cursor and Rng
      const loaded = await loadCheckpoint(store, resume.dir, job.links);
      job.optimizer.t = loaded.optimizerT;
      state = loaded.state;
    }
    await emit({
      type: 'start',
      runId: run.id,
      backend: backend instanceof CpuBackend ? 'cpu' : 'webgpu',
      samples: job.size,
      dropped: job.dropped,
      ...(reason ? { reason } : {}),
      ...(resume ? { resumedFrom: state.step } : {}),
    });
    // the loop's own signal, aborted only here between steps (an abort inside a step throws Cancelled), so that a
    // stop always ends with the loop's final save
    const ctl = new AbortController();
    run.stop.addEventListener('abort', () => run.wake?.(), { once: true });
    // held-out questions through the system as it trains; the best step's links go to BEST_DIR
    const h = req.heldOut;
    // a resumed run goes on from the best it had (its best checkpoint's record)
    let best = h && resume ? ((await bestSoFar(store)) ?? undefined) : undefined;
    const heldOut = h && setup.system ? await heldOutHook(setup.system, {
      rows: h.rows, every: h.every, rounds: h.rounds ?? setup.outerLoss?.rounds ?? 1, latentSteps: h.latentSteps,
    }, loopOpts.maxSteps, async (p, isBest, st) => {
      if (isBest) {
        await saveCheckpoint(store, BEST_DIR, {
          kind: req.kind, links: job.links, optimizerT: job.optimizer.t, state: st, args: { ...args, held_out_best: p }, manifests,
        });
        best = p;
      }
      await emit({ type: 'heldOut', ...p, best: isBest });
    }, new BestHeldOut(best ?? null), run.stop) : null;
    const final = await trainLoop(
      job.size,
      loopOpts,
      {
        optimizer: job.optimizer,
        runBatch: (idx, scale, shard) => job.runBatch(idx, scale, shard),
        signal: ctl.signal,
        ...(heldOut ? { heldOut } : {}),
        async waitIfPaused() {
          if (run.paused && !run.stop.aborted) {
            await emit({ type: 'paused' });
            while (run.paused && !run.stop.aborted) await new Promise<void>((r) => (run.wake = r));
            run.wake = null;
            if (!run.stop.aborted) await emit({ type: 'resumed' });
          }
          if (run.stop.aborted) ctl.abort();
        },
        onStep: (e) =>
          emit({
            type: 'step',
            step: e.step,
            maxSteps: e.maxSteps,
            loss: e.loss,
            lr: e.lr,
            gradNorm: e.gradNorm,
            tokensPerSec: e.tokensPerSec,
            etaSec: e.etaSec,
          }),
        async save(s, last) {
          await saveCheckpoint(store, last ? '.' : `checkpoint-${s.step}`, {
            kind: req.kind,
            links: job.links,
            optimizerT: job.optimizer.t,
            state: s,
            args,
            manifests,
          });
          await emit({ type: 'saved', step: s.step, final: last });
        },
      },
      state,
    );
    await emit({ type: 'done', steps: final.step, stopped: final.stopped, ...(best ? { best } : {}) });
    return { runId: run.id, steps: final.step, stopped: final.stopped };
  } finally {
    setup.dispose();
  }
}
