/**
 * The recursion system (issue 40, models/tiny/recursion): a two-agent RecursiveMAS in the distillation shape on the
 * multi-hop task (src/eval/tiny-hops.ts), whose questions need 1, 2 or 3 rounds. Built as the distillation system
 * is (scripts/tiny-distillation/build.ts), every link stage with both agents frozen:
 *   1. the task's splits as JSONL, and each role's inner-link data (the learner's: its stage in every round of the
 *      gold 3-round transcripts, so its targets are what it writes there, not the final answer);
 *   2. the two agents from scratch on text (agents.ts), one process each;
 *   3. each agent's inner link with `rmas train-inner`;
 *   4. the outer links' alignment on every round's prompts (align.ts: 10,000 steps on 2,000 prompts per sender);
 *   5. the alignment again on the running system's rollouts (realign.ts: 6 passes of 300 questions at 3 rounds), so
 *      each link also meets the states its sender has when its slot holds a latent message; the inner links are fit
 *      there too, to the sender's own embeddings of what it thinks, and replace the inner stage's;
 *   6. optionally (--outer_steps N; 0 by default) `rmas train-outer --init_outer` over 3 rounds on rollout latents,
 *      every round's cross-entropy at full weight against what the learner writes in that round of the gold
 *      transcript (the rows' round_targets). Measured on the validation split it lowers accuracy (the links learn
 *      to guess past hops they cannot reach: models/tiny/README.md), so the shipped links are the realigned ones.
 * The system is the embedded style tiny_recursion (src/mas/styles.ts); the stages run it from --work's copy (RMAS_TINY_SYSTEM).
 *
 *   npx tsx scripts/tiny-recursion/build.ts [all] [--out DIR] [--work DIR] [--seed S] [--from S] [--until S] …
 *   npx tsx scripts/tiny-recursion/build.ts agents --out DIR [--role expert|learner] [--steps N] [--seed S]
 *   npx tsx scripts/tiny-recursion/build.ts eval [--split test|validation] [--limit N] [--configs a,b] [--json FILE]
 *
 * Stages resume: --from inner|align|realign|outer starts there in --work (default .cache/tiny-recursion), whose system
 * folder holds the earlier stages' results (the agents never change after their stage).
 */
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { UsageError } from '../../src/errors.ts';
import { loadDecoderFromDir } from '../../src/model/dir.ts';
import { CpuBackend, defaultCpuKernels } from '../../src/tensor/cpu.ts';
import { goldTranscript, hopJsonl, hopSplit, hopWorld } from '../../src/eval/tiny-hops.ts';
import { command, type Command, type Options } from '../../src/runner/args.ts';
import { int, json, oneOf, runCommand, runIfMain, s, usageOf } from '../tiny-system/cli.ts';
import { ROOT } from '../tiny-system/paths.ts';
import { jsonlLosses, pool, runChild } from '../tiny-system/pipeline.ts';
import { HOPS_AGENTS, HOPS_ROLES, trainHopsAgent } from './agents.ts';
import { alignHopsOuter, HOPS_ALIGN_DEFAULTS } from './align.ts';
import { RECURSION_KERNELS, RECURSION_LATENT_STEPS, recursionEvalCommand, TINY_RECURSION_DIR } from './eval.ts';
import { meanSquare, realignOuter } from './realign.ts';
import { HOPS_PROMPT_FILE } from './prompts.ts';

export const RECURSION_BUILD = {
  seed: 7,
  latentSteps: RECURSION_LATENT_STEPS,
  inner: { steps: 400, batchSize: 8, lr: 2e-3, ceWeight: 1 },
  align: { ...HOPS_ALIGN_DEFAULTS, steps: 10_000, rowsPerRole: 2000 },
  realign: { rows: 300, steps: 2000, passes: 6 },
  outer: { steps: 0, batchSize: 4, lr: 1e-3, rounds: 3, latents: 'rollout', nonLastLossWeight: 1, untilEos: 1 },
} as const;

export const RECURSION_STAGES = ['agents', 'inner', 'align', 'realign', 'outer'] as const;
export type RecursionStage = (typeof RECURSION_STAGES)[number];

