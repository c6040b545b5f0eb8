// Ask view over a fake engine: Ctrl+Enter asks, stage/token/done events fill the timeline, messages and answer.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import type { AskRequest, AskResultView, EngineEvent, SystemSpec } from '../../../workers/protocol';
import { reactiveProps } from '../components/props.svelte';
import type { EngineRemote, Services } from '../services';
import { DEFAULTS } from '../url';
import AskView from './AskView.svelte';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
});

const offline: SystemSpec = { style: 'sequential_light', roles: { planner: { model: '/p' }, critic: { model: '/c' }, solver: { model: '/s' } } };

const plan = (refusal: string | null) => ({
  plan: { fetchBytes: 3 * 2 ** 20, cachedBytes: 2 ** 20, totalBytes: 4 * 2 ** 20, models: [], gpuBytes: 1.5 * 2 ** 30, refusal, refusalName: refusal ? 'BindingLimitExceeded' as const : null },
  text: '', refusal, files: [],
});

function fakeServices(ask: (req: AskRequest, on: (e: EngineEvent) => void) => Promise<AskResultView>, refusal: string | null = null) {
  const api = {
    offlineSystem: vi.fn(async () => offline),
    planSystem: vi.fn(async (_s: SystemSpec, _o?: { backend?: 'webgpu' | 'cpu' }) => plan(refusal)),
    loadSystem: vi.fn(async (_s: SystemSpec, on: (e: EngineEvent) => void) => {
      on({ type: 'download', file: '/p/model.safetensors', loaded: 512, total: 1024 });
      on({ type: 'ready', backend: 'cpu', seconds: 0.2 });
      return { roles: {} };
    }),
    ask: vi.fn(ask),
    cancel: vi.fn(async () => {}),
  };
  const services: Services = {
    engine: { api: () => api as unknown as EngineRemote, restart: () => {}, stop: () => {} },
    checkpoints: async () => ({ listCheckpoints: async () => [] }) as never,
    models: async () => { throw new Error('unused'); },
  };
  return { api, services };
}

