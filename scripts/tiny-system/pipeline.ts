/**
 * The build of the embedded tiny system (style tiny_sequential) from its seed, the way a researcher would
 * build any RecursiveMAS with this project (`npm run tiny:build:sequential`, build.ts's default command):
 *   1. the task's splits as JSONL (src/eval/tiny-task.ts);
 *   2. the three agents trained from scratch (train-agents.ts, one process per agent);
 *   3. each role's inner link with `rmas train-inner` (cosine plus the read-back term, --adapter_ce_weight 1);
 *   4. the latent phase (latent-phase.ts): each agent learns to read its link's output, with the link;
 *   5. the outer links with `rmas train-outer` over the assembled system;
 *   6. the chain phase (chain-phase.ts): the solver, with outer_23, learns to answer from the
 *      messages the system sends it and to do its own arithmetic;
 * then copies the result into --out (default models/tiny/system) with prompts.json and build.json (the
 * settings, each stage's seconds, and the recorded loss curves that test/tiny-system.test.ts checks).
 * Stages that do not depend on each other run side by side, two at a time on a two-core machine; each runs
 * in its own process (`build.ts agents|latent|chain`, or `rmas train-inner|train-outer`).
 *
 * --from S starts at stage S in a --work folder that holds the earlier stages' results; --until S stops
 * after stage S. The inputs of the stages that overwrite them are kept in DIR/stages and copied to --stages
 * (default models/tiny/stages next to the committed system): stages/text/<role>.safetensors, the agents
 * after their text phases; stages/inner/<role>.pt, the inner stage's links where the latent phase starts;
 * stages/chain/solver.safetensors and stages/chain/outer_23.pt, the solver after its latent phase and
 * outer_23 after the outer stage, where the chain phase starts.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { taskSplit, toJsonl } from '../../src/eval/tiny-task.ts';
import { CHAIN_DEFAULTS } from './chain-phase.ts';
import { LATENT_DEFAULTS } from './latent-phase.ts';
import { ROOT, TINY_STAGES_DIR, TINY_SYSTEM_DIR } from './paths.ts';
import { TINY_PROMPT_FILE } from './prompts.ts';
import { ROLES } from './train-agents.ts';

/** The settings of the committed system; build.json records them with the figures. */
export const BUILD_DEFAULTS = {
  seed: 7,
  inner: { steps: 400, batchSize: 8, lr: 2e-3, ceWeight: 1 },
  outer: { steps: 600, batchSize: 4, lr: 6e-3, rounds: 2, maxLatentTokens: 40 },
} as const;

export interface BuildOptions {
  out: string;
  /** Copy of the stage snapshots (default TINY_STAGES_DIR when --out is the committed system). */
  stages?: string;
  work: string;
  seed: number;
  /** Steps of every agent (default: each agent spec's own, AGENT_SPECS in train-agents.ts). */
  agentSteps?: number;
  innerSteps: number;
  outerSteps: number;
  chainSteps: number;
  jobs: number;
  from: Stage;
  /** The last stage to run (default chain); later stages keep the work folder's results. */
  until: Stage;
}

export const STAGES = ['agents', 'inner', 'latent', 'outer', 'chain'] as const;
export type Stage = (typeof STAGES)[number];

/** `rmas train-inner` arguments of a role's inner link, as the build runs them (tests stop them early). */
export function innerTrainArgs(role: string, data: string, saveDir: string, steps: number, seed: number, logJsonl: string): string[] {
  const { batchSize, lr, ceWeight } = BUILD_DEFAULTS.inner;
  return ['train-inner', '--style', 'tiny_sequential', '--role', role, '--dataset_name', data, '--save_dir', saveDir,
    '--max_steps', String(steps), '--batch_size', String(batchSize), '--adapter_lr', String(lr), '--seed', String(seed),
    '--adapter_ce_weight', String(ceWeight), '--save_steps', '0', '--backend', 'cpu', '--log_jsonl', logJsonl];
}

