/**
 * The engine API's system calls (workers/system-calls.ts) on the CPU backend in Node: the offline tiny system
 * (models/tiny-system.json: tiny_distillation, its files in models/tiny/distillation) read from the repository on
 * disk through the fetchFile hook, events in order, the same answer as `rmas ask --style tiny_distillation` on the
 * same files, the logit lens against the dumped latents, cancellation, and a link that does not fit.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceSplit } from '../src/eval/tiny-prices';
import { ask } from '../src/mas/ask';
import { loadSystemFromSpec } from '../src/mas/system-urls';
import { TINY_SYSTEM_ENV } from '../src/mas/system-folders';
import { CpuBackend } from '../src/tensor/cpu';
import { runAsk } from './mas/ask-util';
import { callRegistry } from '../workers/calls';
import { systemCalls } from '../workers/system-calls';
import type { EngineEvent, SystemSpec } from '../workers/protocol';

// an app origin served from the repository on disk through the fetchFile hook
const root = 'http://app.test/';
const repo = resolve(import.meta.dirname, '..');
const fetchFile = async (url: string): Promise<Uint8Array | null> => {
  if (!url.startsWith(root)) return null;
  try {
    return new Uint8Array(readFileSync(join(repo, decodeURIComponent(url.slice(root.length)))));
  } catch {
    return null;
  }
};
const cpu = new CpuBackend('f32');
const calls = callRegistry();
const api = systemCalls({ backend: async () => ({ backend: cpu }), appBase: root, fetchFile }, calls);
const STYLE = 'tiny_distillation';
const SYSTEM = join(repo, 'models/tiny/distillation');
// rmas ask reads the package's own system folder, the one the manifest names
const savedEnv = process.env[TINY_SYSTEM_ENV];
beforeAll(() => {
  delete process.env[TINY_SYSTEM_ENV];
});
afterAll(() => {
  api.dispose();
  if (savedEnv === undefined) delete process.env[TINY_SYSTEM_ENV];
  else process.env[TINY_SYSTEM_ENV] = savedEnv;
});

/** The offline task's first test question (src/eval/tiny-prices.ts). */
const QUESTION = priceSplit('test')[0]!.question;
const FLAGS = { rounds: 2, latentSteps: 3, maxNewTokens: 8 };

async function offline(): Promise<SystemSpec> {
  const spec = await api.offlineSystem();
  expect(spec).not.toBeNull();
  return spec!;
}

