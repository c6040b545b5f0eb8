/**
 * The committed tiny system (models/tiny/system, style tiny_sequential; issue 7):
 *   - it loads as the default of `rmas ask` and answers a fixed subset of the held-out test split, greedy,
 *     as `npm run tiny:eval` recorded it in models/tiny/system/eval.json (same rows, same configs);
 *   - rebuilding it from its seed starts on the recorded loss curves: the first optimizer steps of each
 *     agent (train-agents.ts), of an inner link (`rmas train-inner`, on the text-stage agents of
 *     models/tiny/stages), of the latent phase (latent-phase.ts, from those agents and the inner stage's
 *     link), of the outer links (`tiny:build --from outer` in a fresh folder, on the committed system) and
 *     of the chain phase (chain-phase.ts, from its inputs kept in models/tiny/stages/chain) give the losses
 *     build.json holds (a full rebuild takes about three hours).
 * The WebGPU twin of the accuracy check is test/tiny-system.gpu.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { evalTiny, type EvalConfig } from '../scripts/tiny-system/eval';
import { taskSplit } from '../src/eval/tiny-task';
import { AGENT_SPECS, DEFAULTS, trainTinyAgents } from '../scripts/tiny-system/train-agents';
import { TINY_STAGES_DIR, TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths';
import { innerTrainArgs } from '../scripts/tiny-system/pipeline';
import { latentPhase } from '../scripts/tiny-system/latent-phase';
import { CHAIN_DEFAULTS, chainPhase } from '../scripts/tiny-system/chain-phase';
import { CpuBackend } from '../src/tensor/cpu';
import { useBuildKernels } from '../scripts/tiny-system/cli';

const ROOT = resolve(import.meta.dirname, '..');
// the recorded curves were made on the build's CPU kernels (the TypeScript reference): this file's runs use them too
useBuildKernels();
const SYSTEM = TINY_SYSTEM_DIR;

interface EvalRecord {
  latentSteps: number;
  offset: number;
  results: { config: EvalConfig; correct: number; total: number; ok: boolean[] }[];
}
interface BuildRecord {
  seed: number;
  losses: {
    agents: Record<string, number[]>;
    inner: Record<string, number[]>;
    latent: Record<string, number[]>;
    outer: number[];
    chain: number[];
  };
}

const evalRecord = JSON.parse(readFileSync(join(SYSTEM, 'eval.json'), 'utf8')) as EvalRecord;
const build = JSON.parse(readFileSync(join(SYSTEM, 'build.json'), 'utf8')) as BuildRecord;
/** The fixed subset: the first rows of the test split. */
export const SUBSET = 24;
const tmp: string[] = [];
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

/** Correct answers the eval script recorded for `config` on the first `n` test rows. */
export function recordedCorrect(record: EvalRecord, config: EvalConfig, n: number): number {
  const r = record.results.find((x) => x.config === config);
  if (!r) throw new Error(`eval.json has no ${config}; rerun npm run tiny:eval -- --json models/tiny/system/eval.json`);
  expect(record.offset).toBe(0);
  return r.ok.slice(0, n).filter(Boolean).length;
}