export function recursionInnerArgs(
  role: string,
  data: string,
  saveDir: string,
  o: { steps: number; seed: number; mseWeight: number },
  logJsonl: string,
): string[] {
  const { batchSize, lr, ceWeight } = RECURSION_BUILD.inner;
  const { steps, seed, mseWeight } = o;
  return [
    ...['train-inner', '--style', 'tiny_recursion', '--role', role, '--dataset_name', data, '--save_dir', saveDir],
    ...['--max_steps', String(steps), '--batch_size', String(batchSize), '--adapter_lr', String(lr), '--seed', String(seed)],
    ...['--adapter_ce_weight', String(ceWeight), '--adapter_mse_weight', String(mseWeight)],
    ...['--save_steps', '0', '--backend', 'cpu', '--log_jsonl', logJsonl],
  ];
}

/**
 * The inner loop's MSE weight for an agent: 1 / the mean square of its embedding table (3 significant digits), so
 * that the term is the squared error relative to the embeddings' scale. The cosine term alone leaves the norm free,
 * and the links' outputs grew to 3–8 times the embeddings' norm: the frozen agent then read its own thoughts
 * as no token it was trained on, and the expert's third latent step (the note's closing brace) went astray.
 */
export async function embeddingMseWeight(agentDir: string): Promise<number> {
  const decoder = await loadDecoderFromDir(agentDir, new CpuBackend('f32'));
  try {
    return Number((1 / (await meanSquare(decoder.weights.embed))).toPrecision(3));
  } finally {
    decoder.dispose();
  }
}

export function recursionOuterArgs(data: string, init: string, saveDir: string, steps: number, seed: number, logJsonl: string): string[] {
  const { batchSize, lr, rounds, latents, nonLastLossWeight, untilEos } = RECURSION_BUILD.outer;
  const m = RECURSION_BUILD.latentSteps;
  return [
    ...['train-outer', '--style', 'tiny_recursion', '--dataset_name', data, '--save_dir', saveDir, '--init_outer', init],
    ...['--max_steps', String(steps), '--batch_size', String(batchSize), '--outer_lr', String(lr), '--seed', String(seed)],
    ...['--num_recursive_rounds', String(rounds), '--max_latent_tokens', String(m), '--outer_latents', latents],
    ...['--supervise_final_only', '0', '--non_last_loss_weight', String(nonLastLossWeight), '--loss_until_eos', String(untilEos)],
    ...['--save_steps', '0', '--backend', 'cpu', '--log_jsonl', logJsonl],
  ];
}

/** The learner's inner-link rows: its stage in every round of the gold 3-round transcripts of the train rows. */
export function learnerInnerJsonl(): string {
  const world = hopWorld();
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const row of hopSplit('train'))
    for (const st of goldTranscript(world, row, 3).filter((x) => x.role === 'learner')) {
      const r = { question: row.question, distill_expert: st.slot, distill_learner: st.target, answer: st.target, task_family: 'math' };
      const line = JSON.stringify(r);
      if (!seen.has(line)) lines.push(line);
      seen.add(line);
    }
  return `${lines.join('\n')}\n`;
}

/**
 * The outer stage's rows: the train split with each agent's gold text per round of the 3-round transcript in
 * `round_targets` (src/train/data/roles.ts), so that every round's cross-entropy scores what the learner writes there.
 */
