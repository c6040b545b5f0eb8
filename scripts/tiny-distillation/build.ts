/**
 * The embedded tiny distillation system (style tiny_distillation, models/tiny/distillation), built from its
 * seed the way a researcher builds any RecursiveMAS with this project, upstream's recipe with frozen agents:
 *   1. the price-list task's splits as JSONL (src/eval/tiny-prices.ts);
 *   2. the two agents trained from scratch on text (agents.ts), one process each;
 *   3. each agent's inner link with `rmas train-inner` (the agent frozen);
 *   4. the outer links' alignment (align-outer.ts, ours): Outer(Inner(h)) learns the receiver's embedding of the
 *      token the sender's state h stands for, agents and inner links frozen;
 *   5. the outer links, from there, with `rmas train-outer --init_outer` (upstream's cross-entropy through the
 *      frozen agents), on the latents inference sends (--outer_latents rollout, m = the style's latent steps),
 *      2 rounds, every round's cross-entropy counted (--supervise_final_only 0 --non_last_loss_weight 1);
 * then the system folder gets prompts.json and build.json (the settings, each stage's seconds and loss curve,
 * which test/tiny-distillation.test.ts checks a rebuild's first steps against).
 *
 *   npx tsx scripts/tiny-distillation/build.ts [all] [--out DIR] [--work DIR] [--seed S] [--from S] [--until S]
 *   npx tsx scripts/tiny-distillation/build.ts agents --out DIR [--role expert|learner] [--steps N] [--seed S] [--losses FILE]
 *   npx tsx scripts/tiny-distillation/build.ts eval [--split test|validation] [--limit N] [--configs a,b] [--json FILE] …
 *
 * `npm run tiny:build` runs the first, `npm run tiny:eval` the last. Stages resume: --from inner|outer starts
 * there in the --work folder (seeded from the committed system when the folder has no agents); the agents do
 * not change after their stage, so the committed folder holds every stage's input.
 */
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { UsageError } from '../../src/errors.ts';
import { priceJsonl, priceSplit } from '../../src/eval/tiny-prices.ts';
import { defaultLatentSteps, getStyle } from '../../src/mas/styles.ts';
import { command, type Command, type Options } from '../../src/runner/args.ts';
import { evalCommand } from '../tiny-system/eval.ts';
import { int, json, oneOf, runCommand, runIfMain, s, usageOf } from '../tiny-system/cli.ts';
import { ROOT, TINY_DISTILLATION_DIR } from '../tiny-system/paths.ts';
import { jsonlLosses, pool, runChild } from '../tiny-system/pipeline.ts';
import { DISTILL_AGENTS, DISTILL_ROLES, evalDistillAgent, trainDistillAgent } from './agents.ts';
import { ALIGN_DEFAULTS, alignOuter } from './align-outer.ts';
import { DISTILLATION_TARGET } from './eval.ts';
import { DISTILL_PROMPT_FILE } from './prompts.ts';
import { expertRollouts } from './rollouts.ts';

/** The committed system's settings; build.json records them with the figures. */
export const DISTILL_BUILD = {
  seed: 7,
  inner: { steps: 400, batchSize: 8, lr: 2e-3, ceWeight: 1 },
  align: { ...ALIGN_DEFAULTS },
  outer: { steps: 800, batchSize: 4, lr: 1e-3, rounds: 2, latents: 'rollout', nonLastLossWeight: 1 },
} as const;

export const DISTILL_STAGES = ['agents', 'inner', 'align', 'outer'] as const;
export type DistillStage = (typeof DISTILL_STAGES)[number];

/** `rmas train-inner` arguments of a role's inner link, as the build runs them (tests stop them early). */
export function distillInnerArgs(role: string, data: string, saveDir: string, steps: number, seed: number, logJsonl: string): string[] {
  const { batchSize, lr, ceWeight } = DISTILL_BUILD.inner;
  return [
    ...['train-inner', '--style', 'tiny_distillation', '--role', role, '--dataset_name', data, '--save_dir', saveDir],
    ...['--max_steps', String(steps), '--batch_size', String(batchSize), '--adapter_lr', String(lr), '--seed', String(seed)],
    ...['--adapter_ce_weight', String(ceWeight), '--save_steps', '0', '--backend', 'cpu', '--log_jsonl', logJsonl],
  ];
}