describe('AskView', () => {
  it('streams one latent run into the timeline, the latent messages and the answer', async () => {
    const { api, services } = fakeServices(async (req, on) => {
      on({ type: 'stage', index: 0, round: 1, role: 'planner', state: 'done', decode: false, latents: 2, seconds: 0.25,
        messages: [{ link: 'outer_12', to: 'critic', norms: [3.5, 4.25], top: [[{ token: ' the', prob: 0.5 }], [{ token: '7', prob: 0.0035 }]], vocab: 300 }] });
      on({ type: 'text', role: 'solver', text: 'So **25** is it: ' });
      on({ type: 'text', role: 'solver', text: 'So **25** is it: $\\boxed{25}$ <b>x</b>' });
      const result = { answer: '25', text: 'So **25** is it: $\\boxed{25}$ <b>x</b>', tokens: 12, latentSteps: 2, seconds: 1.5, rounds: req.rounds!, mode: req.mode,
        prefillTokensPerSec: 250, decodeTokensPerSec: 8.5, backend: 'webgpu' as const, stageSeconds: 1.0, lensSeconds: 0.25, retrySeconds: 0, pipelinesCompiled: 7 };
      on({ type: 'done', result });
      return result;
    });
    const target = document.body.appendChild(document.createElement('div'));
    const props = reactiveProps({ services, settings: { ...DEFAULTS, rounds: 1, greedy: true } });
    app = mount(AskView, { target, props });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', ctrlKey: true }));
    await vi.waitFor(() => expect(target.querySelector('[data-testid="ask-stats"]')!.textContent).toContain('total'));
    flushSync();

    const req = api.ask.mock.calls[0]![0];
    expect(req.sampling).toEqual({ greedy: true });
    expect(req.mode).toBe('latent');
    expect(req.system.label).toBe('offline tiny');
    expect(target.querySelector('[data-cell="1:planner"]')!.textContent).toBe('0.25 s · 2 latents');
    expect([...target.querySelectorAll('thead th')].map((t) => t.textContent)).toEqual(['round', 'planner', 'critic', 'solver']);
    expect(target.querySelectorAll('.latent').length).toBe(2);
    expect(target.querySelector('.latent .norm')!.textContent).toBe('‖3.5‖');
    expect(target.querySelector('.latent .tok')!.textContent).toBe('·the50%');
    // the second latent's top token (0.35%) is under 2/300: near uniform, marked and counted
    expect([...target.querySelectorAll('.latent')].map((l) => l.classList.contains('flat'))).toEqual([false, true]);
    expect(target.querySelector('[data-testid="latent-messages"] summary')!.textContent).toMatch(/2 latents, read by critic's LM head/);
    expect(target.querySelector('[data-testid="lens-note"]')!.textContent!.replace(/\s+/g, ' ').trim()).toBe(
      "The latents are in critic's embedding space; the lens reads each with critic's LM head over its 300 tokens. 1 of 2 read as near uniform " +
      '(top token under twice 1/300 = 0.3%): such a latent is close to no single token, so the lens cannot say what it carries, not that it carries nothing.');
    expect(target.querySelector('[data-testid="boxed"] mark')!.textContent).toBe('25');
    const md = target.querySelector('.md')!;
    expect(md.querySelector('strong')!.textContent).toBe('25');
    expect(md.querySelector('b')).toBeNull(); // the model's HTML stays text
    expect(md.textContent).toContain('<b>x</b>');
    expect(md.textContent!.match(/is it/g)).toHaveLength(1); // each text event replaces the last, never appends
    expect(target.querySelector('[data-testid="ask-stats"]')!.textContent!.replace(/\s+/g, ' ').trim())
      .toBe('12 tokens · prefill 250 tok/s · decode 8.50 tok/s · 2 latent steps · 1.50 s total on webgpu');
    expect(target.querySelector('[data-testid="ask-time"]')!.textContent).toMatch(
      /^of the 1\.50 s: stages 1\.00 s · latent-message lens 0\.25 s · answer retry 0\.00 s · other 0\.25 s; 7 GPU kernels compiled on first use, inside these; before it, loading the system \d+\.\d\d s \(downloads, weights to the GPU\)$/);
    expect(target.querySelector('[data-testid="answer-text"]')!.textContent).toBe('So **25** is it: $\\boxed{25}$ <b>x</b>');
    expect(target.querySelector('.dl .bytes')!.textContent).toBe('512 B / 1.00 KiB');
    expect(target.querySelector('[data-testid="ask-plan"]')!.textContent).toBe('will download 3.00 MiB (1.00 MiB cached) · needs about 1.50 GiB of GPU memory');
    expect(api.planSystem.mock.calls[0]![0]).toBe(api.loadSystem.mock.calls[0]![0]);

    // the same system again: loaded already, so not planned again
    window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', ctrlKey: true }));
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(2));
    expect(api.planSystem).toHaveBeenCalledTimes(1);
  });

  it('shows the refusal in the error box and does not load a system this adapter cannot hold', async () => {
    const why = 'model 1: one row of "model.embed_tokens.weight" (bf16, 8192 bytes) is larger than this adapter\'s 4096-byte storage-binding limit';
    const { api, services } = fakeServices(async () => { throw new Error('unused'); }, why);
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(AskView, { target, props: reactiveProps({ services, settings: { ...DEFAULTS } }) });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(target.querySelector('[role="alert"]')).not.toBeNull());
    const box = target.querySelector<HTMLElement>('[role="alert"]')!;
    expect(box.dataset.errorName).toBe('BindingLimitExceeded');
    expect(box.textContent).toContain(`this system cannot run here: ${why}`);
    expect(target.querySelector('[data-testid="ask-plan"]')!.textContent).toContain('needs about 1.50 GiB of GPU memory');
    expect(target.querySelector('[data-testid="ask-status"]')!.textContent).toBe('not loaded');
    expect(api.loadSystem).not.toHaveBeenCalled();
    expect(api.ask).not.toHaveBeenCalled();
    expect(target.querySelector<HTMLButtonElement>('button.primary')!.disabled).toBe(false);
  });

  it('runs latent then text in "both" mode and shows an error where it happened', async () => {
    const { api, services } = fakeServices(async (req) => {
      if (req.mode === 'text') throw Object.assign(new Error('the text baseline needs a decoder'), { name: 'InvalidArgument' });
      return { answer: '', text: '', tokens: 0, latentSteps: 0, seconds: 0, rounds: 1, mode: 'latent', prefillTokensPerSec: 0, decodeTokensPerSec: 0,
        backend: 'cpu', stageSeconds: 0, lensSeconds: 0, retrySeconds: 0, pipelinesCompiled: 0 };
    });
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(AskView, { target, props: reactiveProps({ services, settings: { ...DEFAULTS, mode: 'both' as const } }) });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(2));
    await vi.waitFor(() => expect(target.querySelector('[data-mode="text"] [role="alert"]')).not.toBeNull());
    expect(api.ask.mock.calls.map((c) => c[0].mode)).toEqual(['latent', 'text']);
    const box = target.querySelector<HTMLElement>('[data-mode="text"] [role="alert"]')!;
    expect(box.dataset.errorName).toBe('InvalidArgument');
    expect(box.textContent).toContain('the text baseline needs a decoder');
    expect(target.querySelector('[data-mode="latent"] [role="alert"]')).toBeNull();
  });
});
