/**
 * The engine API's system calls (workers/system-calls.ts) on the CPU backend in Node: the offline tiny system
 * (models/tiny-system.json) read from disk through the fetchFile hook, events in order, the same answer as
 * `rmas ask` on the same links, the logit
 * lens against the dumped latents, cancellation, and a link that does not fit.
 *
 * Until the trained system lands, models/tiny/system/* is served from a stand-in in the same layout (random
 * tiny models, golden links, the tiny prompt file: test/tiny-style-standin.ts); `rmas ask` reads the same
 * stand-in through RMAS_TINY_SYSTEM.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask } from '../src/mas/run';
import { loadSystemFromSpec } from '../src/mas/system-url';
import { TINY_SYSTEM_ENV } from '../src/mas/system';
import { CpuBackend } from '../src/tensor/cpu';
import { runAsk } from './mas/ask-util';
import { buildTinyStandIn, standInFetch } from './tiny-style-standin';
import { callRegistry } from '../workers/calls';
import { systemCalls } from '../workers/system-calls';
import type { EngineEvent, SystemSpec } from '../workers/protocol';

// an app origin served from the repository on disk through the fetchFile hook (the tiny system from the stand-in)
const root = 'http://app.test/';
const tmp = mkdtempSync(join(tmpdir(), 'engine-api-'));
const standIn = join(tmp, 'system');
const fetchFile = standInFetch(root, standIn);
const cpu = new CpuBackend('f32');
const calls = callRegistry();
const api = systemCalls({ backend: async () => ({ backend: cpu }), appBase: root, fetchFile }, calls);
const savedEnv = process.env[TINY_SYSTEM_ENV];
beforeAll(async () => {
  await buildTinyStandIn(standIn);
  process.env[TINY_SYSTEM_ENV] = standIn;
});
afterAll(() => {
  api.dispose();
  if (savedEnv === undefined) delete process.env[TINY_SYSTEM_ENV];
  else process.env[TINY_SYSTEM_ENV] = savedEnv;
  rmSync(tmp, { recursive: true, force: true });
});

const QUESTION = 'What is 2+3?';
const FLAGS = { rounds: 2, latentSteps: 3, maxNewTokens: 8 };

async function offline(): Promise<SystemSpec> {
  const spec = await api.offlineSystem();
  expect(spec).not.toBeNull();
  return spec!;
}

describe('engine api (cpu, offline tiny system)', () => {
  it('offlineSystem resolves the manifest against the app root', async () => {
    const spec = await offline();
    expect(spec.style).toBe('tiny_sequential');
    expect(spec.roles.critic.model).toBe(`${root}models/tiny/system/critic/`);
    expect(spec.roles.critic.innerLink).toBe(`${root}models/tiny/system/critic/adapter.pt`);
    expect(spec.outer!.outer_31).toBe(`${root}models/tiny/system/outer/outer_31.pt`);
    expect((spec as { prompts?: unknown }).prompts).toBe(`${root}models/tiny/system/prompts.json`);
    const none = systemCalls({ backend: async () => ({ backend: cpu }), appBase: `${root}nowhere/`, fetchFile }, calls);
    expect(await none.offlineSystem()).toBeNull();
  });

  it('ask streams ordered events and answers as rmas ask does on the same links', async () => {
    const spec = await offline();
    const events: EngineEvent[] = [];
    const load = await api.loadSystem(spec, (e) => void events.push(e));
    expect(load.roles).toEqual({
      planner: { hidden: 48, family: 'qwen3', layers: expect.any(Number) },
      critic: { hidden: 64, family: 'llama', layers: expect.any(Number) },
      solver: { hidden: 32, family: 'qwen2', layers: expect.any(Number) },
    });
    expect(events.some((e) => e.type === 'initiate' && e.file.endsWith('/model.safetensors'))).toBe(true);
    const dl = events
      .filter(
        (e): e is Extract<EngineEvent, { type: 'download' }> => e.type === 'download' && e.file.endsWith('system/solver/model.safetensors'),
      )
      .at(-1)!;
    expect(dl.loaded).toBe(dl.total);
    expect(dl.total).toBe(readFileSync(join(standIn, 'solver/model.safetensors')).byteLength);
    expect(events.at(-1)).toMatchObject({ type: 'ready', backend: 'cpu' });

    const ev: EngineEvent[] = [];
    const r = await api.ask(
      { system: spec, question: QUESTION, mode: 'latent', sampling: { greedy: true }, answerRetry: false, ...FLAGS },
      (e) => void ev.push(e),
    );
    expect(ev[0]).toMatchObject({ type: 'ready', backend: 'cpu' });
    expect(ev.some((e) => e.type === 'initiate' || e.type === 'download')).toBe(false); // reused: no second load
    const stages = ev.filter((e): e is Extract<EngineEvent, { type: 'stage' }> => e.type === 'stage');
    const order = ['planner', 'critic', 'solver', 'planner', 'critic', 'solver'];
    expect(stages.map((e) => `${e.round} ${e.role} ${e.state}`)).toEqual(
      order.flatMap((role, i) => [`${i < 3 ? 1 : 2} ${role} running`, `${i < 3 ? 1 : 2} ${role} done`]),
    );
    expect(stages.filter((e) => e.state === 'done').map((e) => e.latents ?? 0)).toEqual([3, 3, 3, 3, 3, 0]);
    expect(stages.at(-1)!.decode).toBe(true);
    // text events: the whole answer so far, each one extending the last, the last one the answer itself
    const texts = ev.filter((e): e is Extract<EngineEvent, { type: 'text' }> => e.type === 'text');
    const lastStage = ev.indexOf(stages.at(-2)!);
    expect(texts.length).toBeGreaterThan(1);
    expect(texts.every((t) => t.role === 'solver' && ev.indexOf(t) > lastStage)).toBe(true);
    for (let i = 1; i < texts.length; i++)
      expect(texts[i]!.text.startsWith(texts[i - 1]!.text) && texts[i]!.text !== texts[i - 1]!.text).toBe(true);
    expect(texts.at(-1)!.text).toBe(r.text);
    expect(ev.at(-1)).toEqual({ type: 'done', result: r });
    expect(r.tokens).toBeGreaterThan(0);
    expect(r.decodeTokensPerSec >= 0 && r.prefillTokensPerSec > 0).toBe(true);

    // rmas ask's default style on the same system folder (the stand-in), with its prompts.json
    const cli = await runAsk({
      question: QUESTION, greedy: true, no_ans: true, json: true,
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
    expect(msgs.map((m) => `${m.link}→${m.to}`)).toEqual(['outer_12→critic', 'outer_23→solver']);
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
    // outer_23 maps critic (64) → solver (32); put it where planner (48) → critic (64) is expected
    const bad: SystemSpec = { ...spec, outer: { ...spec.outer, outer_12: spec.outer!.outer_23 } };
    await expect(loadSystemFromSpec(bad, cpu, { fetchFile })).rejects.toMatchObject({
      name: 'ShapeMismatch',
      message: expect.stringMatching(/outer link outer_12 \(planner → critic\).*planner has hidden size 48, critic has 64/),
    });
    const badInner: SystemSpec = {
      ...spec,
      roles: { ...spec.roles, critic: { ...spec.roles.critic, innerLink: spec.roles.solver.innerLink } },
    };
    await expect(api.loadSystem(badInner, () => {})).rejects.toMatchObject({
      name: 'ShapeMismatch',
      message: expect.stringMatching(/critic inner link.*critic has hidden size 64/),
    });
  });
});
