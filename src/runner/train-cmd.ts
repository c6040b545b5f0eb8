/**
 * `rmas train-inner` and `rmas train-outer`: the link training loops in Node (docs/method.md §6). Turns the flags
 * into settings, loads rows, sets the job up from folders (src/train/setup.ts), runs trainLoop with a progress line,
 * optional per-step JSONL log and batch dumps, and saves checkpoints into --save_dir (periodic ones in
 * checkpoint-<step>/, the last one at the top, upstream's layout).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve as resolvePath } from 'node:path';
import {
  broadcastParameters, checkSameParameters, dataParallel, fromRoot, singleProcess, type ProcessGroup,
} from '../dist/group';
import { MissingCheckpoint, NonFiniteLoss, UsageError } from '../errors';
import { BestHeldOut, heldOutHook, heldOutText, type HeldOutPoint, type HeldOutSink } from '../eval/held-out';
import { writeSafetensors, type StTensor } from '../formats/safetensors';
import type { InnerLink } from '../mas/links';
import { defaultLatentSteps, type StyleSpec } from '../mas/styles';
import type { MasSystem } from '../mas/system';
import { embeddedPath, embeddedRoot, loadEmbeddedPrompts, missingTinySystem } from '../mas/system-folders';
import { adapterTaskFor, readLinkFile, resolveOuterFolder, resolveRoleFiles, type OuterLinkFile } from '../mas/upstream';
import { loadDecoderFromDir } from '../model';
import type { Backend } from '../tensor/backend';
import { loadTokenizerFromDir } from '../tokenizer';
import { latestCheckpoint, loadCheckpoint, pruneCheckpoints, saveCheckpoint, type TrainerState } from '../train/checkpoint';
import { nodeStore, pendingCommit } from '../train/file-store';
import { loadRows, type RowSource } from '../train/data';
import { placeModelFiles, type PlacedModel } from '../train/model-files';
import { initialState, trainLoop, type LoopHooks, type StepEvent } from '../train/loop';
import { setupTraining, TRAIN_DEFAULTS, trainingStyle, type TrainLoaders } from '../train/setup';
import { materialize } from '../store/bundle-node';
import { hubDatasetFiles } from '../store/hub-datasets';
import { numberFlag } from './args';
import { readPrompts, thinkingTokenizer } from './ask-cmd';
import { gradientCollectives, setResumeNote } from './dist';
import { checkOutputFile, checkOutputFolder, writing } from './outputs';
import { withOutputLocks, type OutputLocks } from './output-lock';
import { checkSavePlace, claimSaveDir } from './save-dir';
import { progressPrinter, runnerHub } from './hub';
import { agentFlags, flagSettings, need, NO_EFFECT, type StringFlag, type TrainArgs } from './train-args';

export interface TrainIO {
  out(s: string): void;
  err(s: string): void;
  /** Progress redraws one line when true, else prints a line every --logging_steps steps. */
  tty: boolean;
}

/**
 * A model folder flag: the given path or repo, else (for an embedded style) the role's folder of the
 * shipped system, whose absence is missingTinySystem; else the flag is required.
 */
async function modelArg(
  a: TrainArgs, k: StringFlag, what: string, style: StyleSpec, role: string, err: (s: string) => void,
): Promise<string> {
  const given = a[k];
  if (given || !style.embedded) return resolveModel(what, need(a, k), err);
  const dir = embeddedPath(style, await embeddedRoot(style), style.roles.find((r) => r.key === role)!.repo);
  if (!existsSync(join(dir, 'config.json')))
    throw missingTinySystem(style, `${what} (default of ${style.name})`, `${dir} holds no config.json`);
  return dir;
}

/** A local folder as given, or a repo id's snapshot in the Hugging Face cache (fetched from the hub when missing). */
async function resolveModel(what: string, p: string, err: (s: string) => void): Promise<string> {
  if (existsSync(p)) return p;
  if (/^[\w.-]+\/[\w.-]+$/.test(p)) return runnerHub(err).repoFolder(p, what);
  throw new MissingCheckpoint(`${what}: ${p} is neither a local folder nor a Hugging Face repo id (Org/Name); give one of them`);
}