export function outerTrainJsonl(rounds: number = RECURSION_BUILD.outer.rounds): string {
  const world = hopWorld();
  const rows = hopSplit('train').map((row) => {
    const stages = goldTranscript(world, row, rounds);
    const of = (role: string) => stages.filter((st) => st.role === role).map((st) => st.target);
    return { ...row, round_targets: { expert: of('expert'), learner: of('learner') } };
  });
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

const BUILD = ['--import', 'tsx', join(ROOT, 'scripts/tiny-recursion/build.ts')];
const RMAS = [join(ROOT, 'bin/rmas.js')];

/** The loss curves of an earlier build.json, which a resumed build carries over for the stages it does not run. */
interface EarlierLosses {
  agents?: Record<string, number[]>;
  inner?: Record<string, number[]>;
  align?: unknown;
}

export interface RecursionBuildOptions {
  out: string;
  work: string;
  seed: number;
  from: RecursionStage;
  until: RecursionStage;
  jobs: number;
  agentSteps?: number;
  innerSteps: number;
  alignSteps?: number;
  outerSteps: number;
}

export async function buildRecursion(o: RecursionBuildOptions): Promise<void> {
  const work = resolve(o.work);
  const system = join(work, 'system');
  const logs = join(work, 'logs');
  const data = (f: string) => join(work, 'data', f);
  const at = (st: RecursionStage) => RECURSION_STAGES.indexOf(st);
  const doStage = (st: RecursionStage) => at(st) >= at(o.from) && at(st) <= at(o.until);
  if (o.from !== 'agents' && !existsSync(join(system, 'learner', 'model.safetensors'))) {
    if (!existsSync(join(TINY_RECURSION_DIR, 'learner', 'model.safetensors')))
      throw new UsageError(`--from ${o.from}: ${work} holds no agents and no committed system exists; start with --from agents`);
    process.stderr.write(`--from ${o.from}: starting from the committed system ${TINY_RECURSION_DIR}\n`);
    await cp(TINY_RECURSION_DIR, system, { recursive: true });
  }
  for (const d of [logs, join(work, 'data'), system]) await mkdir(d, { recursive: true });
  await writeFile(data('train.jsonl'), outerTrainJsonl());
  await writeFile(data('inner-expert.jsonl'), hopJsonl(hopSplit('train')));
  await writeFile(data('inner-learner.jsonl'), learnerInnerJsonl());
  await writeFile(join(system, 'prompts.json'), json(HOPS_PROMPT_FILE));
  // a resumed build records the earlier stages as the system it starts from recorded them
  const earlier = existsSync(join(system, 'build.json'))
    ? (JSON.parse(await readFile(join(system, 'build.json'), 'utf8')) as { seconds?: Record<string, number>; losses?: EarlierLosses })
    : {};
  const secondsFile = join(logs, 'seconds.json');
  const seconds: Record<string, number> = {
    ...earlier.seconds,
    ...(existsSync(secondsFile) ? JSON.parse(await readFile(secondsFile, 'utf8')) : {}),
  };
  const saveSeconds = () => writeFile(secondsFile, json(seconds));
  // children that run side by side share the cores rather than each taking them all (the SIMD kernels' results do
  // not depend on their thread count)
  const shared = { RMAS_CPU_THREADS: process.env.RMAS_CPU_THREADS ?? String(Math.max(1, Math.floor(availableParallelism() / o.jobs))) };

  if (doStage('agents')) {
    const steps = o.agentSteps ? ['--steps', String(o.agentSteps)] : [];
    const times = await pool(
      o.jobs,
      HOPS_ROLES.map((role) => () => {
        const args = [...BUILD, 'agents', '--out', system, '--role', role, ...steps, '--seed', String(o.seed)];
        const losses = ['--losses', join(logs, `agent-${role}.json`)];
        return runChild(`agent ${role}`, [...args, ...losses], system, join(logs, `agent-${role}.log`), shared);
      }),
    );
    HOPS_ROLES.forEach((r, i) => (seconds[`agent ${r}`] = times[i]!));
    await saveSeconds();
  }
  const mseWeights: Record<string, number> = {};
  for (const role of HOPS_ROLES) mseWeights[role] = await embeddingMseWeight(join(system, role));
  if (doStage('inner')) {
    const times = await pool(
      o.jobs,
      HOPS_ROLES.map((role) => () => {
        const log = join(logs, `inner-${role}.jsonl`);
        const opts = { steps: o.innerSteps, seed: o.seed, mseWeight: mseWeights[role]! };
        const args = recursionInnerArgs(role, data(`inner-${role}.jsonl`), join(work, `inner-${role}`), opts, log);
        return runChild(`inner ${role}`, [...RMAS, ...args], system, join(logs, `inner-${role}.log`), shared);
      }),
    );
    HOPS_ROLES.forEach((r, i) => (seconds[`inner ${r}`] = times[i]!));
    for (const role of HOPS_ROLES)
      for (const f of ['adapter.pt', 'adapter_config.json']) await cp(join(work, `inner-${role}`, f), join(system, role, f));
    await saveSeconds();
  }
  const LINK_FILES = ['outer_el.pt', 'outer_le.pt', 'outer_adapter_config.json', 'outerlink_config.json'];
  const installLinks = async (from: string) => {
    await mkdir(join(system, 'outer'), { recursive: true });
    for (const f of LINK_FILES) await cp(join(from, f), join(system, 'outer', f));
  };
  // the inner stage's links, which the realignment replaces: align and realign start from them when resumed
  const restoreInner = async () => {
    for (const role of HOPS_ROLES)
      if (existsSync(join(work, `inner-${role}`, 'adapter.pt')))
        await cp(join(work, `inner-${role}`, 'adapter.pt'), join(system, role, 'adapter.pt'));
  };
  if (doStage('align')) {
    await restoreInner();
    const steps = ['--steps', String(o.alignSteps ?? RECURSION_BUILD.align.steps), '--rows', String(RECURSION_BUILD.align.rowsPerRole)];
    const args = [...BUILD, 'align', '--system', system, '--out', join(work, 'align'), '--seed', String(o.seed), ...steps];
    seconds.align = await runChild('align', [...args, '--losses', join(logs, 'align.json')], system, join(logs, 'align.log'));
    // the realignment runs the system with these links
    await installLinks(join(work, 'align'));
    await saveSeconds();
  }
  if (doStage('realign')) {
    const { rows, steps, passes } = RECURSION_BUILD.realign;
    const args = [...BUILD, 'realign', '--system', system, '--init', join(work, 'align'), '--out', join(work, 'realign')];
    const opts = ['--seed', String(o.seed), '--rows', String(rows), '--steps', String(steps), '--passes', String(passes)];
    await restoreInner();
    seconds.realign = await runChild('realign', [...args, ...opts], system, join(logs, 'realign.log'));
    await installLinks(join(work, 'realign'));
    for (const role of HOPS_ROLES) await cp(join(work, 'realign', role, 'adapter.pt'), join(system, role, 'adapter.pt'));
    await saveSeconds();
  }
  if (doStage('outer') && o.outerSteps > 0) {
    const log = join(logs, 'outer.jsonl');
    const args = recursionOuterArgs(data('train.jsonl'), join(work, 'realign'), join(work, 'outer'), o.outerSteps, o.seed, log);
    seconds.outer = await runChild('outer', [...RMAS, ...args], system, join(logs, 'outer.log'));
    await installLinks(join(work, 'outer'));
    await saveSeconds();
  }
  const readJson = async <T>(file: string): Promise<T | undefined> =>
    existsSync(file) ? (JSON.parse(await readFile(file, 'utf8')) as T) : undefined;
  const jsonlOr = async (file: string) => (existsSync(file) ? jsonlLosses(file) : []);
  const record = {
    seed: o.seed,
    // the CPU kernels the stages ran on (runIfMain's choice unless RMAS_CPU_KERNELS named others)
    kernels: defaultCpuKernels(),
    agents: Object.fromEntries(HOPS_AGENTS.map((a) => [a.role, { ...a, steps: o.agentSteps ?? a.steps }])),
    inner: { ...RECURSION_BUILD.inner, steps: o.innerSteps, mseWeights },
    align: { ...RECURSION_BUILD.align, steps: o.alignSteps ?? RECURSION_BUILD.align.steps },
    realign: RECURSION_BUILD.realign,
    outer: { ...RECURSION_BUILD.outer, steps: o.outerSteps, latentSteps: RECURSION_BUILD.latentSteps },
    seconds,
    losses: {
      agents: Object.fromEntries(
        await Promise.all(
          HOPS_ROLES.map(async (r) => [
            r,
            (await readJson<{ losses: number[] }>(join(logs, `agent-${r}.json`)))?.losses ?? earlier.losses?.agents?.[r] ?? [],
          ]),
        ),
      ),
      inner: Object.fromEntries(
        await Promise.all(HOPS_ROLES.map(async (r) => [r, existsSync(join(logs, `inner-${r}.jsonl`))
          ? await jsonlLosses(join(logs, `inner-${r}.jsonl`)) : earlier.losses?.inner?.[r] ?? []])),
      ),
      align: (await readJson<{ losses: unknown }>(join(logs, 'align.json')))?.losses ?? earlier.losses?.align ?? {},
      outer: o.outerSteps > 0 ? await jsonlOr(join(logs, 'outer.jsonl')) : [],
    },
  };
  await writeFile(join(system, 'build.json'), `${JSON.stringify(record)}\n`);
  const out = resolve(o.out);
  if (out !== system) {
    await rm(out, { recursive: true, force: true });
    await cp(system, out, { recursive: true });
  }
  process.stderr.write(`tiny recursion system written to ${out}; stage seconds ${JSON.stringify(seconds)}\n`);
}

const COMMANDS: Readonly<Record<string, Command<Options, void>>> = {
  all: command({
    options: { out: s, work: s, seed: s, agent_steps: s, inner_steps: s, align_steps: s, outer_steps: s, jobs: s, from: s, until: s },
    usage: `  build.ts [all] [--out DIR] [--work DIR] [--seed S] [--agent_steps N] [--inner_steps N] [--align_steps N] [--outer_steps N]
                [--jobs J] [--from agents|inner|align|realign|outer] [--until …]
      the whole build into --out (default models/tiny/recursion); --work keeps the stages (default .cache/tiny-recursion)`,
    run: async (a) => {
      await buildRecursion({
        out: a.out ?? TINY_RECURSION_DIR,
        work: a.work ?? join(ROOT, '.cache', 'tiny-recursion'),
        seed: int('seed', a.seed, 0) ?? RECURSION_BUILD.seed,
        agentSteps: int('agent_steps', a.agent_steps, 1),
        innerSteps: int('inner_steps', a.inner_steps, 1) ?? RECURSION_BUILD.inner.steps,
        alignSteps: int('align_steps', a.align_steps, 1),
        outerSteps: int('outer_steps', a.outer_steps, 0) ?? RECURSION_BUILD.outer.steps,
        jobs: int('jobs', a.jobs, 1) ?? Math.max(1, Math.min(2, availableParallelism())),
        from: oneOf('from', a.from, RECURSION_STAGES) ?? 'agents',
        until: oneOf('until', a.until, RECURSION_STAGES) ?? 'outer',
      });
    },
  }),
  agents: command({
    options: { out: s, role: s, steps: s, seed: s, losses: s },
    usage: `  build.ts agents --out DIR [--role expert|learner] [--steps N] [--seed S] [--losses FILE.json]
      the agents from scratch (agents.ts) into DIR/<role>`,
    run: async (a) => {
      if (!a.out) throw new UsageError('agents needs --out DIR');
      const role = oneOf('role', a.role, HOPS_ROLES);
      for (const spec of HOPS_AGENTS.filter((x) => !role || x.role === role)) {
        const r = await trainHopsAgent(spec, { out: a.out, seed: int('seed', a.seed, 0), steps: int('steps', a.steps, 1) });
        process.stdout.write(`${spec.name}: ${r.losses.length} steps in ${r.seconds.toFixed(0)} s, ${r.params} parameters\n`);
        if (a.losses) await writeFile(a.losses, `${JSON.stringify({ losses: r.losses, seconds: r.seconds })}\n`);
      }
    },
  }),
  align: command({
    options: { system: s, out: s, seed: s, steps: s, rows: s, losses: s },
    usage: `  build.ts align --system DIR --out DIR [--seed S] [--steps N] [--rows N] [--losses FILE.json]
      the outer links' alignment (align.ts) from the agents and inner links of the system DIR`,
    run: async (a) => {
      if (!a.system || !a.out) throw new UsageError('align needs --system DIR and --out DIR');
      const r = await alignHopsOuter({
        system: a.system,
        out: a.out,
        seed: int('seed', a.seed, 0) ?? RECURSION_BUILD.seed,
        m: RECURSION_BUILD.latentSteps,
        steps: int('steps', a.steps, 1),
        rows: int('rows', a.rows, 1),
      });
      if (a.losses) await writeFile(a.losses, `${JSON.stringify({ losses: r.losses, seconds: r.seconds })}\n`);
    },
  }),
  realign: command({
    options: { system: s, init: s, out: s, seed: s, rows: s, steps: s, passes: s },
    usage: `  build.ts realign --system DIR --init DIR --out DIR [--seed S] [--rows N] [--steps N] [--passes P]
      the outer links of --init aligned again on the running system's rollouts (realign.ts; stage 5 of the build)`,
    run: async (a) => {
      if (!a.system || !a.init || !a.out) throw new UsageError('realign needs --system DIR, --init DIR and --out DIR');
      await realignOuter({
        system: resolve(a.system),
        init: resolve(a.init),
        out: resolve(a.out),
        seed: int('seed', a.seed, 0) ?? RECURSION_BUILD.seed,
        m: RECURSION_BUILD.latentSteps,
        rows: int('rows', a.rows, 1),
        steps: int('steps', a.steps, 1),
        passes: int('passes', a.passes, 1),
      });
    },
  }),
  eval: recursionEvalCommand,
};

export const USAGE = usageOf('scripts/tiny-recursion/build.ts', COMMANDS);
export const main = (argv: readonly string[]): Promise<number> => runCommand('scripts/tiny-recursion/build.ts', COMMANDS, argv);

await runIfMain(import.meta.url, main, RECURSION_KERNELS);