describe('engine api (cpu, offline tiny system)', () => {
  it('offlineSystem resolves the manifest against the app root', async () => {
    const spec = await offline();
    expect(spec.style).toBe(STYLE);
    expect(spec.roles.learner.model).toBe(`${root}models/tiny/distillation/learner/`);
    expect(spec.roles.learner.innerLink).toBe(`${root}models/tiny/distillation/learner/adapter.pt`);
    expect(spec.outer!.outer_le).toBe(`${root}models/tiny/distillation/outer/outer_le.pt`);
    expect((spec as { prompts?: unknown }).prompts).toBe(`${root}models/tiny/distillation/prompts.json`);
    const none = systemCalls({ backend: async () => ({ backend: cpu }), appBase: `${root}nowhere/`, fetchFile }, calls);
    expect(await none.offlineSystem()).toBeNull();
  });

  it('ask streams ordered events and answers as rmas ask does on the same links', async () => {
    const spec = await offline();
    const events: EngineEvent[] = [];
    const load = await api.loadSystem(spec, (e) => void events.push(e));
    expect(load.roles).toEqual({
      expert: { hidden: 64, family: 'qwen3', layers: expect.any(Number) },
      learner: { hidden: 64, family: 'llama', layers: expect.any(Number) },
    });
    expect(events.some((e) => e.type === 'initiate' && e.file.endsWith('/model.safetensors'))).toBe(true);
    const dl = events
      .filter(
        (e): e is Extract<EngineEvent, { type: 'download' }> =>
          e.type === 'download' && e.file.endsWith('distillation/learner/model.safetensors'),
      )
      .at(-1)!;
    expect(dl.loaded).toBe(dl.total);
    expect(dl.total).toBe(readFileSync(join(SYSTEM, 'learner/model.safetensors')).byteLength);
    expect(events.at(-1)).toMatchObject({ type: 'ready', backend: 'cpu' });

    const ev: EngineEvent[] = [];
    const r = await api.ask(
      { system: spec, question: QUESTION, mode: 'latent', sampling: { greedy: true }, answerRetry: false, ...FLAGS },
      (e) => void ev.push(e),
    );
    expect(ev[0]).toMatchObject({ type: 'ready', backend: 'cpu' });
    expect(ev.some((e) => e.type === 'initiate' || e.type === 'download')).toBe(false); // reused: no second load
    const stages = ev.filter((e): e is Extract<EngineEvent, { type: 'stage' }> => e.type === 'stage');
    const order = ['expert', 'learner', 'expert', 'learner'];
    expect(stages.map((e) => `${e.round} ${e.role} ${e.state}`)).toEqual(
      order.flatMap((role, i) => [`${i < 2 ? 1 : 2} ${role} running`, `${i < 2 ? 1 : 2} ${role} done`]),
    );
    expect(stages.filter((e) => e.state === 'done').map((e) => e.latents ?? 0)).toEqual([3, 3, 3, 0]);
    expect(stages.at(-1)!.decode).toBe(true);
    // text events: the whole answer so far, each one extending the last, the last one the answer itself
    const texts = ev.filter((e): e is Extract<EngineEvent, { type: 'text' }> => e.type === 'text');
    const lastStage = ev.indexOf(stages.at(-2)!);
    expect(texts.length).toBeGreaterThan(1);
    expect(texts.every((t) => t.role === 'learner' && ev.indexOf(t) > lastStage)).toBe(true);
    for (let i = 1; i < texts.length; i++)
      expect(texts[i]!.text.startsWith(texts[i - 1]!.text) && texts[i]!.text !== texts[i - 1]!.text).toBe(true);
    expect(texts.at(-1)!.text).toBe(r.text);
    expect(ev.at(-1)).toEqual({ type: 'done', result: r });
    expect(r.tokens).toBeGreaterThan(0);
    expect(r.decodeTokensPerSec >= 0 && r.prefillTokensPerSec > 0).toBe(true);

    // rmas ask with the manifest's style on the same system folder (the package's), with its prompts.json
    const cli = await runAsk({
      style: STYLE, question: QUESTION, greedy: true, no_ans: true, json: true,
      num_recursive_rounds: String(FLAGS.rounds), latent_length: String(FLAGS.latentSteps), max_new_tokens: String(FLAGS.maxNewTokens),
    }, cpu);
    expect(cli.error).toBeNull();
    const want = JSON.parse(cli.out) as { answer: string; text: string; tokens: number };
    expect({ answer: r.answer, text: r.text, tokens: r.tokens }).toEqual({ answer: want.answer, text: want.text, tokens: want.tokens });
  });

  it('latent messages: norms of the sent latents, top tokens sorted with probabilities summing to at most 1', async () => {
    const spec = await offline();
    const ev: EngineEvent[] = [];
    await api.ask(
      { system: spec, question: QUESTION, mode: 'latent', sampling: { greedy: true }, answerRetry: false, ...FLAGS, rounds: 1 },
      (e) => void ev.push(e),
    );
    const sys = await loadSystemFromSpec(spec, cpu, { fetchFile });
    const dumped = new Map<string, number[]>();
    try {
      await ask(sys, {
        question: QUESTION,
        rounds: 1,
        latentSteps: FLAGS.latentSteps,
        sampling: { greedy: true },
        maxNewTokens: FLAGS.maxNewTokens,
        answerRetry: false,
        onStage: async (rec) => {
          for (const [key, L] of rec.latentsOut) {
            const v = await L.read();
            const d = L.shape[1];
            dumped.set(
              key,
              Array.from({ length: L.shape[0] }, (_, i) => Math.hypot(...v.subarray(i * d, (i + 1) * d))),
            );
          }
        },
      });
    } finally {
      sys.dispose();
    }
    const msgs = ev.flatMap((e) => (e.type === 'stage' && e.messages ? e.messages : []));
    expect(msgs.map((m) => `${m.link}→${m.to}`)).toEqual(['outer_el→learner']);
    for (const m of msgs) {
      const want = dumped.get(m.link)!;
      expect(m.norms.length).toBe(3);
      m.norms.forEach((n, i) => expect(n).toBeCloseTo(want[i], 4));
      expect(m.top.length).toBe(3);
      for (const row of m.top) {
        expect(row.length).toBe(5);
        const p = row.map((t) => t.prob);
        expect(p.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1 + 1e-6);
        expect([...p].sort((a, b) => b - a)).toEqual(p);
        expect(p[0]).toBeGreaterThan(0);
        expect(row.every((t) => typeof t.token === 'string')).toBe(true);
      }
    }
  });

  it('cancel mid-ask rejects with Cancelled and the system still answers afterwards', async () => {
    const spec = await offline();
    const req = {
      system: spec,
      question: QUESTION,
      mode: 'latent' as const,
      sampling: { greedy: true },
      answerRetry: false,
      rounds: 3,
      latentSteps: 20,
      maxNewTokens: 8,
    };
    const ev: EngineEvent[] = [];
    const p = api.ask(req, (e) => {
      ev.push(e);
      if (e.type === 'stage' && e.state === 'done' && e.index === 0) void calls.cancel('c1');
    }, { callId: 'c1' });
    await expect(p).rejects.toMatchObject({ name: 'Cancelled' });
    expect(ev.at(-1)).toMatchObject({ type: 'error', name: 'Cancelled' });
    expect(ev.some((e) => e.type === 'done')).toBe(false);
    const r = await api.ask({ ...req, rounds: 1, latentSteps: 2 }, () => {}, { callId: 'c1' });
    expect(r.tokens).toBeGreaterThan(0);
  });

  it('a link of the wrong size is a ShapeMismatch naming it and both sizes', async () => {
    const spec = await offline();
    // both agents are 64 wide, so the misfits are the golden tiny links (test/golden/tiny-mas): outer_12 maps
    // 48 → 64; put it where expert (64) → learner (64) is expected
    const bad: SystemSpec = { ...spec, outer: { ...spec.outer, outer_el: `${root}test/golden/tiny-mas/outer_12.pt` } };
    await expect(loadSystemFromSpec(bad, cpu, { fetchFile })).rejects.toMatchObject({
      name: 'ShapeMismatch',
      message: expect.stringMatching(/outer link outer_el \(expert → learner\).*expert has hidden size 64, learner has 64/),
    });
    // solver-inner is 32 wide
    const badInner: SystemSpec = {
      ...spec,
      roles: { ...spec.roles, learner: { ...spec.roles.learner, innerLink: `${root}test/golden/tiny-mas/solver-inner.pt` } },
    };
    await expect(api.loadSystem(badInner, () => {})).rejects.toMatchObject({
      name: 'ShapeMismatch',
      message: expect.stringMatching(/learner inner link.*learner has hidden size 64/),
    });
  });
});
