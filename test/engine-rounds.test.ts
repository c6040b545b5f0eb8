/**
 * The Evaluate panel's accuracy-by-rounds plot (issue 40): AskSession.compare of ROUNDS_CONFIGS over the engine's
 * system calls (workers/system-calls.ts, the CPU backend in Node), turned into the plot's points by roundsPlot, against
 * the same test rows through the library's asking loop (scripts/tiny-system/eval.ts evalTiny, which `npm run tiny:eval`
 * and `build.ts eval` record eval.json with): each point's accuracy and generated tokens per question, each answer's
 * verdict; the recorded curve read from eval.json on the same questions; the ceiling of the hops task. For both offline
 * systems: tiny distillation (committed) and tiny recursion (once its folder models/tiny/recursion is built).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hopCeiling, hopSplit } from '../src/eval/tiny-hops';
import { priceSplit } from '../src/eval/tiny-prices';
import { TINY_RECURSION_ROOT } from '../src/mas/styles';
import { CpuBackend } from '../src/tensor/cpu';
import { appFiles } from '../src/testing/app-files';
import { AskSession, type AskPage } from '../src/ui/ask-session.svelte';
import { ROUNDS_CONFIGS, configKey, roundsPlot, type RecordedEval } from '../src/ui/compare';
import { TINY, TINY_RECURSION, offlineTask, offlineTestRows } from '../src/ui/offline';
import type { EngineRemote, Services } from '../src/ui/services';
import { tinyTestRows } from '../src/ui/train';
import { DEFAULTS, styleLatentSteps } from '../src/ui/url';
import { callRegistry } from '../workers/calls';
import { systemCalls } from '../workers/system-calls';
import { DISTILLATION_TARGET } from '../scripts/tiny-distillation/eval';
import { RECURSION_TARGET } from '../scripts/tiny-recursion/eval';
import { evalTiny, type TinyEvalTarget } from '../scripts/tiny-system/eval';

const ROOT = resolve(import.meta.dirname, '..');
const base = 'http://app.test/';
const { read, planFetch } = appFiles(ROOT, base);
const cpu = new CpuBackend('f32');
const api = systemCalls({ backend: async () => ({ backend: cpu }), appBase: base, fetchFile: async (u: string) => read(u), planFetch },
  callRegistry());
afterAll(() => api.dispose());

const N = 6;
const services: Services = {
  engine: { api: () => ({ ...api, cancel: async () => {} }) as unknown as EngineRemote, restart: () => {}, stop: () => {} },
  checkpoints: async () => ({ listCheckpoints: async () => [] }) as never,
  models: async () => { throw new Error('unused'); },
};

/** The plot of `style` on its first N test rows, live in the session, beside evalTiny's answers to the same rows. */
async function plotAgainstReference<R extends { question: string }>(
  style: string, target: TinyEvalTarget<R>, rows: R[], recordedFile: string,
) {
  const page: AskPage = { prefs: { backend: 'cpu' }, askChoice: { byRole: {} }, history: { entries: [] }, initHub: async () => {} };
  const session = new AskSession({ services, page });
  // the style's own latent steps, as Ask sets them when the style is chosen (tiny recursion's 3, not the default system's 4)
  const settings = { ...DEFAULTS, style, latentSteps: styleLatentSteps(style), greedy: true };
  await session.compare(settings, { source: { rows: tinyTestRows(undefined, style), dataset: null }, limit: N, batchSize: 1 },
    ROUNDS_CONFIGS);
  expect(session.error).toBeNull();
  expect(session.comparison.map((r) => [r.key, r.state, r.done])).toEqual(ROUNDS_CONFIGS.map((c) => [configKey(c), 'done', N]));
  const recorded = existsSync(recordedFile) ? (JSON.parse(readFileSync(recordedFile, 'utf8')) as RecordedEval) : null;
  const task = offlineTask(style);
  const asked = offlineTestRows(style).slice(0, N);
  const plot = roundsPlot(session.comparison, recorded, N, task.ceiling ? (r) => task.ceiling!(asked, r) : null);
  const ref = await evalTiny({ target, rows, backend: cpu, configs: ROUNDS_CONFIGS.map(configKey) as never });
  for (const row of session.comparison) {
    const r = ref.find((x) => x.config === row.key)!;
    // each answer and verdict as the library's loop gives them (the panel scores as rmas run; the eval by its task)
    expect([row.key, row.records.map((x) => x.text)]).toEqual([row.key, r.answers]);
    expect([row.key, row.records.map((x) => x.correct)]).toEqual([row.key, r.ok]);
    const live = plot.series.find((s) => s.source === 'live' && row.key.startsWith(s.kind))!;
    const p = live.points.find((q) => q.rounds === row.config.rounds)!;
    expect([row.key, p.accuracy, p.right, p.questions, p.tokens]).toEqual([row.key, r.accuracy, r.correct, N, r.tokens]);
    expect(p.seconds).toBeGreaterThan(0);
  }
  expect([plot.done, plot.total]).toEqual([6 * N, 6 * N]);
  return { plot, ref, recorded, session };
}

describe('the accuracy-by-rounds plot (cpu): its points are the library\'s answers to the same rows', () => {
  it('tiny distillation: RecursiveMAS and text-MAS at 1-3 rounds; its eval.json (no text2) on the same questions; no ceiling',
    async () => {
      const { plot, recorded } = await plotAgainstReference(TINY, DISTILLATION_TARGET, priceSplit('test').slice(0, N),
        join(ROOT, 'models/tiny/distillation/eval.json'));
      expect(plot.ceiling).toEqual([]);
      const rec = plot.series.filter((s) => s.source === 'recorded');
      expect(rec.map((s) => [s.kind, s.points.map((p) => p.rounds)])).toEqual([['latent', [1, 2, 3]], ['text', [1, 3]]]);
      for (const s of rec)
        for (const p of s.points) {
          const r = recorded!.results.find((x) => x.config === `${s.kind}${p.rounds}`)!;
          expect([p.right, p.questions, p.tokens, p.seconds]).toEqual([r.ok.slice(0, N).filter(Boolean).length, N, r.tokens, r.seconds]);
        }
    }, 300_000);

  it.skipIf(!existsSync(join(ROOT, TINY_RECURSION_ROOT, 'outer')))(
    'tiny recursion: the same, with the ceiling of each round count on the questions asked', async () => {
      const rows = hopSplit('test').slice(0, N);
      const { plot } = await plotAgainstReference(TINY_RECURSION, RECURSION_TARGET, rows, join(ROOT, TINY_RECURSION_ROOT, 'eval.json'));
      expect(plot.ceiling).toEqual([1, 2, 3].map((r) => ({ rounds: r, value: hopCeiling(rows, r) })));
      // these rows: one 1-hop (row 4), four 3-hop, one 5-hop question, so the ceiling is 1/6, 5/6, 6/6
      expect(plot.ceiling.map((c) => c.value * N)).toEqual([1, 5, 6]);
      console.log(`[rounds] ${plot.series.map((s) => `${s.label}: ${s.points.map((p) => `${p.right}/${p.questions}`).join(' ')}`).join('; ')}`);
    }, 300_000);
});