/** A link given as a file, or as a folder holding adapter files (a role repo or a train-inner save_dir). */
async function innerLinkPath(what: string, p: string, task: 'math' | 'code' | null): Promise<string> {
  if (!existsSync(p)) throw new MissingCheckpoint(`${what}: ${p} does not exist`);
  if (!statSync(p).isDirectory()) return p;
  const files = await (await import('node:fs/promises')).readdir(p);
  // the folder's file names only, as before: its manifests are not read here
  const { inner, tried } = await resolveRoleFiles({ files, has: async (n) => files.includes(n), manifest: async () => null }, task);
  if (!inner) throw new MissingCheckpoint(`${what}: ${p} holds no inner link; looked for ${tried.join(', ')}`);
  return join(p, inner);
}

/** The value of --init_outer that names the style's own outer links (a folder of that name is ./style). */
export const STYLE_OUTER = 'style';

/**
 * --init_outer: a folder or bundle, or `style`: the style's own outer links (an embedded style's folder, a released
 * style's outer repo through the hub cache), so that a run fine-tunes the system it trains rather than fresh links.
 */
async function initOuterFolder(v: string, style: StyleSpec, err: (s: string) => void): Promise<string> {
  if (v !== STYLE_OUTER) return materialize(v);
  if (!style.embedded) return runnerHub(err).repoFolder(style.outerRepo, `--init_outer style (${style.outerRepo})`);
  const dir = embeddedPath(style, await embeddedRoot(style), style.outerRepo);
  if (!existsSync(dir)) throw missingTinySystem(style, `--init_outer style (the outer links of ${style.name})`, `${dir} does not exist`);
  return dir;
}

function rowSource(a: TrainArgs): RowSource {
  const name = need(a, 'dataset_name');
  const split = a.dataset_split;
  if (existsSync(name)) {
    if (/\.jsonl$/i.test(name)) return { jsonlFile: name };
    return { jsonFile: name, ...(a.dataset_json_field ? { jsonField: a.dataset_json_field } : {}) };
  }
  return { datasetName: name, ...(split ? { split } : {}), ...(a.dataset_config ? { config: a.dataset_config } : {}) };
}

/**
 * Models and links from the folders, repos and bundles the flags name, for setupTraining: train-inner's
 * --model_name_or_path and --init_adapter; train-outer's --agentN_* (the inner link defaults to the agent's own
 * folder) and --init_outer. `modelDir` is train-inner's model folder once loaded (its files go into every save).
 */
function folderLoaders(
  kind: 'inner' | 'outer', a: TrainArgs, style: StyleSpec, adapterTask: 'math' | 'code' | null, thinking: boolean,
  on: (role: string) => Backend, err: (s: string) => void,
): TrainLoaders & { modelDir: string | null } {
  const dirs = new Map<string, string>();
  const agent = (role: string) => `agent${style.roles.findIndex((r) => r.key === role) + 1}`;
  let outerInit: Promise<Map<string, OuterLinkFile>> | null = null;
  const loaders = {
    modelDir: null as string | null,
    backend: on,
    async decoder(role: string, backend: Backend) {
      const k = (kind === 'inner' ? 'model_name_or_path' : `${agent(role)}_model_name_or_path`) as StringFlag;
      const dir = await modelArg(a, k, kind === 'inner' ? `--${k}` : `--${k} (${role})`, style, role, err);
      dirs.set(role, dir);
      if (kind === 'inner') loaders.modelDir = dir;
      return loadDecoderFromDir(dir, backend, { what: `--${k}` });
    },
    tokenizer: async (role: string) => thinkingTokenizer(await loadTokenizerFromDir(dirs.get(role)!), thinking),
    async innerLink(role: string) {
      if (kind === 'inner')
        return a.init_adapter ? readLinkFile(await innerLinkPath('--init_adapter', await materialize(a.init_adapter), adapterTask)) : null;
      const k = `${agent(role)}_inner_aligner_path` as StringFlag;
      return readLinkFile(await innerLinkPath(`--${k} (${role})`, await materialize(a[k] ?? dirs.get(role)!), adapterTask));
    },
    async outerLink(key: string) {
      if (!a.init_outer) return null;
      outerInit ??= initOuterFolder(a.init_outer, style, err)
        .then((dir) => resolveOuterFolder(dir, adapterTask, style.links.map((l) => l.key)));
      const file = (await outerInit).get(key)!;
      return { state: await readLinkFile(file.path), type: file.type };
    },
  };
  return loaders;
}