/** `rmas train-outer` arguments of the outer links, as the build runs them. */
export function distillOuterArgs(data: string, init: string, saveDir: string, steps: number, seed: number, logJsonl: string): string[] {
  const { batchSize, lr, rounds, latents, nonLastLossWeight } = DISTILL_BUILD.outer;
  const m = defaultLatentSteps(getStyle('tiny_distillation'));
  return [
    ...['train-outer', '--style', 'tiny_distillation', '--dataset_name', data, '--save_dir', saveDir, '--init_outer', init],
    ...['--max_steps', String(steps), '--batch_size', String(batchSize), '--outer_lr', String(lr), '--seed', String(seed)],
    ...['--num_recursive_rounds', String(rounds), '--max_latent_tokens', String(m), '--outer_latents', latents],
    ...['--supervise_final_only', '0', '--non_last_loss_weight', String(nonLastLossWeight)],
    ...['--save_steps', '0', '--backend', 'cpu', '--log_jsonl', logJsonl],
  ];
}

const BUILD = ['--import', 'tsx', join(ROOT, 'scripts/tiny-distillation/build.ts')];
const RMAS = [join(ROOT, 'bin/rmas.js')];

export interface DistillBuildOptions {
  out: string;
  work: string;
  seed: number;
  from: DistillStage;
  until: DistillStage;
  jobs: number;
  /** Steps of every agent (default each spec's own), of the inner links and of the outer links. */
  agentSteps?: number;
  innerSteps: number;
  outerSteps: number;
}

/** The whole build (see the file comment). */
export async function buildDistillation(o: DistillBuildOptions): Promise<void> {
  const work = resolve(o.work);
  const system = join(work, 'system');
  const logs = join(work, 'logs');
  const data = join(work, 'data', 'train.jsonl');
  const at = (s: DistillStage) => DISTILL_STAGES.indexOf(s);
  const doStage = (s: DistillStage) => at(s) >= at(o.from) && at(s) <= at(o.until);
  // a restart keeps the earlier stages' seconds from the record it starts from
  const seconds: Record<string, number> = {};
  if (o.from !== 'agents' && !existsSync(join(system, 'learner', 'model.safetensors'))) {
    process.stderr.write(`--from ${o.from}: ${work} holds no agents; starting from the committed system ${TINY_DISTILLATION_DIR}\n`);
    await cp(TINY_DISTILLATION_DIR, system, { recursive: true });
    await mkdir(logs, { recursive: true });
    const record = JSON.parse(await readFile(join(TINY_DISTILLATION_DIR, 'build.json'), 'utf8')) as DistillBuildRecord;
    const stageOf = (k: string) => (k.startsWith('agent ') ? 'agents' : k.split(' ')[0]) as DistillStage;
    for (const [k, v] of Object.entries(record.seconds)) if (at(stageOf(k)) < at(o.from)) seconds[k] = v;
    for (const role of DISTILL_ROLES) {
      await writeFile(join(logs, `agent-${role}.json`), `${JSON.stringify({ losses: record.losses.agents[role] })}\n`);
      if (at(o.from) > at('inner')) await writeFile(join(logs, `inner-${role}.jsonl`), lossJsonl(record.losses.inner[role]!));
    }
    if (o.from === 'outer') {
      await writeFile(join(logs, 'align.json'), `${JSON.stringify({ losses: record.losses.align })}\n`);
      // the alignment's links are where the outer stage starts: the committed ones are its end, so rerun it
      throw new UsageError('--from outer needs the align stage\'s links in --work; start with --from align');
    }
  }
  await mkdir(logs, { recursive: true });
  await mkdir(join(work, 'data'), { recursive: true });
  await mkdir(system, { recursive: true });
  await writeFile(data, priceJsonl(priceSplit('train')));
  await writeFile(join(system, 'prompts.json'), json(DISTILL_PROMPT_FILE));

  if (doStage('agents')) {
    const steps = o.agentSteps ? ['--steps', String(o.agentSteps)] : [];
    const times = await pool(
      o.jobs,
      DISTILL_ROLES.map((role) => () => {
        const args = [...BUILD, 'agents', '--out', system, '--role', role, ...steps, '--seed', String(o.seed)];
        return runChild(`agent ${role}`, [...args, '--losses', join(logs, `agent-${role}.json`)], system, join(logs, `agent-${role}.log`));
      }),
    );
    DISTILL_ROLES.forEach((r, i) => (seconds[`agent ${r}`] = times[i]!));
  }
  if (doStage('inner')) {
    const times = await pool(
      o.jobs,
      DISTILL_ROLES.map((role) => () => {
        const args = distillInnerArgs(role, data, join(work, `inner-${role}`), o.innerSteps, o.seed, join(logs, `inner-${role}.jsonl`));
        return runChild(`inner ${role}`, [...RMAS, ...args], system, join(logs, `inner-${role}.log`));
      }),
    );
    DISTILL_ROLES.forEach((r, i) => (seconds[`inner ${r}`] = times[i]!));
    for (const role of DISTILL_ROLES)
      for (const f of ['adapter.pt', 'adapter_config.json']) await cp(join(work, `inner-${role}`, f), join(system, role, f));
  }
  if (doStage('align')) {
    const args = [...BUILD, 'align', '--system', system, '--out', join(work, 'align'), '--seed', String(o.seed)];
    seconds.align = await runChild('align', [...args, '--losses', join(logs, 'align.json')], system, join(logs, 'align.log'));
  }
  if (doStage('outer')) {
    const args = distillOuterArgs(data, join(work, 'align'), join(work, 'outer'), o.outerSteps, o.seed, join(logs, 'outer.jsonl'));
    seconds.outer = await runChild('outer', [...RMAS, ...args], system, join(logs, 'outer.log'));
    await mkdir(join(system, 'outer'), { recursive: true });
    for (const f of ['outer_el.pt', 'outer_le.pt', 'outer_adapter_config.json', 'outerlink_config.json'])
      await cp(join(work, 'outer', f), join(system, 'outer', f));
  }

  const record: DistillBuildRecord = {
    seed: o.seed,
    agents: Object.fromEntries(DISTILL_AGENTS.map((a) => [a.role, { ...a, steps: o.agentSteps ?? a.steps }])),
    inner: { ...DISTILL_BUILD.inner, steps: o.innerSteps },
    align: { ...DISTILL_BUILD.align },
    outer: { ...DISTILL_BUILD.outer, steps: o.outerSteps, latentSteps: defaultLatentSteps(getStyle('tiny_distillation')) },
    seconds,
    losses: {
      agents: Object.fromEntries(
        await Promise.all(
          DISTILL_ROLES.map(async (r) => [r, (await readJson<{ losses: number[] }>(join(logs, `agent-${r}.json`))).losses]),
        ),
      ),
      inner: Object.fromEntries(await Promise.all(DISTILL_ROLES.map(async (r) => [r, await jsonlLosses(join(logs, `inner-${r}.jsonl`))]))),
      align: (await readJson<{ losses: DistillBuildRecord['losses']['align'] }>(join(logs, 'align.json'))).losses,
      outer: await jsonlLosses(join(logs, 'outer.jsonl')),
    },
  };
  await writeFile(join(system, 'build.json'), `${JSON.stringify(record)}\n`);
  const out = resolve(o.out);
  if (out !== system) {
    // the committed eval.json describes the system it was measured on: a rebuilt system drops it
    await rm(out, { recursive: true, force: true });
    await cp(system, out, { recursive: true });
  }
  process.stderr.write(`tiny distillation system written to ${out}; stage seconds ${JSON.stringify(seconds)}\n`);
}

