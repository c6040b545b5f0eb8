/**
 * Asking the offline tiny system (tiny_distillation) through the real engine worker in headless Chromium: offlineSystem() →
 * loadSystem → ask, with download progress, a stage event pair for every stage, streamed tokens and an
 * answer with timing. CPU backend for the full run (SwiftShader is slow), then a short WebGPU run.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { proxy } from 'comlink';
import { startEngine } from '../src/ui/engine';
import type { EngineEvent } from '../workers/protocol';

const engine = startEngine();
afterAll(() => engine.stop());

const stagesOf = (ev: EngineEvent[]) => ev.filter((e): e is Extract<EngineEvent, { type: 'stage' }> => e.type === 'stage');

describe('ask in the engine worker (chromium)', () => {
  it('offline tiny system on cpu: loads with progress and answers with stage events for all stages', async () => {
    const spec = await engine.api.offlineSystem();
    expect(spec?.style).toBe('tiny_distillation');
    expect(spec!.roles.expert.model).toBe(new URL('/models/tiny/distillation/expert/', location.origin).href);
    const load: EngineEvent[] = [];
    const info = await engine.api.loadSystem(spec!, proxy((e: EngineEvent) => void load.push(e)), { backend: 'cpu' });
    expect(Object.fromEntries(Object.entries(info.roles).map(([r, v]) => [r, v.hidden]))).toEqual({ expert: 64, learner: 64 });
    // at least each role's weights, tokenizer and inner link
    expect(load.filter((e) => e.type === 'initiate').length).toBeGreaterThanOrEqual(6);
    expect(load.at(-1)).toMatchObject({ type: 'ready', backend: 'cpu' });

    const ev: EngineEvent[] = [];
    const r = await engine.api.ask(
      {
        system: spec!,
        question: 'Ann buys 3 glims. How many coins does she pay?',
        mode: 'latent',
        rounds: 2,
        latentSteps: 4,
        maxNewTokens: 12,
        sampling: { greedy: true },
        backend: 'cpu',
      },
      proxy((e: EngineEvent) => void ev.push(e)),
    );
    const st = stagesOf(ev);
    expect(st.map((e) => `${e.round}${e.role[0]}${e.state[0]}`).join(' ')).toBe('1er 1ed 1lr 1ld 2er 2ed 2lr 2ld');
    expect(
      st
        .filter((e) => e.state === 'done' && !e.decode)
        .every((e) => e.latents === 4 && e.messages?.length === 1 && e.messages[0].latents === 4),
    ).toBe(true);
    // the last message through the receiver's lens, on request: 4 latents, 5 tokens each, most likely first
    const last = st.flatMap((e) => e.messages ?? []).at(-1)!;
    const lens = await engine.api.lens({ ask: last.ask, stage: last.stage, link: last.link });
    expect(lens.top.map((row) => row.length)).toEqual([5, 5, 5, 5]);
    expect(lens.top.every((row) => row.every((t, i) => i === 0 || t.prob <= row[i - 1]!.prob))).toBe(true);
    expect(lens.vocab).toBeGreaterThan(400);
    expect(ev.at(-1)).toEqual({ type: 'done', result: r });
    expect(r.tokens).toBeGreaterThan(0);
    expect(r.seconds).toBeGreaterThan(0);
    expect(r.prefillTokensPerSec).toBeGreaterThan(0);
  });

  it('a short webgpu run answers too', async () => {
    const spec = (await engine.api.offlineSystem())!;
    const ev: EngineEvent[] = [];
    const r = await engine.api.ask(
      {
        system: spec,
        question: 'Ann buys 3 glims. How many coins does she pay?',
        mode: 'latent',
        rounds: 1,
        latentSteps: 2,
        maxNewTokens: 4,
        sampling: { greedy: true },
        answerRetry: false,
      },
      proxy((e: EngineEvent) => void ev.push(e)),
    );
    expect(ev.find((e) => e.type === 'ready')).toMatchObject({ backend: 'webgpu' });
    // expert and learner, each running then done
    expect(stagesOf(ev).length).toBe(4);
    expect(r.tokens).toBeGreaterThan(0);
    // the ask only kept its message for the lens; the lens itself runs after it, on request, on the device
    expect(r.messagesKept).toBe(1);
    expect(r.lensSeconds).toBeLessThan(0.1 * r.seconds);
    const m = stagesOf(ev).flatMap((e) => e.messages ?? [])[0]!;
    const lens = await engine.api.lens({ ask: m.ask, stage: m.stage, link: m.link });
    expect(lens.norms).toHaveLength(2);
    console.log(`[ask webgpu] ask ${r.seconds.toFixed(3)} s (lens inside it ${r.lensSeconds.toFixed(4)} s); lens on request ${
      lens.seconds.toFixed(3)} s`);
  });

  it('cancel by call id rejects with Cancelled', async () => {
    const spec = (await engine.api.offlineSystem())!;
    const p = engine.api.ask(
      {
        system: spec,
        question: 'Ann buys 3 glims. How many coins does she pay?',
        mode: 'latent',
        rounds: 3,
        latentSteps: 30,
        maxNewTokens: 8,
        sampling: { greedy: true },
        backend: 'cpu',
      },
      proxy(() => {}),
      { callId: 'stop-me' },
    );
    await engine.api.cancel('stop-me');
    await expect(p).rejects.toMatchObject({ name: 'Cancelled' });
  });
});