/** `rmas train-outer` arguments of the outer links, as the build runs them. */
export function outerTrainArgs(data: string, saveDir: string, steps: number, seed: number, logJsonl: string): string[] {
  const { batchSize, lr, rounds, maxLatentTokens } = BUILD_DEFAULTS.outer;
  return [
    'train-outer',
    '--style',
    'tiny_sequential',
    '--dataset_name',
    data,
    '--save_dir',
    saveDir,
    '--max_steps',
    String(steps),
    '--batch_size',
    String(batchSize),
    '--outer_lr',
    String(lr),
    '--num_recursive_rounds',
    String(rounds),
    '--max_latent_tokens',
    String(maxLatentTokens),
    '--seed',
    String(seed),
    '--save_steps',
    '0',
    '--backend',
    'cpu',
    '--log_jsonl',
    logJsonl,
  ];
}

/**
 * Runs a command with the tiny system root pointed at `system` (and `env` added to its environment); output goes to
 * `log` and stderr; resolves to its seconds.
 */
export function runChild(label: string, args: string[], system: string, log: string, env: NodeJS.ProcessEnv = {}): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, ...env, RMAS_TINY_SYSTEM: system },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    const keep = (b: Buffer) => {
      chunks.push(b);
      const last = b.toString().trim().split('\n').pop();
      if (last) process.stderr.write(`[${label}] ${last}\n`);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', reject);
    child.on('close', async (code) => {
      await writeFile(log, Buffer.concat(chunks));
      if (code !== 0) reject(new Error(`${label} failed with exit code ${code}; its output is in ${log}`));
      else resolvePromise((performance.now() - t0) / 1000);
    });
  });
}

/** Runs tasks with at most `jobs` at a time; returns their results in order. */
export async function pool<T>(jobs: number, tasks: (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, tasks.length) }, worker));
  return results;
}

/** A command of build.ts (the entry point) in a child process, and one of rmas. */
const BUILD = ['--import', 'tsx', join(ROOT, 'scripts/tiny-system/build.ts')];
const RMAS = [join(ROOT, 'bin/rmas.js')];

/** Loss values of a --log_jsonl file, in step order. */
export async function jsonlLosses(file: string): Promise<number[]> {
  const text = await readFile(file, 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as { loss?: number })
    .filter((r) => typeof r.loss === 'number')
    .map((r) => r.loss!);
}

/** A stage's per-role record file ({ role: { losses, ... } }, as train-agents and latent-phase write them): its losses. */
async function roleLosses(file: string, role: string): Promise<number[]> {
  return (JSON.parse(await readFile(file, 'utf8')) as Record<string, { losses: number[] }>)[role]!.losses;
}

const roleRecord = (role: string, losses: readonly number[]) => `${JSON.stringify({ [role]: { losses } })}\n`;

/**
 * The later stages overwrite the agents (latent phase, chain phase) and the links, so their inputs are
 * kept: stages/text/<role>.safetensors (the agents after their text phases), stages/inner/<role>.pt (the
 * inner stage's links, where the latent phase starts), stages/chain/ (the solver and outer_23 where the
 * chain phase starts).
 */
async function snapshot(work: string, system: string, what: 'text' | 'inner' | 'chain'): Promise<void> {
  await mkdir(join(work, 'stages', what), { recursive: true });
  if (what === 'chain') {
    await cp(join(system, 'solver', 'model.safetensors'), join(work, 'stages', 'chain', 'solver.safetensors'));
    await cp(join(system, 'outer', 'outer_23.pt'), join(work, 'stages', 'chain', 'outer_23.pt'));
    return;
  }
  for (const role of ROLES) {
    if (what === 'text') await cp(join(system, role, 'model.safetensors'), join(work, 'stages', 'text', `${role}.safetensors`));
    else await cp(join(work, `inner-${role}`, 'adapter.pt'), join(work, 'stages', 'inner', `${role}.pt`));
  }
}

/**
 * A fresh --work folder for a build that starts after the agents: the committed system, its stage
 * snapshots, and the earlier stages' loss curves from its build.json, as the stages before `from` left them.
 */
