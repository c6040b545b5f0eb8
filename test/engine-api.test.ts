/**
 * The engine API's system calls (workers/system-calls.ts) on the CPU backend in Node: the offline tiny system
 * (models/tiny-system.json: tiny_distillation, its files in models/tiny/distillation) read from the repository on
 * disk through the fetchFile hook, events in order, the same answer as `rmas ask --style tiny_distillation` on the
 * same files, the logit lens on request against logitLens on the same latents, what text mode's agents wrote,
 * cancellation, and a link that does not fit.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { priceSplit } from '../src/eval/tiny-prices';
import { ask } from '../src/mas/ask';
import { type LensReading, logitLens } from '../src/mas/lens';
import { loadSystemFromSpec } from '../src/mas/system-urls';
import { TINY_SYSTEM_ENV } from '../src/mas/system-folders';
import { CpuBackend } from '../src/tensor/cpu';
import { runAsk } from './mas/ask-util';
import { callRegistry } from '../workers/calls';
import { systemCalls } from '../workers/system-calls';
import type { AskResultView, EngineEvent, LatentMessage, LensView, SystemSpec } from '../workers/protocol';

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

  it('latent messages: each stage is done before any lens work; the lens on request equals logitLens on the same latents', async () => {
    const spec = await offline();
    await api.loadSystem(spec, () => {});
    // what logitLens read from the latents inside the stages, as the worker did before: a second system of the same files
    const sys = await loadSystemFromSpec(spec, cpu, { fetchFile });
    const before = new Map<string, LensReading>();
    try {
      await ask(sys, {
        question: QUESTION, rounds: FLAGS.rounds, latentSteps: FLAGS.latentSteps, sampling: { greedy: true },
        maxNewTokens: FLAGS.maxNewTokens, answerRetry: false,
        onStage: async (rec) => {
          for (const [link, L] of rec.latentsOut) {
            const recv = sys.agents.get(sys.style.links.find((x) => x.key === link)!.to)!;
            before.set(`${rec.index} ${link}`, await logitLens(L, recv.decoder.weights.lmHead, recv.tokenizer, 5));
          }
        },
      });
    } finally {
      sys.dispose();
    }

    // every kernel the backend runs, in order, with the ask's events and the lens calls between them
    const log: string[] = [];
    const run = cpu.run.bind(cpu);
    cpu.run = (def, inputs, attrs) => (log.push(def.name), run(def, inputs, attrs));
    const ev: EngineEvent[] = [];
    const req = { system: spec, question: QUESTION, mode: 'latent' as const, sampling: { greedy: true }, answerRetry: false, ...FLAGS };
    const readings: LensView[] = [];
    let r: AskResultView;
    let msgs: LatentMessage[];
    try {
      r = await api.ask(req, (e) => void (ev.push(e), log.push(`${e.type} ${e.type === 'stage' ? e.state : ''}`)));
      msgs = ev.flatMap((e) => (e.type === 'stage' && e.messages ? e.messages : []));
      for (const m of msgs) {
        log.push('lens call');
        readings.push(await api.lens({ ask: m.ask, stage: m.stage, link: m.link }));
      }
    } finally {
      cpu.run = run;
    }
    // the lens's top-k ran only in the lens calls, after the ask's last event; every stage was done before
    const firstTopk = log.indexOf('topk');
    expect(firstTopk).toBeGreaterThan(log.indexOf('lens call'));
    expect(log.indexOf('lens call')).toBeGreaterThan(log.lastIndexOf('stage done'));
    expect(log.filter((x) => x === 'topk')).toHaveLength(3); // one per message
    // tiny_distillation, 2 rounds: expert → learner each round, and the learner's feedback between them
    expect(msgs.map((m) => `${m.stage} ${m.link}→${m.to} ${m.latents}`)).toEqual([
      '0 outer_el→learner 3', '1 outer_le→expert 3', '2 outer_el→learner 3',
    ]);
    expect(new Set(msgs.map((m) => m.ask)).size).toBe(1);
    expect(r.messagesKept).toBe(3);
    expect(r.lensSeconds).toBeLessThan(0.1 * r.seconds);

    for (const [i, m] of msgs.entries()) {
      const { seconds, ...reading } = readings[i]!;
      expect(reading).toEqual(before.get(`${m.stage} ${m.link}`));
      expect(reading.top.map((row) => row.length)).toEqual([5, 5, 5]);
      expect(seconds).toBeGreaterThan(0);
    }
    const k2 = await api.lens({ ask: msgs[0]!.ask, stage: 0, link: 'outer_el', k: 2 });
    expect(k2.top).toEqual(before.get('0 outer_el')!.top.map((row) => row.slice(0, 2)));

    // a text ask keeps no messages and leaves these (it runs on the same system); the next latent ask frees them
    const text = await api.ask({ ...req, mode: 'text' }, () => {});
    expect(text.messagesKept ?? 0).toBe(0);
    expect((await api.lens({ ask: msgs[0]!.ask, stage: 0, link: 'outer_el' })).norms).toEqual(before.get('0 outer_el')!.norms);
    await api.ask({ ...req, rounds: 1 }, () => {});
    await expect(api.lens({ ask: msgs[0]!.ask, stage: 0, link: 'outer_el' })).rejects.toMatchObject({
      name: 'InvalidArgument', message: expect.stringMatching(/no longer kept.*ask again/),
    });
  });

  it('text mode: each stage but the final decode says what its agent wrote', async () => {
    const spec = await offline();
    const ev: EngineEvent[] = [];
    const r = await api.ask(
      { system: spec, question: QUESTION, mode: 'text', sampling: { greedy: true }, answerRetry: false, ...FLAGS },
      (e) => void ev.push(e),
    );
    const done = ev.filter((e): e is Extract<EngineEvent, { type: 'stage' }> => e.type === 'stage' && e.state === 'done');
    expect(done.map((e) => `${e.round} ${e.role} ${typeof e.text}`)).toEqual([
      '1 expert string', '1 learner string', '2 expert string', '2 learner undefined',
    ]);
    // what rmas ask's text mode runs: the same agents, each writing into the next one's prompt
    const sys = await loadSystemFromSpec(spec, cpu, { fetchFile });
    const wrote: (string | null)[] = [];
    try {
      await ask(sys, {
        question: QUESTION, mode: 'text', rounds: FLAGS.rounds, sampling: { greedy: true }, maxNewTokens: FLAGS.maxNewTokens,
        answerRetry: false, onStage: (rec) => void wrote.push(rec.text),
      });
    } finally {
      sys.dispose();
    }
    expect(done.slice(0, 3).map((e) => e.text)).toEqual(wrote.slice(0, 3));
    expect(wrote[3]).toBe(r.text);
    expect(done.every((e) => e.messages === undefined)).toBe(true);
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
