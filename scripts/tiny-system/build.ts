/**
 * The tiny data's one entry point: every command that writes models/tiny, each a command of the same table
 * shape as rmas's (src/runner/args.ts: options, aliases, usage, run).
 *
 *   npx tsx scripts/tiny-system/build.ts [all] [flags]   the whole build of tiny_sequential (npm run tiny:build:sequential)
 *   npx tsx scripts/tiny-system/build.ts COMMAND [flags] one stage or tool: task, agents, latent, chain, eval (npm run
 *                                                        tiny:eval:sequential), rollouts, models (npm run models:tiny)
 *
 * The build runs agents, latent and chain as child processes of this file. A bad command line prints the
 * usage and exits 2.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { UsageError } from '../../src/errors.ts';
import { taskSplit, toJsonl } from '../../src/eval/tiny-task.ts';
import { command, numberFlag, required, type Command, type Options } from '../../src/runner/args.ts';
import { CHAIN_DEFAULTS, chainPhase } from './chain-phase.ts';
import { b, int, json, oneOf, openBackend, runCommand, runIfMain, s, usageOf } from './cli.ts';
import { evalCommand, SEQUENTIAL_TARGET } from './eval.ts';
import { LATENT_DEFAULTS, latentPhase } from './latent-phase.ts';
import { ROOT, TINY_MODELS_DIR, TINY_SYSTEM_DIR } from './paths.ts';
import { BUILD_DEFAULTS, buildEmbeddedSystem, STAGES, type Stage } from './pipeline.ts';
import { scoreChain, scoreRollouts, type RolloutRole } from './rollouts.ts';
import { writeTinyModels } from './tiny-models.ts';
import { AGENT_SPECS, evalSolver, ROLES, trainTinyAgents, type AgentRole, type TrainAgentsOptions } from './train-agents.ts';





const COMMANDS: Readonly<Record<string, Command<Options, void>>> = {
  all: command({
    options: {
      out: s,
      work: s,
      stages: s,
      seed: s,
      agent_steps: s,
      inner_steps: s,
      outer_steps: s,
      chain_steps: s,
      jobs: s,
      from: s,
      until: s,
    },
    usage:
      '  build.ts [all] [--out DIR] [--work DIR] [--seed S] [--agent_steps N] [--inner_steps N] [--outer_steps N]' +
      ` [--chain_steps N] [--jobs J]
                [--from STAGE] [--until STAGE] [--stages DIR]
      the embedded system from its seed into --out (default models/tiny/system); stages: ${STAGES.join(', ')}`,
    run: async (a) => {
      const from = oneOf<Stage>('from', a.from, STAGES) ?? 'agents';
      const until = oneOf<Stage>('until', a.until, STAGES) ?? 'chain';
      if (STAGES.indexOf(until) < STAGES.indexOf(from)) throw new UsageError(`--until ${until} comes before --from ${from}`);
      const agentSteps = int('agent_steps', a.agent_steps, 1);
      await buildEmbeddedSystem({
        out: a.out ?? TINY_SYSTEM_DIR,
        ...(a.stages ? { stages: a.stages } : {}),
        work: a.work ?? join(ROOT, '.cache/tiny-build'),
        seed: int('seed', a.seed, 1) ?? BUILD_DEFAULTS.seed,
        ...(agentSteps ? { agentSteps } : {}),
        innerSteps: int('inner_steps', a.inner_steps, 1) ?? BUILD_DEFAULTS.inner.steps,
        outerSteps: int('outer_steps', a.outer_steps, 1) ?? BUILD_DEFAULTS.outer.steps,
        chainSteps: int('chain_steps', a.chain_steps, 1) ?? CHAIN_DEFAULTS.steps,
        jobs: int('jobs', a.jobs, 1) ?? Math.max(1, Math.min(3, availableParallelism())),
        from,
        until,
      });
    },
  }),
  task: command({
    options: { out: s },
    usage: `  build.ts task --out DIR
      the task's splits (src/eval/tiny-task.ts) as DIR/train.jsonl, validation.jsonl and test.jsonl`,
    run: async (a) => {
      const out = required('out', a.out);
      await mkdir(out, { recursive: true });
      for (const name of ['train', 'validation', 'test'] as const) {
        const rows = taskSplit(name);
        await writeFile(join(out, `${name}.jsonl`), toJsonl(rows), 'utf8');
        process.stdout.write(`${name}: ${rows.length} rows -> ${join(out, `${name}.jsonl`)}\n`);
      }
    },
  }),
  agents: command({
    options: { out: s, role: s, steps: s, seed: s, backend: s, eval: s, losses: s, first_phase: s, first_phase_losses: s },
    usage:
      '  build.ts agents --out DIR [--role planner|critic|solver] [--steps N] [--seed S] [--backend cpu|webgpu] [--eval N]' +
      ` [--losses FILE.json]
                [--first_phase DIR --first_phase_losses FILE.json]
      the agents trained from scratch (train-agents.ts), each into DIR/<role>/`,
    run: async (a) => {
      const out = required('out', a.out);
      const role = oneOf<AgentRole>('role', a.role, ROLES);
      const steps = int('steps', a.steps);
      const seed = int('seed', a.seed);
      const evalRows = int('eval', a.eval);
      if ((a.first_phase === undefined) !== (a.first_phase_losses === undefined))
        throw new UsageError('--first_phase and --first_phase_losses go together');
      const backend = await openBackend(a.backend);
      const t0 = performance.now();
      let firstPhase: TrainAgentsOptions['firstPhase'];
      if (a.first_phase && a.first_phase_losses) {
        // a --losses file of the first phase: { role: { losses: [...] } }
        const record = JSON.parse(await readFile(a.first_phase_losses, 'utf8')) as Record<string, { losses: number[] }>;
        firstPhase = { dir: a.first_phase, losses: Object.fromEntries(Object.entries(record).map(([r, v]) => [r, v.losses])) };
      }
      const specs = role ? AGENT_SPECS.filter((sp) => sp.role === role) : AGENT_SPECS;
      const results = await trainTinyAgents({ out, steps, seed, backend, specs, firstPhase });
      if (a.losses) {
        await writeFile(
          a.losses,
          json(
            Object.fromEntries(
              results.map((r) => [r.role, { name: r.name, params: r.params, seconds: r.seconds, examples: r.examples, losses: r.losses }]),
            ),
          ),
        );
      }
      for (const r of results) {
        const first = r.losses.slice(0, 10).reduce((x, y) => x + y, 0) / Math.min(10, r.losses.length);
        const last = r.losses.slice(-10).reduce((x, y) => x + y, 0) / Math.min(10, r.losses.length);
        process.stdout.write(
          `${r.name}: ${r.params} params, ${r.examples} sequences, loss ${first.toFixed(3)} -> ${last.toFixed(3)}, ${r.seconds.toFixed(1)}s -> ${r.dir}\n`,
        );
      }
      process.stdout.write(`total ${((performance.now() - t0) / 1000).toFixed(1)}s on ${backend.name}\n`);
      if (evalRows) {
        const solver = results.find((r) => r.role === 'solver');
        if (!solver) throw new UsageError('--eval needs the solver among the trained roles');
        const ev = await evalSolver(solver.dir, taskSplit('validation').slice(0, evalRows), backend);
        process.stdout.write(`solver (gold refined plan, greedy): ${ev.correct}/${ev.total} validation rows correct\n`);
      }
    },
  }),
  latent: command({
    options: { system: s, role: s, link: s, steps: s, seed: s, rollout: s, lr: s, drills: s, losses: s },
    usage:
      '  build.ts latent --system DIR --role planner|critic|solver --link FILE.pt [--steps N] [--seed S] [--rollout W] [--lr LR]' +
      ` [--drills N]
                [--losses FILE.json]
      the latent phase (latent-phase.ts): the agent learns to read its inner link's output, with the link ` +
      '(one cycle of N steps with --steps)',
    run: async (a) => {
      const system = required('system', a.system);
      const role = oneOf<AgentRole>('role', required('role', a.role), ROLES)!;
      const link = required('link', a.link);
      const steps = int('steps', a.steps);
      const rollout = numberFlag('rollout', a.rollout, { min: 0 });
      const drills = int('drills', a.drills);
      // --rollout and --drills apply to every cycle run
      const cycles = steps ? [steps] : LATENT_DEFAULTS.cycles[role];
      const r = await latentPhase({
        system,
        role,
        link,
        ...(steps ? { cycles } : {}),
        seed: int('seed', a.seed),
        lr: numberFlag('lr', a.lr, { min: 0 }),
        ...(rollout !== undefined ? { rolloutWeights: cycles.map(() => rollout) } : {}),
        ...(drills !== undefined ? { drills: cycles.map(() => drills) } : {}),
      });
      if (a.losses) await writeFile(a.losses, json({ [r.role]: { seconds: r.seconds, losses: r.losses } }));
      process.stdout.write(`${r.role}: latent phase ${r.losses.length} steps, ${r.seconds.toFixed(1)}s\n`);
    },
  }),
  chain: command({
    options: { system: s, seed: s, steps: s, losses: s },
    usage: `  build.ts chain --system DIR [--seed S] [--steps N] [--losses FILE.json]
      the chain phase (chain-phase.ts): the solver, with outer_23, learns to answer from the messages the system sends it`,
    run: async (a) => {
      const r = await chainPhase({ system: required('system', a.system), seed: int('seed', a.seed, 1), steps: int('steps', a.steps, 1) });
      if (a.losses)
        await writeFile(a.losses, `${JSON.stringify({ solver: { losses: r.losses, seconds: r.seconds, examples: r.examples } })}\n`);
    },
  }),
  eval: evalCommand(SEQUENTIAL_TARGET, 'eval.ts'),
  rollouts: command({
    options: { system: s, split: s, limit: s, roles: s, chain: b },
    usage: `  build.ts rollouts [--system DIR] [--split validation|test] [--limit N] [--roles planner,critic] [--chain]
      each role's latent rollout decoded by argmax against its gold text (rollouts.ts); --chain: inside the running system`,
    run: async (a) => {
      const split = oneOf('split', a.split, ['validation', 'test'] as const) ?? 'validation';
      const limit = int('limit', a.limit, 1) ?? 40;
      const roles = (a.roles ?? 'planner,critic').split(',').map((r) => r.trim());
      if (roles.some((r) => r !== 'planner' && r !== 'critic')) throw new UsageError(`--roles ${a.roles}: expected planner and/or critic`);
      const rows = taskSplit(split).slice(0, limit);
      const scores = a.chain
        ? await scoreChain({ systemDir: a.system, rows })
        : await scoreRollouts({ systemDir: a.system, rows, roles: roles as RolloutRole[] });
      for (const sc of scores) {
        process.stdout.write(
          `${sc.role}: the decoded rollout is the gold text on ${sc.exact}/${sc.rows} ${split} rows; ` +
            `gold prefix ${(100 * sc.prefixShare).toFixed(1)}% of tokens\n  first row: ${JSON.stringify(sc.decoded[0] ?? '')}\n`,
        );
      }
    },
  }),
  models: command({
    options: { out: s },
    usage: `  build.ts models [--out DIR]
      the tiny random checkpoints of every family (tiny-models.ts) into DIR (default models/tiny)`,
    run: async (a) => {
      for (const path of await writeTinyModels(resolve(a.out ?? TINY_MODELS_DIR))) process.stdout.write(`${path}\n`);
    },
  }),
};

export const USAGE = usageOf('scripts/tiny-system/build.ts', COMMANDS);

/** Runs one command (the whole build without one); returns the exit code. Errors other than usage propagate. */
export const main = (argv: readonly string[]): Promise<number> => runCommand('scripts/tiny-system/build.ts', COMMANDS, argv);

await runIfMain(import.meta.url, main);
