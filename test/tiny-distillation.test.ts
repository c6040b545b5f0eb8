/**
 * The committed tiny distillation system (models/tiny/distillation, style tiny_distillation; its build in
 * scripts/tiny-distillation):
 *   - it answers a fixed subset of the held-out test split, greedy, in every configuration of the table as
 *     `npm run tiny:eval` recorded it in eval.json (same rows, same configs, ablations included), and the
 *     recorded table meets its goal: the latent system well above the learner alone, at least text-MAS's
 *     accuracy with at most half its generated tokens, and the ablations back near the learner alone;
 *   - `rmas ask` runs it and its ablation flags do what they say: a message from another question makes the learner
 *     price this question's quantity at the other question's price;
 *   - rebuilding it from its seed starts on the recorded loss curves: the first optimizer steps of each agent, of
 *     an inner link (`rmas train-inner`), of the outer links' alignment and of `rmas train-outer` (through
 *     `tiny:build --from align` in a fresh folder) give the losses build.json holds.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { priceJsonl, priceSplit } from '../src/eval/tiny-prices';
import { CpuBackend } from '../src/tensor/cpu';
import { useBuildKernels } from '../scripts/tiny-system/cli';
import { DISTILL_AGENTS, trainDistillAgent } from '../scripts/tiny-distillation/agents';
import { alignOuter } from '../scripts/tiny-distillation/align-outer';
import { DISTILL_BUILD, distillInnerArgs, type DistillBuildRecord } from '../scripts/tiny-distillation/build';
import { DISTILLATION_TARGET } from '../scripts/tiny-distillation/eval';
import { evalTiny, type ConfigResult, type EvalConfig } from '../scripts/tiny-system/eval';
import { TINY_DISTILLATION_DIR } from '../scripts/tiny-system/paths';

const ROOT = resolve(import.meta.dirname, '..');
// the recorded curves were made on the build's CPU kernels (the TypeScript reference): this file's runs use them too
useBuildKernels();
const SYSTEM = TINY_DISTILLATION_DIR;
const record = JSON.parse(readFileSync(join(SYSTEM, 'eval.json'), 'utf8')) as {
  latentSteps: number;
  offset: number;
  rows: number;
  results: ConfigResult[];
};
const build = JSON.parse(readFileSync(join(SYSTEM, 'build.json'), 'utf8')) as DistillBuildRecord;
const SUBSET = 40;
const tmp: string[] = [];
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});
const result = (config: EvalConfig) => {
  const r = record.results.find((x) => x.config === config);
  if (!r) throw new Error(`eval.json has no ${config}; rerun npm run tiny:eval -- --json models/tiny/distillation/eval.json`);
  return r;
};
const rmas = (args: string[]) =>
  spawnSync(process.execPath, [join(ROOT, 'bin/rmas.js'), ...args], { cwd: tmpdir(), encoding: 'utf8', env: { ...process.env } });

describe('the committed tiny distillation system', () => {
  it('its recorded table (the whole test split) meets the goal the README states', () => {
    expect(record.rows).toBe(200);
    expect(record.offset).toBe(0);
    const acc = (c: EvalConfig) => result(c).accuracy;
    const alone = acc('alone');
    expect(acc('latent1') - alone).toBeGreaterThanOrEqual(0.25);
    expect(acc('latent1')).toBeGreaterThanOrEqual(acc('text1'));
    expect(result('latent1').tokens).toBeLessThanOrEqual(result('text1').tokens / 2);
    expect(Math.abs(acc('shuffled1') - alone)).toBeLessThanOrEqual(0.05);
    expect(acc('zeroed1')).toBeLessThan(acc('latent1'));
    // every figure is what its answers say
    for (const r of record.results) expect(r.correct, r.config).toBe(r.ok.filter(Boolean).length);
  });

  it('answers the fixed test subset as the eval script recorded, in every configuration (CPU, greedy)', async () => {
    const rows = priceSplit('test').slice(0, SUBSET);
    const configs = record.results.map((r) => r.config);
    const results = await evalTiny({
      target: DISTILLATION_TARGET,
      backend: new CpuBackend('f32'),
      rows,
      configs,
      latentSteps: record.latentSteps,
    });
    for (const r of results) {
      const want = result(r.config);
      // the shuffled donors of a subset wrap at its end, not at the split's: that row may differ
      const rowsToCompare = r.config.startsWith('shuffled') ? SUBSET - 1 : SUBSET;
      expect(r.answers.slice(0, rowsToCompare), r.config).toEqual(want.answers.slice(0, rowsToCompare));
    }
  }, 240_000);

  it("rmas ask runs it; --messages_from prices the question at the other question's price, --zero_messages is recorded", () => {
    const rows = priceSplit('test');
    const q = rows[0]!;
    const d = rows.find((r) => r.price !== q.price && r.quantity !== 1)!;
    const base = ['ask', '--style', 'tiny_distillation', '--greedy', '--num_recursive_rounds', '1', '--backend', 'cpu', '--json'];
    const plain = rmas([...base, '--question', q.question]);
    expect(plain.status, plain.stderr).toBe(0);
    expect(JSON.parse(plain.stdout).answer).toBe(String(q.answer_value));
    const swapped = rmas([...base, '--question', q.question, '--messages_from', d.question]);
    expect(swapped.status, swapped.stderr).toBe(0);
    const s = JSON.parse(swapped.stdout) as { answer: string; messages: string };
    expect(s.messages).toBe(`from: ${d.question}`);
    expect(s.answer).toBe(String(q.quantity * d.price));
    expect(swapped.stderr).toContain(`messages from "${d.question}"`);
    const zeroed = rmas([...base, '--question', q.question, '--zero_messages']);
    expect(zeroed.status, zeroed.stderr).toBe(0);
    expect(JSON.parse(zeroed.stdout).messages).toBe('zeroed');
    const both = rmas([...base, '--question', q.question, '--zero_messages', '--messages_from', d.question]);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/--zero_messages and --messages_from are two ablations; give one/);
    const text = rmas([...base, '--question', q.question, '--mode', 'text', '--zero_messages']);
    expect(text.status).toBe(2);
    expect(text.stderr).toMatch(/--zero_messages replaces latent messages; text mode sends none/);
  }, 120_000);
});

describe('rebuilding the tiny distillation system from its seed', () => {
  const close = (got: number[], want: readonly number[]) => {
    expect(got).toHaveLength(want.length);
    got.forEach((g, i) =>
      expect(Math.abs(g - want[i]!), `step ${i + 1}: ${g} vs ${want[i]}`).toBeLessThan(1e-4 * Math.max(1, Math.abs(want[i]!))),
    );
  };

  it('starts every agent, an inner link and the outer alignment on their recorded loss curves', async () => {
    const out = mkdtempSync(join(tmpdir(), 'tiny-distill-'));
    tmp.push(out);
    for (const spec of DISTILL_AGENTS) {
      const r = await trainDistillAgent(spec, { out, seed: build.seed, stopAfter: 3, log: () => {} });
      expect(build.losses.agents[spec.role]!.length, spec.role).toBe(spec.steps);
      close(r.losses, build.losses.agents[spec.role]!.slice(0, 3));
    }
    const data = join(out, 'train.jsonl');
    writeFileSync(data, priceJsonl(priceSplit('train')));
    const log = join(out, 'inner.jsonl');
    const inner = distillInnerArgs('expert', data, join(out, 'inner'), 3, build.seed, log);
    execFileSync(process.execPath, [join(ROOT, 'bin/rmas.js'), ...inner], {
      cwd: ROOT,
      env: { ...process.env, RMAS_TINY_SYSTEM: SYSTEM },
      stdio: 'pipe',
    });
    const losses = readFileSync(log, 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => (JSON.parse(l) as { loss: number }).loss);
    close(losses, build.losses.inner.expert!.slice(0, 3));
    const a = await alignOuter({ system: SYSTEM, out: join(out, 'align'), seed: build.seed, m: record.latentSteps, stopAfter: 3 });
    close(a.losses.outer_el, build.losses.align.outer_el.slice(0, 3));
    close(a.losses.outer_le, build.losses.align.outer_le.slice(0, 3));
  }, 300_000);

  it('restarts at the alignment from the committed system: --from align gives the recorded outer curve', () => {
    const work = mkdtempSync(join(tmpdir(), 'tiny-distill-from-'));
    tmp.push(work);
    const out = join(work, 'out');
    const args = ['--work', join(work, 'w'), '--from', 'align', '--outer_steps', '2', '--out', out];
    execFileSync(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/tiny-distillation/build.ts'), ...args], {
      cwd: ROOT,
      stdio: 'pipe',
    });
    const rec = JSON.parse(readFileSync(join(out, 'build.json'), 'utf8')) as DistillBuildRecord;
    // the alignment runs whole (its links are the outer stage's start); the outer stage's first 2 steps
    expect(rec.losses.align).toEqual(build.losses.align);
    close(rec.losses.outer, build.losses.outer.slice(0, 2));
    expect(rec.losses.agents).toEqual(build.losses.agents);
    expect(rec.losses.inner).toEqual(build.losses.inner);
    expect(DISTILL_BUILD.outer.steps).toBe(build.losses.outer.length);
  }, 300_000);
});
