/**
 * `rmas train-inner` and `rmas train-outer`: the link training loops in Node (docs/method.md §6). Loads models,
 * tokenizers, rows and links, builds the job (src/train/jobs.ts), runs trainLoop with a progress line,
 * optional per-step JSONL log and batch dumps, and saves checkpoints into --save_dir (periodic ones in
 * checkpoint-<step>/, the last one at the top, upstream's layout).
 */
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve as resolvePath } from 'node:path';
import {
  broadcastParameters, checkSameParameters, dataParallel, fromRoot, singleProcess, type ProcessGroup,
} from '../dist/group';
import { MissingCheckpoint, NonFiniteLoss, UsageError } from '../errors';
import { writeSafetensors, type StTensor } from '../formats/safetensors';
import { InnerLink, OuterLink } from '../mas/links';
import { type TaskKind } from '../mas/prompts';
import type { StyleSpec } from '../mas/styles';
import { embeddedPath, embeddedRoot, loadEmbeddedPrompts, missingTinySystem } from '../mas/system';
import { adapterTaskFor, outerManifests, readLinkFile, resolveOuterFolder, resolveRoleFiles } from '../mas/upstream';
import { loadDecoderFromDir } from '../model';
import type { Backend } from '../tensor/backend';
import { loadTokenizerFromDir } from '../tokenizer';
import { latestCheckpoint, loadCheckpoint, pruneCheckpoints, saveCheckpoint, type TrainerState } from '../train/checkpoint';
import { nodeStore, pendingCommit } from '../train/checkpoint-files';
import { canonicalRole, loadRows, type RowSource } from '../train/data';
import { placeModelFiles, type PlacedModel } from '../train/model-files';
import { createInnerJob, createOuterJob, type TrainJob } from '../train/jobs';
import { initialState, trainLoop, type LoopOptions, type StepEvent } from '../train/loop';
import type { OuterLossOptions } from '../train/outer';
import { parseSchedulerType } from '../train/schedule';
import { materialize } from '../store/bundle-node';
import { hubDatasetFiles } from '../store/hub-datasets';
import { flag01, numberFlag, required } from './args';
import { readPrompts, thinkingTokenizer } from './ask';
import { gradientCollectives, setResumeNote } from './dist';
import { checkOutputFile, checkOutputFolder, writing } from './outputs';
import { autoRecompute, recomputeRoles } from './train-memory';
import { progressPrinter, runnerHub } from './hub';
import { agentFlags, NO_EFFECT, ROLE_ALIASES, styleFor, type TrainArgs } from './train-args';

export interface TrainIO {
  out(s: string): void;
  err(s: string): void;
  /** Progress redraws one line when true, else prints a line every --logging_steps steps. */
  tty: boolean;
}

/** A string flag of the table (the only kind the number and 0|1 flags are). */
type StringFlag = { [K in keyof TrainArgs]-?: TrainArgs[K] extends string | undefined ? K : never }[keyof TrainArgs];

const num = (a: TrainArgs, k: StringFlag, def: number, o: { int?: boolean; min?: number } = {}): number =>
  numberFlag(k, a[k], { integer: o.int, min: o.min }) ?? def;
const bool01 = (a: TrainArgs, k: StringFlag, def: boolean) => flag01(k, a[k], def, true);
/** --outer_latents: what a non-final stage sends while the outer links train (src/train/outer.ts). */
function outerLatents(v: string | undefined): 'teacher' | 'rollout' {
  if (v === undefined || v === 'teacher' || v === 'rollout') return v ?? 'teacher';
  throw new UsageError(
    `--outer_latents ${v}: expected teacher (upstream: the states of the gold text) or rollout (the stage's own latent rollout, as inference)`,
  );
}
const need = (a: TrainArgs, k: StringFlag): string => required(k, a[k]);

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