export interface DistillBuildRecord {
  seed: number;
  agents: Record<string, unknown>;
  inner: Record<string, unknown>;
  align: Record<string, unknown>;
  outer: Record<string, unknown>;
  seconds: Record<string, number>;
  losses: {
    agents: Record<string, number[]>;
    inner: Record<string, number[]>;
    align: Record<'outer_el' | 'outer_le', number[]>;
    outer: number[];
  };
}

const readJson = async <T>(file: string): Promise<T> => JSON.parse(await readFile(file, 'utf8')) as T;
const lossJsonl = (losses: readonly number[]) => losses.map((loss, i) => `${JSON.stringify({ step: i + 1, loss })}\n`).join('');


const COMMANDS: Readonly<Record<string, Command<Options, void>>> = {
  all: command({
    options: { out: s, work: s, seed: s, agent_steps: s, inner_steps: s, outer_steps: s, jobs: s, from: s, until: s },
    usage: `  build.ts [all] [--out DIR] [--work DIR] [--seed S] [--agent_steps N] [--inner_steps N] [--outer_steps N] [--jobs J]
                [--from agents|inner|align|outer] [--until agents|inner|align|outer]
      the whole build into --out (default models/tiny/distillation); --work keeps the stages (default .cache/tiny-distillation)`,
    run: async (a) => {
      await buildDistillation({
        out: a.out ?? TINY_DISTILLATION_DIR,
        work: a.work ?? join(ROOT, '.cache', 'tiny-distillation'),
        seed: int('seed', a.seed, 0) ?? DISTILL_BUILD.seed,
        agentSteps: int('agent_steps', a.agent_steps, 1),
        innerSteps: int('inner_steps', a.inner_steps, 1) ?? DISTILL_BUILD.inner.steps,
        outerSteps: int('outer_steps', a.outer_steps, 1) ?? DISTILL_BUILD.outer.steps,
        jobs: int('jobs', a.jobs, 1) ?? Math.max(1, Math.min(2, availableParallelism())),
        from: oneOf('from', a.from, DISTILL_STAGES) ?? 'agents',
        until: oneOf('until', a.until, DISTILL_STAGES) ?? 'outer',
      });
    },
  }),
  agents: command({
    options: { out: s, role: s, steps: s, seed: s, losses: s, eval: s },
    usage: `  build.ts agents --out DIR [--role expert|learner] [--steps N] [--seed S] [--losses FILE.json] [--eval N]
      the agents from scratch (agents.ts) into DIR/<role>; --eval N scores them on N validation rows`,
    run: async (a) => {
      if (!a.out) throw new UsageError('agents needs --out DIR');
      const role = oneOf('role', a.role, DISTILL_ROLES);
      const evalRows = int('eval', a.eval, 1);
      for (const spec of DISTILL_AGENTS.filter((x) => !role || x.role === role)) {
        const r = await trainDistillAgent(spec, { out: a.out, seed: int('seed', a.seed, 0), steps: int('steps', a.steps, 1) });
        process.stdout.write(`${spec.name}: ${r.losses.length} steps in ${r.seconds.toFixed(0)} s, ${r.params} parameters\n`);
        if (a.losses) await writeFile(a.losses, `${JSON.stringify({ losses: r.losses, seconds: r.seconds })}\n`);
        if (evalRows) {
          const rows = priceSplit('validation').slice(0, evalRows);
          const e = await evalDistillAgent(r.dir, spec.role, rows);
          process.stdout.write(`${spec.role} on ${e.total} validation rows (gold note in the slot): ${e.correct} right\n`);
        }
      }
    },
  }),
  align: command({
    options: { system: s, out: s, seed: s, steps: s, losses: s },
    usage: `  build.ts align --system DIR --out DIR [--seed S] [--steps N] [--losses FILE.json]
      the outer links' alignment (align-outer.ts) from the agents and inner links of the system DIR`,
    run: async (a) => {
      if (!a.system || !a.out) throw new UsageError('align needs --system DIR and --out DIR');
      const r = await alignOuter({
        system: a.system,
        out: a.out,
        seed: int('seed', a.seed, 0) ?? DISTILL_BUILD.seed,
        m: defaultLatentSteps(getStyle('tiny_distillation')),
        steps: int('steps', a.steps, 1),
      });
      if (a.losses) await writeFile(a.losses, `${JSON.stringify({ losses: r.losses, seconds: r.seconds })}\n`);
    },
  }),
  rollouts: command({
    options: { system: s, split: s, limit: s, rounds: s },
    usage: `  build.ts rollouts [--system DIR] [--split validation|test] [--limit N] [--rounds R]
      the expert's latent rollout in each round of a latent run, decoded, against its note (rollouts.ts)`,
    run: async (a) => {
      const split = oneOf('split', a.split, ['validation', 'test'] as const) ?? 'validation';
      const rows = priceSplit(split).slice(0, int('limit', a.limit, 1) ?? 100);
      const rounds = int('rounds', a.rounds, 1) ?? 3;
      const r = await expertRollouts({ systemDir: a.system, rows, rounds });
      for (let i = 0; i < rounds; i++) {
        process.stdout.write(
          `round ${i + 1}: the expert's decoded rollout starts with the right price on ${r.price[i]}/${r.rows} ${split} rows, ` +
            `is the note's start on ${r.note[i]}/${r.rows} (first row: ${JSON.stringify(r.first[i] ?? '')})\n`,
        );
      }
    },
  }),
  eval: evalCommand(DISTILLATION_TARGET, '../tiny-system/eval.ts'),
};

export const USAGE = usageOf('scripts/tiny-distillation/build.ts', COMMANDS);

/** Runs one command (the whole build without one); returns the exit code. Errors other than usage propagate. */
export const main = (argv: readonly string[]): Promise<number> => runCommand('scripts/tiny-distillation/build.ts', COMMANDS, argv);

await runIfMain(import.meta.url, main);