async function seedWork(work: string, from: Exclude<Stage, 'agents'>): Promise<void> {
  const system = join(work, 'system');
  const logs = join(work, 'logs');
  process.stderr.write(`--from ${from}: ${work} holds no agents; starting from the committed system and ${TINY_STAGES_DIR}\n`);
  await cp(TINY_SYSTEM_DIR, system, { recursive: true });
  await cp(TINY_STAGES_DIR, join(work, 'stages'), { recursive: true });
  await mkdir(logs, { recursive: true });
  const record = JSON.parse(await readFile(join(TINY_SYSTEM_DIR, 'build.json'), 'utf8')) as {
    losses: Record<'agents' | 'inner' | 'latent', Record<string, number[]>> & { outer: number[] };
  };
  const jsonl = (losses: readonly number[]) => losses.map((loss, i) => `${JSON.stringify({ step: i + 1, loss })}\n`).join('');
  for (const role of ROLES) {
    await writeFile(join(logs, `agent-${role}.json`), roleRecord(role, record.losses.agents[role]!));
    // before the latent phase the agents are the text stage's
    if (from === 'inner' || from === 'latent')
      await cp(join(TINY_STAGES_DIR, 'text', `${role}.safetensors`), join(system, role, 'model.safetensors'));
    if (from === 'inner') continue;
    await writeFile(join(logs, `inner-${role}.jsonl`), jsonl(record.losses.inner[role]!));
    await mkdir(join(work, `inner-${role}`), { recursive: true });
    await cp(join(TINY_STAGES_DIR, 'inner', `${role}.pt`), join(work, `inner-${role}`, 'adapter.pt'));
    if (from === 'outer' || from === 'chain')
      await writeFile(join(logs, `latent-${role}.json`), roleRecord(role, record.losses.latent[role]!));
  }
  // the committed solver and outer_23 are the chain phase's; the stages before it left these
  if (from === 'outer' || from === 'chain') {
    await cp(join(TINY_STAGES_DIR, 'chain', 'solver.safetensors'), join(system, 'solver', 'model.safetensors'));
    await cp(join(TINY_STAGES_DIR, 'chain', 'outer_23.pt'), join(system, 'outer', 'outer_23.pt'));
  }
  if (from === 'chain') {
    await writeFile(join(logs, 'outer.jsonl'), jsonl(record.losses.outer));
  }
}