function rowSource(a: TrainArgs): RowSource {
  const name = need(a, 'dataset_name');
  const split = a.dataset_split;
  if (existsSync(name)) {
    if (/\.jsonl$/i.test(name)) return { jsonlFile: name };
    return { jsonFile: name, ...(a.dataset_json_field ? { jsonField: a.dataset_json_field } : {}) };
  }
  return { datasetName: name, ...(split ? { split } : {}), ...(a.dataset_config ? { config: a.dataset_config } : {}) };
}

function taskOf(a: TrainArgs): TaskKind {
  const t = (a.mas_task ?? 'math').toLowerCase();
  if (t !== 'math' && t !== 'code' && t !== 'choice') throw new UsageError(`--mas_task ${a.mas_task}: expected math, code or choice`);
  return t;
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
  const lead = group.rank === 0;
  for (const k of NO_EFFECT)
    if (a[k] !== undefined) io.err(`note: --${k} only tunes PyTorch; it has no effect here (links train in f32)\n`);
  const thinking = bool01(a, 'enable_thinking', false);
  const saveDir = need(a, 'save_dir');
  const task = taskOf(a);
  const maxLength = num(a, 'max_length', kind === 'inner' ? 2048 : 4096, { int: true, min: 2 });
  const batchSize = num(a, 'batch_size', 2, { int: true, min: 1 });
  const gradAccum = num(a, 'grad_accum_steps', 1, { int: true, min: 1 });
  const seed = num(a, 'seed', 42, { int: true, min: 0 });
  const lr = num(a, kind === 'inner' ? 'adapter_lr' : 'outer_lr', 5e-4, { min: 0 });
  const optimizer = { weightDecay: num(a, 'weight_decay', 0, { min: 0 }), maxGradNorm: num(a, 'max_grad_norm', 1, { min: 0 }) || Infinity };
  const scheduler = parseSchedulerType(a.lr_scheduler_type ?? 'cosine');
  const style = styleFor(kind === 'inner' ? (a.mas_design ?? a.style ?? need(a, 'mas_design')) : need(a, 'style'));
  if (kind === 'outer') a = agentFlags(a, style);
  // an embedded style's own prompts unless --prompts replaces them
  const prompts = a.prompts ? readPrompts(a.prompts)
    : style.embedded ? await loadEmbeddedPrompts(style, await embeddedRoot(style)) : undefined;

  // every path the run writes is checked before anything loads (rank 0 alone writes them)
  await fromRoot(group, async () => {
    checkOutputFolder('save_dir', saveDir);
    // an unreadable commit journal would stop the first save; it is reported now, before any step
    const saves = nodeStore(saveDir);
    const folders = existsSync(saveDir) ? readdirSync(saveDir).filter((n) => /^checkpoint-\d+$/.test(n)) : [];
    for (const d of ['.', ...folders]) await pendingCommit(saves, d);
    if (a.dump_batches) checkOutputFolder('dump_batches', a.dump_batches);
    if (a.log_jsonl) checkOutputFile('log_jsonl', a.log_jsonl);
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
  let job: TrainJob;
  let manifests: Record<string, unknown>;
  /** train-inner: the model folder whose files make each saved folder a whole role repository. */
  let modelDir: string | null = null;
  const disposers: (() => void)[] = [];
  try {
    if (kind === 'inner') {
      const roleArg = (a.mas_role ?? a.role ?? need(a, 'mas_role')).trim().toLowerCase();
      const role = canonicalRole(style.shape, ROLE_ALIASES[roleArg] ?? roleArg);
      const dir = await modelArg(a, 'model_name_or_path', '--model_name_or_path', style, role, io.err);
      const decoder = await loadDecoderFromDir(dir, be, { what: '--model_name_or_path' });
      disposers.push(() => decoder.dispose());
      const tokenizer = thinkingTokenizer(await loadTokenizerFromDir(dir), thinking);
      modelDir = dir;
      const type = a.adapter_type ?? 'ln_res_adapter';
      const d = decoder.config.hidden;
      const link = a.init_adapter
        ? InnerLink.fromStateDict(
            be,
            await readLinkFile(
              await innerLinkPath('--init_adapter', await materialize(a.init_adapter), style.taskScoped ? adapterTaskFor(task) : null),
            ),
            { type, d, name: `${role} inner link` },
          )
        : InnerLink.create(be, d, { type, seed, name: `${role} inner link` });
      disposers.push(() => link.dispose());
      job = createInnerJob({
        decoder,
        tokenizer,
        link,
        rows,
        shape: style.shape,
        role,
        task,
        maxLength,
        optimizer,
        weights: {
          cos: num(a, 'adapter_cos_weight', 1),
          mse: num(a, 'adapter_mse_weight', 0),
          ce: num(a, 'adapter_ce_weight', 0),
          recompute: bool01(a, 'gradient_checkpointing', false),
        },
        ...(prompts ? { prompts } : {}),
      });
      manifests = { 'adapter_config.json': { adapter_type: link.type } };
      io.err(`inner link ${link.type} (d ${d}, ${link.numParams} parameters) for ${style.shape}/${role} on ${basename(dir)}\n`);
    } else {
      const adapterTask = style.taskScoped ? adapterTaskFor(task) : null;
      const placement = place ? await place(style.roles.map((r) => r.key)) : {};
      const on = (role: string): Backend => placement[role] ?? be;
      const agents = new Map<string, Parameters<typeof createOuterJob>[0]['agents'] extends ReadonlyMap<string, infer V> ? V : never>();
      for (const [i, r] of style.roles.entries()) {
        const k = `agent${i + 1}_model_name_or_path` as StringFlag;
        const dir = await modelArg(a, k, `--${k} (${r.key})`, style, r.key, io.err);
        const decoder = await loadDecoderFromDir(dir, on(r.key), { what: `--${k}` });
        disposers.push(() => decoder.dispose());
        const innerArg = await materialize((a[`agent${i + 1}_inner_aligner_path` as keyof TrainArgs] as string | undefined) ?? dir);
        const inner = InnerLink.fromStateDict(
          on(r.key),
          await readLinkFile(await innerLinkPath(`--agent${i + 1}_inner_aligner_path (${r.key})`, innerArg, adapterTask)),
          {
            d: decoder.config.hidden,
            name: `${r.key} inner link`,
          },
        ).freeze();
        disposers.push(() => inner.dispose());
        agents.set(r.key, { decoder, inner, tokenizer: thinkingTokenizer(await loadTokenizerFromDir(dir), thinking) });
      }
      const outerType = a.outer_type ?? 'outer_ln_res_adapter';
      const outer = new Map<string, OuterLink>();
      const init = a.init_outer
        ? await resolveOuterFolder(
            await materialize(a.init_outer),
            adapterTask,
            style.links.map((l) => l.key),
          )
        : null;
      for (const [i, l] of style.links.entries()) {
        const dIn = agents.get(l.from)!.decoder.config.hidden;
        const dOut = agents.get(l.to)!.decoder.config.hidden;
        const link = init
          ? OuterLink.fromStateDict(on(l.from), await readLinkFile(init.get(l.key)!.path), {
              type: init.get(l.key)!.type,
              dIn,
              dOut,
              name: l.key,
            })
          : OuterLink.create(on(l.from), dIn, dOut, { type: outerType, seed: seed * 100 + i, name: l.key });
        disposers.push(() => link.dispose());
        outer.set(l.key, link);
      }
      const rounds = num(a, 'num_recursive_rounds', 3, { int: true, min: 1 });
      const superviseFinalOnly = bool01(a, 'supervise_final_only', true);
      const nonLastLossWeight = num(a, 'non_last_loss_weight', 0.1, { min: 0 });
      const recompute = recomputeRoles(a.gradient_checkpointing, style.roles.map((r) => r.key));
      const loss: OuterLossOptions = {
        rounds, maxLatentTokens: num(a, 'max_latent_tokens', 80, { int: true, min: 1 }), superviseFinalOnly, nonLastLossWeight, maxLength,
        latents: outerLatents(a.outer_latents), recompute: recompute === 'auto' ? false : recompute,
      };
      const outerJob = createOuterJob({
        style, agents, outer, rows, task, batchSize, optimizer, ...(prompts ? { prompts } : {}),
        loss,
      });
      // the job holds the tokenised samples the plan sizes the step by; the loss options are read at every step
      if (recompute === 'auto') loss.recompute = autoRecompute(style, outerJob.samples, loss, agents, outer, io.err);
      job = outerJob;
      const m = outerManifests(
        style.shape,
        [...outer].map(([key, l]) => ({ key, filename: `${key}.pt`, type: l.type, inDim: l.dIn, outDim: l.dOut })),
      );
      manifests = {
        'outerlink_config.json': m.outerlinkConfig,
        'outer_adapter_config.json': {
          ...m.outerAdapterConfig,
          mas_shape: style.shape,
          mas_task: task,
          num_recursive_rounds: rounds,
          supervise_final_only: superviseFinalOnly ? 1 : 0,
          non_last_loss_weight: nonLastLossWeight,
          enable_thinking: thinking ? 1 : 0,
          ...Object.fromEntries(
            style.roles.flatMap((_, i) => [
              [`agent${i + 1}_model_name_or_path`, a[`agent${i + 1}_model_name_or_path` as keyof TrainArgs]],
              [`agent${i + 1}_inner_aligner_path`, a[`agent${i + 1}_inner_aligner_path` as keyof TrainArgs] ?? null],
            ]),
          ),
        },
      };
      io.err(`outer links ${[...outer].map(([k, l]) => `${k} ${l.dIn}→${l.dOut}`).join(', ')} (${style.name}, ${rounds} rounds)\n`);
    }
    const droppedText = Object.entries(job.dropped).map(([k, v]) => `${k} ${v}`).join(', ');
    const notesText = Object.entries(job.notes).map(([k, v]) => `${k} ${v}`).join(', ');
    io.err(
      `${rows.length} rows, ${job.size} usable${droppedText ? ` (dropped: ${droppedText})` : ''}${notesText ? `; kept with notes: ${notesText}` : ''}\n`,
    );

    const perEpoch = Math.floor(job.size / batchSize / gradAccum);
    let maxSteps = num(a, 'max_steps', 20000, { int: true });
    if (maxSteps <= 0) maxSteps = Math.max(1, Math.round(num(a, 'num_train_epochs', 1, { min: 0 }) * perEpoch));
    const loopOpts: LoopOptions = {
      maxSteps, batchSize, gradAccumSteps: gradAccum, lr, scheduler, warmupSteps: num(a, 'warmup_steps', 10, { int: true, min: 0 }), seed,
      shuffle: bool01(a, 'shuffle', true), saveSteps: num(a, 'save_steps', 1000, { int: true, min: 0 }),
    };
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
    const logEvery = num(a, 'logging_steps', 10, { int: true, min: 1 });
    const keep = num(a, 'save_total_limit', 0, { int: true, min: 0 });
    if (a.dump_batches && lead) mkdirSync(a.dump_batches, { recursive: true });
    if (a.log_jsonl && lead) mkdirSync(dirname(resolvePath(a.log_jsonl)), { recursive: true });

    let lastPlaced: PlacedModel | null = null;
    const final = await trainLoop(job.size, loopOpts, {
      optimizer: job.optimizer,
      runBatch: (idx, scale, shard) => job.runBatch(idx, scale, shard),
      ...(group.size > 1 ? { parallel: dataParallel(group, params, device) } : {}),
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
    if (lead) io.out(`${JSON.stringify({ steps: final.step, save_dir: saveDir, skipped: final.skipped, dropped: job.dropped })}\n`);
  } finally {
    for (const d of disposers.reverse()) d();
  }
}