/**
 * What train-inner says before it starts: the style's outer links were fitted to the inner link it replaces
 * (issue 37: a retrained learner link took tiny_distillation from 100% to 55% of 20 test questions).
 */
export const INNER_HANDOFF_WARNING =
  'warning: the outer links were trained on the inner link this run replaces, so every latent hand-off changes and the ' +
  'system may answer worse, however the loss falls; train the outer links after it (rmas train-outer with the new ' +
  'link as --agentN_inner_aligner_path, --init_outer style to start from the system\'s own)';

/** Where the best held-out step's checkpoint goes, under --save_dir. */
export const BEST_DIR = 'best';

/**
 * --validation_file and its flags: the held-out hook (train-outer in one process) and its best score so far, or null
 * when no validation file is given.
 */
async function heldOutFlags(
  kind: 'inner' | 'outer', a: TrainArgs, style: StyleSpec, system: MasSystem | null, rounds: number, maxSteps: number,
  group: ProcessGroup, io: TrainIO, keep: HeldOutSink,
): Promise<{ hook: NonNullable<LoopHooks['heldOut']>; best: BestHeldOut } | null> {
  const every = numberFlag('eval_steps', a.eval_steps, { integer: true, min: 1 });
  const limit = numberFlag('max_eval_samples', a.max_eval_samples, { integer: true, min: 1 });
  const m = numberFlag('latent_length', a.latent_length, { integer: true, min: 1 });
  if (!a.validation_file) {
    const stray = (['eval_steps', 'max_eval_samples', 'latent_length'] as const).find((k) => a[k] !== undefined);
    if (stray) throw new UsageError(`--${stray} sets the held-out evaluation, which needs --validation_file FILE.jsonl`);
    return null;
  }
  if (kind === 'inner' || !system)
    throw new UsageError('--validation_file: the held-out questions need the whole system; train-outer scores them, train-inner does not');
  if (group.size > 1) {
    io.err('note: --validation_file is not scored under mpirun (one process scores it); this run trains without it\n');
    return null;
  }
  const rows = (await loadRows({ jsonlFile: a.validation_file })).slice(0, limit);
  const o = {
    rows, every: every ?? numberFlag('logging_steps', a.logging_steps, { integer: true, min: 1 }) ?? 10,
    rounds,
    latentSteps: m ?? defaultLatentSteps(style),
  };
  const roundsText = `${o.rounds} round${o.rounds === 1 ? '' : 's'}`;
  io.err(`held-out: ${rows.length} questions of ${a.validation_file}, ${roundsText}, ${o.latentSteps} latent steps, every ${o.every} steps\n`);
  // a resumed run into the same save_dir goes on from the best it had there
  const bestArgs = join(need(a, 'save_dir'), BEST_DIR, 'train_args.json');
  const before = a.resume && existsSync(bestArgs)
    ? ((JSON.parse(readFileSync(bestArgs, 'utf8')) as { held_out_best?: HeldOutPoint }).held_out_best ?? null) : null;
  const best = new BestHeldOut(before);
  const hook = await heldOutHook(system, o, maxSteps, async (p, isBest, st) => {
    io.err(`${io.tty ? '\n' : ''}held-out step ${p.step}: ${heldOutText(p)}${isBest ? ' (best so far)' : ''}\n`);
    await keep(p, isBest, st);
  }, best);
  return { hook, best };
}

const fmtTime = (s: number) =>
  s >= 3600
    ? `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`
    : s >= 60
      ? `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`
      : `${s.toFixed(1)}s`;

export function progressLine(e: StepEvent): string {
  const w = 20;
  const done = Math.round((w * e.step) / e.maxSteps);
  return (
    `[${'#'.repeat(done)}${'.'.repeat(w - done)}] step ${e.step}/${e.maxSteps} | loss ${e.loss.toFixed(4)} | lr ${e.lr.toExponential(2)} | ` +
    `grad norm ${e.gradNorm.toFixed(3)} | ${e.tokensPerSec.toFixed(0)} tok/s | ETA ${fmtTime(e.etaSec)}${e.empty ? ' | no valid sample, no update' : ''}`
  );
}

