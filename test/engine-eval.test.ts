/**
 * The playground's benchmark call (EngineApi.evaluate, workers/system-calls.ts) on the CPU backend in Node with the committed
 * offline tiny system: the tiny task's test rows scored as `rmas run` scores them (the same records as
 * src/eval/evaluate.ts on a system loaded by rmas), a sample event per question in order, a first-n limit, code
 * benchmarks refused, and cancellation between questions.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { priceSplit } from '../src/eval/tiny-prices';
import { toItems } from '../src/eval/datasets';
import { evaluate } from '../src/eval/evaluate';
import { loadSystem } from '../src/mas/system-folders';
import { CpuBackend } from '../src/tensor/cpu';
import { callRegistry } from '../workers/calls';
import { systemCalls } from '../workers/system-calls';
import type { EngineEvent } from '../workers/protocol';

const ROOT = resolve(import.meta.dirname, '..');
const base = 'http://app.test/';
const fetchFile = async (url: string) => {
  if (!url.startsWith(base)) return null;
  try {
    return new Uint8Array(readFileSync(join(ROOT, decodeURIComponent(url.slice(base.length)))));
  } catch {
    return null;
  }
};
const cpu = new CpuBackend('f32');
const calls = callRegistry();
const api = systemCalls({ backend: async () => ({ backend: cpu }), appBase: base, fetchFile }, calls);
afterAll(() => api.dispose());

const rows = priceSplit('test').slice(0, 4).map((r) => ({ question: r.question, answer: String(r.answer_value) }));
const FLAGS = { mode: 'latent' as const, rounds: 2, latentSteps: 4, maxNewTokens: 40, sampling: { greedy: true } };

describe('EngineApi.evaluate (cpu, offline tiny system)', () => {
  it('scores the rows as rmas run does, with one sample event per question in order', async () => {
    const system = (await api.offlineSystem())!;
    const events: EngineEvent[] = [];
    const summary = await api.evaluate({ system, source: { rows, dataset: null }, limit: 3, ...FLAGS }, (e) => void events.push(e));
    const samples = events.filter((e) => e.type === 'sample');
    expect(samples.map((e) => [e.index, e.total])).toEqual([[0, 3], [1, 3], [2, 3]]);

    const ref = await loadSystem('tiny_distillation', { backend: cpu, task: 'math' });
    try {
      const direct = await evaluate(ref, (await toItems(null, rows)).slice(0, 3), { ...FLAGS, rounds: 2 });
      expect(samples.map((e) => [e.record.text, e.record.pred, e.record.gold, e.record.correct])).toEqual(
        direct.records.map((r) => [r.raw_output, r.pred_answer_parsed, r.gold, r.correct]));
      expect(summary).toEqual({ ...direct.summary, seconds_mean: summary.seconds_mean });
      // the tiny system answers these in its own words with a boxed number
      expect(samples.every((e) => /\\boxed\{\d+\}/.test(e.record.text))).toBe(true);
      expect(summary.accuracy).toBe(samples.filter((e) => e.record.correct).length / 3);
    } finally {
      ref.dispose();
    }
  }, 120_000);

  it('refuses code benchmarks and unknown names, and stops between questions when cancelled', async () => {
    const system = (await api.offlineSystem())!;
    const code = [{ prompt: 'Write f.', test_list: ['assert f() == 1'], test: 'assert f() == 1' }];
    await expect(api.evaluate({ system, source: { rows: code, dataset: 'mbppplus' }, ...FLAGS }, () => {})).rejects.toThrow(
      /code benchmarks .* run them with rmas run/,
    );
    await expect(api.evaluate({ system, source: { rows, dataset: 'mmlu' }, ...FLAGS }, () => {})).rejects.toThrow(
      /unknown benchmark "mmlu"/,
    );
    const seen: number[] = [];
    const run = api.evaluate({ system, source: { rows, dataset: null }, ...FLAGS }, (e) => {
      if (e.type === 'sample') {
        seen.push(e.index);
        if (e.index === 0) void calls.cancel('stop-me');
      }
    }, { callId: 'stop-me' });
    await expect(run).rejects.toMatchObject({ name: 'Cancelled' });
    expect(seen).toEqual([0]);
  }, 120_000);
});
