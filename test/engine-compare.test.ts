/**
 * The Evaluate panel's comparison (AskSession.compare over the engine's system calls, workers/system-calls.ts, on the
 * CPU backend in Node with the committed offline tiny system) against `npm run tiny:eval` (scripts/tiny-system/eval.ts,
 * which made the README's table of the embedded tiny systems) on the same questions: each configuration's verdicts,
 * answers and generated tokens, question by question. The latent and text configurations run through
 * src/eval/evaluate.ts, the loop `rmas run` scores with.
 */
import { resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { priceSplit } from '../src/eval/tiny-prices';
import { CpuBackend } from '../src/tensor/cpu';
import { appFiles } from '../src/testing/app-files';
import { AskSession, type AskPage } from '../src/ui/ask-session.svelte';
import { README_CONFIGS, configKey, rowFigures } from '../src/ui/compare';
import type { EngineRemote, Services } from '../src/ui/services';
import { tinyTestRows } from '../src/ui/train';
import { DEFAULTS } from '../src/ui/url';
import { callRegistry } from '../workers/calls';
import { systemCalls } from '../workers/system-calls';
import { DISTILLATION_TARGET } from '../scripts/tiny-distillation/eval';
import { evalTiny } from '../scripts/tiny-system/eval';

const ROOT = resolve(import.meta.dirname, '..');
const base = 'http://app.test/';
const { read, planFetch } = appFiles(ROOT, base);
const cpu = new CpuBackend('f32');
const deps = { backend: async () => ({ backend: cpu }), appBase: base, fetchFile: async (u: string) => read(u), planFetch };
const api = systemCalls(deps, callRegistry());
afterAll(() => api.dispose());

const N = 6;

describe('the comparison of the Evaluate panel (cpu, offline tiny system)', () => {
  it("gives, configuration by configuration, what npm run tiny:eval gives on the same questions", async () => {
    const services: Services = {
      engine: { api: () => ({ ...api, cancel: async () => {} }) as unknown as EngineRemote, restart: () => {}, stop: () => {} },
      checkpoints: async () => ({ listCheckpoints: async () => [] }) as never,
      models: async () => { throw new Error('unused'); },
    };
    const page: AskPage = { prefs: { backend: 'cpu' }, askChoice: { byRole: {} }, history: { entries: [] }, initHub: async () => {} };
    const session = new AskSession({ services, page });
    const settings = { ...DEFAULTS, greedy: true };
    expect(settings.latentSteps).toBe(4);
    await session.compare(settings, { source: { rows: tinyTestRows(), dataset: null }, limit: N, batchSize: 1 }, README_CONFIGS);
    expect(session.error).toBeNull();
    expect(session.comparison.map((r) => [r.key, r.label, r.state, r.done, r.total, r.error])).toEqual(
      ['alone', 'text1', 'text3', 'latent1', 'latent2', 'latent3', 'shuffled1', 'zeroed1'].map((key, i) => [
        key,
        ['learner alone', 'text-MAS, 1 round', 'text-MAS, 3 rounds', 'RecursiveMAS, 1 round', 'RecursiveMAS, 2 rounds',
          'RecursiveMAS, 3 rounds', 'RecursiveMAS, 1 round, messages shuffled', 'RecursiveMAS, 1 round, messages zeroed'][i],
        'done', N, N, null,
      ]),
    );

    const ref = await evalTiny({ target: DISTILLATION_TARGET, rows: priceSplit('test').slice(0, N), backend: cpu });
    for (const row of session.comparison) {
      const r = ref.find((x) => x.config === configKey(row.config))!;
      expect([row.key, row.records.map((x) => x.text)]).toEqual([row.key, r.answers]);
      expect([row.key, row.records.map((x) => x.correct)]).toEqual([row.key, r.ok]);
      const f = rowFigures(row)!;
      expect([row.key, f.accuracy, f.tokens]).toEqual([row.key, r.accuracy, r.tokens]);
      expect(f.seconds).toBeGreaterThan(0);
    }
    // the README's story on these questions: alone, or with its messages shuffled or zeroed, the learner is wrong
    expect(session.comparison.map((r) => r.right)).toEqual([0, 6, 6, 6, 6, 6, 0, 0]);
    expect(session.comparison.map((r) => r.tokens)).toEqual([30, 66, 198, 30, 30, 30, 30, 30]);
  }, 240_000);
});