/**
 * `place`, when given (train-outer with --devices over several GPUs), opens a backend for each role: its
 * agent, its inner link and the outer links it sends live there. Without it everything runs on `backend`.
 * `group` (mpirun: several ranks) trains data-parallel: --batch_size samples per rank, the gradients summed
 * across ranks before clipping and AdamW, rank 0 alone reading --resume and writing --save_dir
 * (docs/distributed.md).
 */
export async function trainCmd(kind: 'inner' | 'outer', a: TrainArgs, backend: () => Promise<Backend>, io: TrainIO,
  place?: (roles: readonly string[]) => Promise<Record<string, Backend>>, group: ProcessGroup = singleProcess()): Promise<void> {
  return withOutputLocks(`train-${kind}`, (locks) => train(kind, a, backend, io, place, group, locks));
}

async function train(kind: 'inner' | 'outer', a: TrainArgs, backend: () => Promise<Backend>, io: TrainIO,
  place: ((roles: readonly string[]) => Promise<Record<string, Backend>>) | undefined, group: ProcessGroup, locks: OutputLocks) {
  const lead = group.rank === 0;
  for (const k of NO_EFFECT)
    if (a[k] !== undefined) io.err(`note: --${k} only tunes PyTorch; it has no effect here (links train in f32)\n`);
  const saveDir = need(a, 'save_dir');
  const style = trainingStyle(kind === 'inner' ? (a.mas_design ?? a.style ?? need(a, 'mas_design')) : need(a, 'style'));
  if (kind === 'outer') a = agentFlags(a, style);
  const settings = flagSettings(kind, a, style, io.err);
  if (kind === 'inner' && style.links.length) io.err(`${INNER_HANDOFF_WARNING}\n`);
  const thinking = settings.thinking ?? false;
  const task = settings.task ?? TRAIN_DEFAULTS.task;
  const logEvery = numberFlag('logging_steps', a.logging_steps, { integer: true, min: 1 }) ?? 10;
  const keep = numberFlag('save_total_limit', a.save_total_limit, { integer: true, min: 0 }) ?? 0;
  // an embedded style's own prompts unless --prompts replaces them
  const prompts = a.prompts ? readPrompts(a.prompts)
    : style.embedded ? await loadEmbeddedPrompts(style, await embeddedRoot(style)) : undefined;

  // every path the run writes is checked before anything loads (rank 0 alone writes them)
  await fromRoot(group, async () => {
    checkSavePlace('save_dir', saveDir);
    checkOutputFolder('save_dir', saveDir);
    if (a.dump_batches) checkOutputFolder('dump_batches', a.dump_batches);
    if (a.log_jsonl) checkOutputFile('log_jsonl', a.log_jsonl);
    // one writer per output: a second run on the same save_dir (or log, or dump folder) is refused here
    locks.take('save_dir', saveDir);
    locks.take('log_jsonl', a.log_jsonl);
    locks.take('dump_batches', a.dump_batches);
    // an unreadable commit journal would stop the first save; it is reported now, before any step
    const saves = nodeStore(saveDir);
    const folders = existsSync(saveDir) ? readdirSync(saveDir).filter((n) => /^checkpoint-\d+$/.test(n)) : [];
    for (const d of ['.', ...folders]) await pendingCommit(saves, d);
    await claimSaveDir(saveDir, { resume: a.resume, overwrite: !!a.overwrite_output_dir, say: io.err });
    return null;
  });
  io.err(`loading rows from ${a.dataset_name}\n`);
  // a dataset by name comes through the hub client into the hub cache (or --cache_dir when given), not the rows API
  const rows = await loadRows(rowSource(a), {
    datasetFiles: hubDatasetFiles(runnerHub(io.err).settings, {
      onEvent: progressPrinter(io.err, io.tty), ...(a.cache_dir ? { cacheDir: a.cache_dir } : {}),
    }),
  });
  const be = await backend();
  const disposers: (() => void)[] = [];
  try {
    const placement = kind === 'outer' && place ? await place(style.roles.map((r) => r.key)) : {};
    const adapterTask = style.taskScoped ? adapterTaskFor(task) : null;
    const load = folderLoaders(kind, a, style, adapterTask, thinking, (role) => placement[role] ?? be, io.err);
    const setup = await setupTraining({ ...settings, ...(prompts ? { prompts } : {}) }, rows, load);
    disposers.push(setup.dispose);
    const { job, manifests, loop: loopOpts, maxLength } = setup;
    /** train-inner: the model folder whose files make each saved folder a whole role repository. */
    const modelDir = load.modelDir;
    if (kind === 'inner') {
      const link = job.links.get('adapter') as InnerLink;
      io.err(`inner link ${link.type} (d ${link.d}, ${link.numParams} parameters) for ${style.shape}/${settings.role} ` +
        `on ${basename(modelDir!)}\n`);
    } else {
      const links = [...job.links].map(([k, l]) => `${k} ${l.dIn}→${l.dOut}`).join(', ');
      io.err(`outer links ${links} (${style.name}, ${setup.outerLoss!.rounds} rounds)\n`);
    }
    const droppedText = Object.entries(job.dropped).map(([k, v]) => `${k} ${v}`).join(', ');
    const notesText = Object.entries(job.notes).map(([k, v]) => `${k} ${v}`).join(', ');
    io.err(
      `${rows.length} rows, ${job.size} usable${droppedText ? ` (dropped: ${droppedText})` : ''}${notesText ? `; kept with notes: ${notesText}` : ''}\n`,
    );

    const { batchSize, lr } = loopOpts;
    const store = nodeStore(saveDir);
    let state: TrainerState = initialState(job.size, loopOpts);
    const params = job.optimizer.params;
    const device = await gradientCollectives(group, params, io.err);
    if (device) disposers.push(() => device.close());
    if (a.resume) {
      // rank 0 reads the checkpoint (it may repair an interrupted save); the others get its values
      const resumed = await fromRoot(group, async () => {
        const from = nodeStore(await materialize(a.resume!));
        const latest = await latestCheckpoint(from, '.');
        const loaded = await loadCheckpoint(from, latest.dir, job.links);
        return { t: loaded.optimizerT, state: loaded.state, dir: latest.dir };
      });
      job.optimizer.t = resumed.t;
      state = resumed.state;
      await broadcastParameters(group, params, { moments: true, device });
      io.err(`resuming from ${join(a.resume, resumed.dir)} at step ${state.step}\n`);
    } else {
      await broadcastParameters(group, params, { device });
    }
    if (group.size > 1) {
      io.err(`data parallel over ${group.size} ranks: ${batchSize} samples per rank and micro-batch, ${batchSize * group.size} in all; ` +
        `rank 0 writes ${saveDir}\n`);
    }
    let lastSaved: string | null = a.resume ? `${a.resume} (where this run resumed)` : null;
    setResumeNote(() => `; ${lastSaved ? `the last checkpoint is ${lastSaved}` : 'no checkpoint was saved yet'}` +
      `; run the same command with --resume ${saveDir} to continue${lastSaved ? '' : ' once one is saved'}`);
    // what a failed write says: what is kept, and how to go on
    const resumeHow = () => (lastSaved
      ? `the last complete checkpoint is ${lastSaved}; once the disk can be written again, run the same command with --resume ${saveDir}`
      : 'no checkpoint was saved yet; once the disk can be written again, run the same command');
    const args: Record<string, unknown> = { command: `train-${kind}`, ...a, resolved: { ...loopOpts, task, maxLength } };
    if (a.dump_batches && lead) mkdirSync(a.dump_batches, { recursive: true });
    if (a.log_jsonl && lead) mkdirSync(dirname(resolvePath(a.log_jsonl)), { recursive: true });

    const rounds = setup.outerLoss?.rounds ?? 0;
    const heldOut = await heldOutFlags(kind, a, style, setup.system, rounds, loopOpts.maxSteps, group, io, async (p, best, st) => {
      if (!best) return;
      await writing(`saving ${join(saveDir, BEST_DIR)}`, resumeHow, () => saveCheckpoint(store, BEST_DIR, {
        kind, links: job.links, optimizerT: job.optimizer.t, state: st, args: { ...args, held_out_best: p }, manifests,
      }));
    });

    let lastPlaced: PlacedModel | null = null;
    const final = await trainLoop(job.size, loopOpts, {
      optimizer: job.optimizer,
      runBatch: (idx, scale, shard) => job.runBatch(idx, scale, shard),
      ...(group.size > 1 ? { parallel: dataParallel(group, params, device) } : {}),
      ...(heldOut ? { heldOut: heldOut.hook } : {}),
      onStep: async (e) => {
        if (!lead) return;
        const line = progressLine(e);
        if (io.tty) io.err(`\r${line}`);
        else if (e.step % logEvery === 0 || e.step === e.maxSteps || e.step === 1) io.err(`${line}\n`);
        if (a.log_jsonl) {
          await writing(`appending step ${e.step} to --log_jsonl ${a.log_jsonl}`, resumeHow, () => appendFile(
            a.log_jsonl!,
            `${JSON.stringify({ step: e.step, epoch: e.epoch, loss: e.loss, lr: e.lr, grad_norm: e.gradNorm, tokens: e.tokens, tokens_per_sec: e.tokensPerSec, elapsed_s: e.elapsedSec, skipped: e.skipped, batches: e.batches })}\n`,
          ));
        }
        if (a.dump_batches) {
          const tensors: Record<string, StTensor> = {};
          e.batches.forEach((idx, i) => Object.assign(tensors, job.batchTensors(idx, e.batches.length > 1 ? `micro${i}.` : '')));
          const out = join(a.dump_batches, `step-${e.step}.safetensors`);
          await writing(`writing --dump_batches ${out}`, resumeHow,
            () => writeFile(out, writeSafetensors(tensors, { sample_indices: JSON.stringify(e.batches) })));
        }
      },
      save: async (s, last) => {
        const dir = last ? '.' : `checkpoint-${s.step}`;
        await checkSameParameters(group, params, `saving step ${s.step}`);
        if (!lead) return;
        await writing(`saving ${join(saveDir, dir)}`, resumeHow, async () => {
          // the model files first (placed, never rewritten), the checkpoint's own commit last
          let placed: PlacedModel | null = null;
          if (modelDir !== null) {
            mkdirSync(join(saveDir, dir), { recursive: true });
            placed = placeModelFiles(modelDir, join(saveDir, dir));
          }
          if (placed && last) lastPlaced = placed;
          const saved = placed ? { ...args, model_files: placed } : args;
          await saveCheckpoint(store, dir, { kind, links: job.links, optimizerT: job.optimizer.t, state: s, args: saved, manifests });
          lastSaved = join(saveDir, dir);
        });
        if (keep > 0) {
          const gone = await writing(`deleting checkpoints past --save_total_limit ${keep} in ${saveDir}`, resumeHow,
            () => pruneCheckpoints(store, '.', keep));
          if (gone.length) io.err(`save_total_limit ${keep}: deleted ${gone.join(', ')}\n`);
        }
      },
    }, state).catch((e: unknown) => {
      if (!(e instanceof NonFiniteLoss)) throw e;
      const lrFlag = kind === 'inner' ? '--adapter_lr' : '--outer_lr';
      throw new NonFiniteLoss(`${e.message}. Lower ${lrFlag} (now ${lr}) or check the data; nothing non-finite was saved, ` +
        `${lastSaved ? `the last checkpoint is ${lastSaved}` : 'and no checkpoint was saved yet'}`);
    });
    if (io.tty) io.err('\n');
    const skippedText = Object.entries(final.skipped).map(([k, v]) => `${k} ${v}`).join(', ');
    const lp = lastPlaced as PlacedModel | null; // assigned in save()
    io.err(`done: ${final.step} steps${skippedText ? `, skipped samples: ${skippedText}` : ''}; saved to ${saveDir}` +
      `${lp ? ` with the model files of ${lp.source} (${lp.method})` : ''}\n`);
    const best = heldOut?.best.best;
    if (best) io.err(`best held-out score: ${heldOutText(best)} at step ${best.step}; its links are in ${join(saveDir, BEST_DIR)}\n`);
    if (lead) {
      io.out(`${JSON.stringify({
        steps: final.step, save_dir: saveDir, skipped: final.skipped, dropped: job.dropped,
        ...(best ? { held_out_best: { ...best, dir: join(saveDir, BEST_DIR) } } : {}),
      })}\n`);
    }
  } finally {
    for (const d of disposers.reverse()) d();
  }
}