export async function buildEmbeddedSystem(o: BuildOptions): Promise<void> {
  const work = resolve(o.work);
  const system = join(work, 'system');
  const data = join(work, 'data');
  const logs = join(work, 'logs');
  if (o.from !== 'agents' && !existsSync(join(system, ROLES[0], 'model.safetensors'))) await seedWork(work, o.from);
  await mkdir(logs, { recursive: true });
  await mkdir(data, { recursive: true });
  await mkdir(system, { recursive: true });
  await writeFile(join(data, 'train.jsonl'), toJsonl(taskSplit('train')));
  await writeFile(join(system, 'prompts.json'), `${JSON.stringify(TINY_PROMPT_FILE, null, 2)}\n`);
  const seconds: Record<string, number> = {};
  const doStage = (s: Stage) => STAGES.indexOf(s) >= STAGES.indexOf(o.from) && STAGES.indexOf(s) <= STAGES.indexOf(o.until);

  if (doStage('agents')) {
    const times = await pool(o.jobs, ROLES.map((role) => () => runChild(`agent ${role}`, [
      ...BUILD, 'agents', '--out', system, '--role', role, ...(o.agentSteps ? ['--steps', String(o.agentSteps)] : []),
      '--seed', String(o.seed), '--losses', join(logs, `agent-${role}.json`),
    ], system, join(logs, `agent-${role}.log`))));
    ROLES.forEach((r, i) => { seconds[`agent ${r}`] = times[i]!; });
    await snapshot(work, system, 'text');
  }

  const inner = BUILD_DEFAULTS.inner;
  if (doStage('inner')) {
    const times = await pool(
      o.jobs,
      ROLES.map(
        (role) => () =>
          runChild(`inner ${role}`,
            [
              ...RMAS,
              ...innerTrainArgs(
                role,
                join(data, 'train.jsonl'),
                join(work, `inner-${role}`),
                o.innerSteps,
                o.seed,
                join(logs, `inner-${role}.jsonl`),
              ),
            ],
            system,
            join(logs, `inner-${role}.log`),
          ),
      ),
    );
    ROLES.forEach((r, i) => { seconds[`inner ${r}`] = times[i]!; });
    for (const role of ROLES) {
      for (const f of ['adapter.pt', 'adapter_config.json']) await cp(join(work, `inner-${role}`, f), join(system, role, f));
    }
    await snapshot(work, system, 'inner');
  }

  if (doStage('latent')) {
    // a work folder from before the snapshots: its system still holds the text-stage agents here
    if (!existsSync(join(work, 'stages', 'text'))) await snapshot(work, system, 'text');
    if (!existsSync(join(work, 'stages', 'inner'))) await snapshot(work, system, 'inner');
    // each agent learns to read its link's output, with the link (latent-phase.ts); both are written to system/<role>/
    const times = await pool(o.jobs, ROLES.map((role) => () => runChild(`latent ${role}`, [
      ...BUILD, 'latent', '--system', system, '--role', role, '--link', join(work, `inner-${role}`, 'adapter.pt'),
      '--seed', String(o.seed), '--losses', join(logs, `latent-${role}.json`),
    ], system, join(logs, `latent-${role}.log`))));
    ROLES.forEach((r, i) => { seconds[`latent ${r}`] = times[i]!; });
  }

  const outer = BUILD_DEFAULTS.outer;
  if (doStage('outer')) {
    seconds.outer = await runChild('outer', [
      ...RMAS, ...outerTrainArgs(join(data, 'train.jsonl'), join(work, 'outer'), o.outerSteps, o.seed, join(logs, 'outer.jsonl')),
    ], system, join(logs, 'outer.log'));
    await mkdir(join(system, 'outer'), { recursive: true });
    for (const f of ['outer_12.pt', 'outer_23.pt', 'outer_31.pt', 'outer_adapter_config.json', 'outerlink_config.json']) {
      await cp(join(work, 'outer', f), join(system, 'outer', f));
    }
  }

  if (doStage('chain')) {
    await snapshot(work, system, 'chain');
    seconds.chain = await runChild('chain', [
      ...BUILD, 'chain', '--system', system, '--seed', String(o.seed), '--steps', String(o.chainSteps),
      '--losses', join(logs, 'chain-solver.json'),
    ], system, join(logs, 'chain.log'));
  }

  const agentLosses = Object.fromEntries(
    await Promise.all(ROLES.map(async (r) => [r, await roleLosses(join(logs, `agent-${r}.json`), r)])),
  );
  const record = {
    seed: o.seed, agentSteps: Object.fromEntries(ROLES.map((r) => [r, agentLosses[r]!.length])), inner: { ...inner, steps: o.innerSteps },
    latent: { ...LATENT_DEFAULTS }, outer: { ...outer, steps: o.outerSteps }, chain: { ...CHAIN_DEFAULTS, steps: o.chainSteps },
    seconds,
    losses: {
      agents: agentLosses,
      inner: Object.fromEntries(await Promise.all(ROLES.map(async (r) => [r, await jsonlLosses(join(logs, `inner-${r}.jsonl`))]))),
      latent: Object.fromEntries(await Promise.all(ROLES.map(async (r) => [r, await roleLosses(join(logs, `latent-${r}.json`), r)]))),
      outer: await jsonlLosses(join(logs, 'outer.jsonl')),
      ...(existsSync(join(logs, 'chain-solver.json')) ? { chain: await roleLosses(join(logs, 'chain-solver.json'), 'solver') } : {}),
    },
  };
  await writeFile(join(system, 'build.json'), `${JSON.stringify(record)}\n`);
  const out = resolve(o.out);
  if (out !== system) {
    await rm(out, { recursive: true, force: true });
    await cp(system, out, { recursive: true });
  }
  const stages = resolve(o.stages ?? (out === TINY_SYSTEM_DIR ? TINY_STAGES_DIR : join(out, '..', `${basename(out)}-stages`)));
  if (stages !== join(work, 'stages')) {
    await rm(stages, { recursive: true, force: true });
    await cp(join(work, 'stages'), stages, { recursive: true });
  }
  process.stderr.write(`tiny system written to ${out}; stage seconds ${JSON.stringify(seconds)}\n`);
}