describe('the committed tiny system', () => {
  it('answers the fixed test subset as the eval script recorded (CPU, greedy)', async () => {
    const configs: EvalConfig[] = ['alone', 'text1', 'latent1', 'latent3'];
    const rows = taskSplit('test').slice(0, SUBSET);
    const results = await evalTiny({ backend: new CpuBackend('f32'), rows, configs, latentSteps: evalRecord.latentSteps });
    for (const r of results) {
      const want = recordedCorrect(evalRecord, r.config, SUBSET);
      // same code, same weights: equal up to a rounding-level tie flipping one greedy pick
      expect(Math.abs(r.correct - want), `${r.config}: ${r.correct} vs recorded ${want}`).toBeLessThanOrEqual(1);
    }
  }, 240_000);

  it('is what `rmas ask` runs by default and answers a test question', () => {
    // the first test question the recorded 3-round latent run answered correctly
    const index = evalRecord.results.find((r) => r.config === 'latent3')!.ok.indexOf(true);
    expect(index).toBeGreaterThanOrEqual(0);
    const row = taskSplit('test')[index]!;
    const out = execFileSync(
      process.execPath,
      [join(ROOT, 'bin/rmas.js'), 'ask', '--question', row.question, '--greedy', '--backend', 'cpu', '--json'],
      {
        cwd: tmpdir(),
        encoding: 'utf8',
        env: { ...process.env, RMAS_TINY_SYSTEM: '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const res = JSON.parse(out) as { answer: string; rounds: number };
    expect(res.rounds).toBe(3);
    expect(res.answer).toBe(String(row.answer_value));
  }, 120_000);
});

describe('rebuilding the tiny system from its seed', () => {
  const close = (got: number[], want: number[]) => {
    expect(got).toHaveLength(want.length);
    got.forEach((g, i) =>
      expect(Math.abs(g - want[i]!), `step ${i + 1}: ${g} vs ${want[i]}`).toBeLessThan(1e-4 * Math.max(1, Math.abs(want[i]!))),
    );
  };

  it('starts every agent on its recorded loss curve', async () => {
    const out = mkdtempSync(join(tmpdir(), 'tiny-rebuild-'));
    tmp.push(out);
    const steps = 4;
    const results = await trainTinyAgents({ out, seed: build.seed, stopAfter: steps, logEvery: 0, backend: new CpuBackend('f32') });
    for (const r of results) {
      const spec = AGENT_SPECS.find((s) => s.role === r.role)!;
      expect(build.losses.agents[r.role]!.length, r.role).toBe((spec.steps ?? DEFAULTS.steps) + (spec.finetune?.steps ?? 0));
      close(r.losses, build.losses.agents[r.role]!.slice(0, steps));
    }
  }, 240_000);

  it('starts the inner links, the latent phase and the outer links on their recorded loss curves', async () => {
    const work = mkdtempSync(join(tmpdir(), 'tiny-links-'));
    tmp.push(work);
    const data = join(work, 'train.jsonl');
    execFileSync(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/tiny-system/build.ts'), 'task', '--out', work], {
      cwd: ROOT,
      stdio: 'pipe',
    });
    const read = (file: string) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => (JSON.parse(l) as { loss: number }).loss);
    // the system as the text stage left it: the committed folders with the text-stage agents' weights
    const textSystem = join(work, 'text-system');
    cpSync(SYSTEM, textSystem, { recursive: true });
    for (const role of ['planner', 'critic', 'solver'])
      cpSync(join(TINY_STAGES_DIR, 'text', `${role}.safetensors`), join(textSystem, role, 'model.safetensors'));
    // the build's own arguments with the full step count replaced (warm-up steps do not depend on it), stopped early
    const innerSteps = 3;
    const log = join(work, 'inner.jsonl');
    execFileSync(
      process.execPath,
      [join(ROOT, 'bin/rmas.js'), ...innerTrainArgs('critic', data, join(work, 'inner'), innerSteps, build.seed, log)],
      {
        cwd: ROOT,
        env: { ...process.env, RMAS_TINY_SYSTEM: textSystem },
        stdio: 'pipe',
      },
    );
    close(read(log), build.losses.inner.critic!.slice(0, innerSteps));
    const latent = await latentPhase({
      system: textSystem,
      role: 'planner',
      link: join(TINY_STAGES_DIR, 'inner', 'planner.pt'),
      seed: build.seed,
      stopAfter: 2,
      log: () => {},
    });
    close(latent.losses, build.losses.latent.planner!.slice(0, 2));
  }, 300_000);

  it('starts the chain phase on its recorded loss curve, from its kept inputs', async () => {
    const work = mkdtempSync(join(tmpdir(), 'tiny-chain-curve-'));
    tmp.push(work);
    // the system as the outer stage left it: the committed folders with the chain phase's inputs
    cpSync(SYSTEM, work, { recursive: true });
    cpSync(join(TINY_STAGES_DIR, 'chain', 'solver.safetensors'), join(work, 'solver', 'model.safetensors'));
    cpSync(join(TINY_STAGES_DIR, 'chain', 'outer_23.pt'), join(work, 'outer', 'outer_23.pt'));
    const r = await chainPhase({ system: work, seed: build.seed, stopAfter: 2, log: () => {} });
    expect(build.losses.chain).toHaveLength(CHAIN_DEFAULTS.steps);
    close(r.losses, build.losses.chain.slice(0, 2));
  }, 300_000);

  it('restarts at a later stage from the committed system: --from outer starts on the recorded outer curve', () => {
    const work = mkdtempSync(join(tmpdir(), 'tiny-from-outer-'));
    tmp.push(work);
    const out = join(work, 'out');
    execFileSync(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'scripts/tiny-system/build.ts'),
        '--work',
        join(work, 'w'),
        '--from',
        'outer',
        '--until',
        'outer',
        '--outer_steps',
        '2',
        '--out',
        out,
      ],
      {
        cwd: ROOT,
        stdio: 'pipe',
      },
    );
    const rec = JSON.parse(readFileSync(join(out, 'build.json'), 'utf8')) as BuildRecord;
    close(rec.losses.outer, build.losses.outer.slice(0, 2));
    // the earlier stages' curves carried over from the committed record, and their snapshots copied next to --out
    expect(rec.losses.agents).toEqual(build.losses.agents);
    expect(rec.losses.inner).toEqual(build.losses.inner);
    expect(rec.losses.latent).toEqual(build.losses.latent);
    for (const role of ['planner', 'critic', 'solver']) {
      expect(readFileSync(join(work, 'out-stages', 'text', `${role}.safetensors`))).toEqual(
        readFileSync(join(TINY_STAGES_DIR, 'text', `${role}.safetensors`)),
      );
      // the agents the outer links trained on are the latent phase's: the committed ones, but the solver, which
      // the chain phase trained afterwards (its input is kept in stages/chain)
      const agent = role === 'solver' ? join(TINY_STAGES_DIR, 'chain', 'solver.safetensors') : join(SYSTEM, role, 'model.safetensors');
      expect(readFileSync(join(out, role, 'model.safetensors'))).toEqual(readFileSync(agent));
    }
  }, 300_000);

  it('restarts at the chain phase from the committed system: --from chain starts on the recorded chain curve', () => {
    const work = mkdtempSync(join(tmpdir(), 'tiny-from-chain-'));
    tmp.push(work);
    const out = join(work, 'out');
    execFileSync(
      process.execPath,
      [
        '--import',
        'tsx',
        join(ROOT, 'scripts/tiny-system/build.ts'),
        '--work',
        join(work, 'w'),
        '--from',
        'chain',
        '--chain_steps',
        '2',
        '--out',
        out,
      ],
      {
        cwd: ROOT,
        stdio: 'pipe',
      },
    );
    const rec = JSON.parse(readFileSync(join(out, 'build.json'), 'utf8')) as BuildRecord;
    // a 2-step schedule warms up in 1 step, so only the first loss (before any update) is the 2000-step run's
    expect(rec.losses.chain).toHaveLength(2);
    close(rec.losses.chain.slice(0, 1), build.losses.chain.slice(0, 1));
    expect(Number.isFinite(rec.losses.chain[1])).toBe(true);
    expect(rec.losses.outer).toEqual(build.losses.outer);
    expect(rec.losses.latent).toEqual(build.losses.latent);
    // the stage changed the solver and outer_23, from their kept inputs, and nothing else
    for (const f of [
      'planner/model.safetensors',
      'critic/model.safetensors',
      'outer/outer_12.pt',
      'outer/outer_31.pt',
      'solver/adapter.pt',
    ]) {
      expect(readFileSync(join(out, f)), f).toEqual(readFileSync(join(SYSTEM, f)));
    }
    for (const [f, input] of [['solver/model.safetensors', 'solver.safetensors'], ['outer/outer_23.pt', 'outer_23.pt']] as const) {
      const got = readFileSync(join(out, f));
      expect(got.equals(readFileSync(join(TINY_STAGES_DIR, 'chain', input))), f).toBe(false);
      expect(got.equals(readFileSync(join(SYSTEM, f))), f).toBe(false);
    }
  }, 300_000);
});
