// The Train view's controls over a fake engine: Start gives the train call an id, Pause and Resume name that call,
// and Stop cancels it; the cancelled run still resolves (stopped) and its final checkpoint is saved to the registry.
// After an engine fault it resumes the run by itself once per checkpoint, then on one click
// (test/engine-faults.browser.test.ts runs the real worker).
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mount, unmount } from 'svelte';
import type { SystemSpec, TrainEvent, TrainRequest, TrainResult } from '../../../workers/protocol';
import { EngineRestarted } from '../../errors';
import { reactiveProps } from '../components/props.svelte';
import { FAULTS } from '../engine';
import type { CheckpointMeta, EngineRemote, Services } from '../services';
import { prefs } from '../state.svelte';
import { TINY } from '../system';
import { TINY_SOURCE, activeRun } from '../train';
import TrainView from './TrainView.svelte';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
  activeRun.clear();
  // the device choice is stored for the origin, which the other browser test files share
  prefs.backend = 'auto';
  localStorage.removeItem('rmas.prefs');
});

const offline: SystemSpec = {
  style: 'tiny_distillation',
  roles: {
    expert: { model: '/m/expert', innerLink: new Uint8Array([9]) },
    learner: { model: '/m/learner', innerLink: new Uint8Array([8]) },
  },
  outer: { outer_el: new Uint8Array([7]), outer_le: new Uint8Array([6]) },
  prompts: new Uint8Array([5]),
};

/** An engine whose run emits start and one step, then waits for pause, resume or cancel by its call id. */
function fakeEngine(adapter: { isFallback: boolean; description: string } | null = null) {
  let on: (e: TrainEvent) => void = () => {};
  let finish: (r: TrainResult) => void = () => {};
  const api = {
    offlineSystem: vi.fn(async () => offline),
    adapterReport: vi.fn(async () => {
      if (!adapter) throw new Error('no WebGPU');
      return { vendor: '', device: '', architecture: '', ...adapter };
    }),
    train: vi.fn(
      (_req: TrainRequest, onEvent: (e: TrainEvent) => void, _opts?: { callId?: string }) =>
        new Promise<TrainResult>((resolve) => {
          on = onEvent;
          finish = resolve;
          on({ type: 'start', runId: 'run-a', backend: 'cpu', samples: 1000, dropped: {} });
          on({ type: 'step', step: 1, maxSteps: 40, loss: 1, lr: 1e-3, gradNorm: 1, tokensPerSec: 100, etaSec: 10 });
        }),
    ),
    pauseTraining: vi.fn(async (_callId: string) => on({ type: 'paused' })),
    resumeTraining: vi.fn(async (_callId: string) => on({ type: 'resumed' })),
    cancel: vi.fn(async (_callId: string) => {
      on({ type: 'saved', step: 1, final: true });
      on({ type: 'done', steps: 1, stopped: true });
      finish({ runId: 'run-a', steps: 1, stopped: true });
    }),
    checkpointFiles: vi.fn(async (_runId: string) => ({ 'adapter.safetensors': new Uint8Array([1]) })),
  };
  const saveFromFiles = vi.fn(async (_files: Record<string, Uint8Array>, meta: CheckpointMeta) => ({
    id: 'ck1',
    ...meta,
    created: 0,
    bytes: 1,
    files: [],
  }));
  const services: Services = {
    engine: { api: () => api as unknown as EngineRemote, restart: () => {}, stop: () => {} },
    checkpoints: async () => ({ saveFromFiles, remove: async () => {} }) as never,
    models: async () => { throw new Error('unused'); },
  };
  return { api, saveFromFiles, services };
}

/** Picks the view's loop as a user does. */
async function chooseLoop(target: HTMLElement, loop: 'inner' | 'outer') {
  const select = target.querySelector<HTMLSelectElement>('[data-testid="train-loop"]')!;
  select.value = loop;
  select.dispatchEvent(new Event('change'));
  await vi.waitFor(() => expect(select.value).toBe(loop));
}

describe('TrainView', () => {
  it('starts the offline system as an outer fine-tune from its own links, scored on held-out questions', async () => {
    const { api, services } = fakeEngine();
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
    const warning = () => target.querySelector('[data-testid="train-handoff-warning"]');
    await vi.waitFor(() => expect(target.querySelector('[data-testid="data-summary"]')!.textContent).toMatch(/1000 usable/));
    expect(warning()).toBeNull();
    expect(target.querySelector('[data-testid="train-held-out-note"]')!.textContent!.replace(/\s+/g, ' ')).toBe(
      'Scores the first 200 validation questions (3 rounds, 4 latent steps, greedy) before the first step, every 20 steps and after ' +
        'the last, and keeps the best step\'s links.',
    );
    target.querySelector<HTMLButtonElement>('[data-testid="train-start"]')!.click();
    await vi.waitFor(() => expect(api.train).toHaveBeenCalledTimes(1));
    const req = api.train.mock.calls[0]![0];
    expect([req.kind, req.style, req.initLinks, req.prompts]).toEqual([
      'outer', 'tiny_distillation', { outer_el: new Uint8Array([7]), outer_le: new Uint8Array([6]) }, new Uint8Array([5]),
    ]);
    expect(req.options).toEqual({
      lr: 1e-4, batchSize: 4, maxSteps: 40, warmupSteps: 4, saveSteps: 20, rounds: 3, maxLatentTokens: 4, scheduler: 'constant_with_warmup',
      seed: 42,
      latents: 'rollout', superviseFinalOnly: false, nonLastLossWeight: 1, untilEos: true,
    });
    expect([req.heldOut!.rows.length, req.heldOut!.every, req.heldOut!.latentSteps]).toEqual([200, 20, 4]);
    expect(req.heldOut!.rows[0]).toEqual({ question: expect.any(String), answer: expect.stringMatching(/^\d+$/) });
    // the held-out scores as they come, beside the loss
    const on = (api.train.mock.calls[0]![1]);
    on({ type: 'heldOut', step: 0, correct: 191, total: 200, best: true });
    on({ type: 'heldOut', step: 20, correct: 195, total: 200, best: true });
    await vi.waitFor(() => expect(target.querySelector('[data-testid="held-out-last"]')!.textContent).toBe('195/200'));
    expect(target.querySelector('[data-testid="held-out-curve"]')!.getAttribute('data-points')).toBe('2');
    expect(target.querySelector('[data-testid="held-out-summary"]')!.textContent!.trim())
      .toBe('before 191/200 · best 195/200 (97.5%) at step 20');
  });

  it('resumes a run interrupted by a reload in one click: its settings shown, its curve drawn, the built-in split again', async () => {
    const { api, services } = fakeEngine();
    activeRun.write({
      name: 'tiny outer 2026-12-05 05:00', style: TINY, loop: 'outer', maxSteps: 40, startedAt: 0, step: 20, checkpointId: 'ck0',
      runId: 'run-a', source: TINY_SOURCE, settings: { saveSteps: 7, maxSteps: 40, lr: 2e-4, heldOut: 12 },
      points: [1, 2, 3].map((n) => ({ step: n, loss: 1 / n, lr: 2e-4, gradNorm: 0.5 })),
    });
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
    const notice = () => target.querySelector('[data-testid="interrupted"]');
    await vi.waitFor(() => expect(notice()!.textContent!.replace(/\s+/g, ' ')).toMatch(/was interrupted at step 20 of 40/));
    expect(notice()!.textContent).not.toMatch(/data again/); // the built-in split: nothing to give again
    target.querySelector<HTMLButtonElement>('[data-testid="train-resume-run"]')!.click();
    await vi.waitFor(() => expect(api.train).toHaveBeenCalledTimes(1)); // one click: no Start to press
    expect(api.train.mock.calls[0]![0].resume).toEqual({ runId: 'run-a' });
    expect(target.querySelector<HTMLInputElement>('[data-testid="train-save-every"]')!.value).toBe('7');
    // as many held-out questions as the run started with, not the view's default
    expect(target.querySelector<HTMLInputElement>('[data-testid="train-held-out"]')!.value).toBe('12');
    expect(api.train.mock.calls[0]![0].heldOut!.rows.length).toBe(12);
    // the noted steps 1–3 and the resumed run's step 1 event (the fake engine's)
    const loss = () => target.querySelector('[data-testid=curves] figure[data-series=loss]')!.getAttribute('data-points');
    await vi.waitFor(() => expect(loss()).toBe('4'));
  });

  it('on a fallback adapter offers the CPU device, which the run then uses', async () => {
    const { api, services } = fakeEngine({ isFallback: true, description: 'SwiftShader Device (Subzero)' });
    prefs.backend = 'auto';
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
    const note = () => target.querySelector('[data-testid="fallback-note"]');
    await vi.waitFor(() => expect(note()).not.toBeNull());
    expect(note()!.textContent!.replace(/\s+/g, ' ').trim()).toBe(
      'WebGPU here is a fallback adapter (SwiftShader Device (Subzero)): a software implementation that runs the GPU\'s work on ' +
        'the CPU. The offline tiny system trains and scores its held-out questions faster on the CPU device. Use the CPU device',
    );
    target.querySelector<HTMLButtonElement>('[data-testid="fallback-use-cpu"]')!.click();
    await vi.waitFor(() => expect(note()).toBeNull());
    expect(prefs.backend).toBe('cpu');
    target.querySelector<HTMLButtonElement>('[data-testid="train-start"]')!.click();
    await vi.waitFor(() => expect(api.train).toHaveBeenCalledTimes(1));
    expect(api.train.mock.calls[0]![0].backend).toBe('cpu');
    expect(JSON.parse(localStorage.getItem('rmas.prefs')!)).toEqual({ backend: 'cpu' });
  });

  it('no fallback note on a real GPU, nor without WebGPU', async () => {
    for (const adapter of [{ isFallback: false, description: 'NVIDIA H100' }, null]) {
      const { api, services } = fakeEngine(adapter);
      prefs.backend = 'auto';
      const target = document.body.appendChild(document.createElement('div'));
      app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
      await vi.waitFor(() => expect(api.adapterReport).toHaveBeenCalled());
      await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
      expect(target.querySelector('[data-testid="fallback-note"]')).toBeNull();
      unmount(app);
      app = null;
    }
  });

  it('warns before an inner run that the outer links were fitted to the link it replaces', async () => {
    const { services } = fakeEngine();
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
    await chooseLoop(target, 'inner');
    await vi.waitFor(() => expect(target.querySelector('[data-testid="train-handoff-warning"]')?.textContent?.replace(/\s+/g, ' ').trim())
      .toBe('The outer links were trained on the expert inner link this run replaces: every latent hand-off changes, and the system ' +
        'may answer worse however the loss falls. Train the outer loop after it, from the system\'s own outer links.'));
    await chooseLoop(target, 'outer');
    await vi.waitFor(() => expect(target.querySelector('[data-testid="train-handoff-warning"]')).toBeNull());
  });

  it('pauses, resumes and stops the run by its call id; a stopped run keeps its final checkpoint', async () => {
    const { api, saveFromFiles, services } = fakeEngine();
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
    await chooseLoop(target, 'inner');
    // held-out questions are off for an inner run unless asked for; asked for here
    const heldOut = target.querySelector<HTMLInputElement>('[data-testid="train-held-out"]')!;
    expect(heldOut.value).toBe('0');
    heldOut.value = '20';
    heldOut.dispatchEvent(new Event('input'));
    const button = (text: string) => [...target.querySelectorAll('button')].find((b) => b.textContent === text)!;
    const status = () => target.querySelector('[data-testid="train-status"]')!.textContent!.trim();
    // the offline system's own training split, usable for its first role
    await vi.waitFor(() =>
      expect(target.querySelector('[data-testid="data-summary"]')!.textContent).toMatch(
        /^\s*tiny task, training split \(offline\): 1000 rows, 1000 usable for expert\s*$/,
      ),
    );

    target.querySelector<HTMLButtonElement>('[data-testid="train-start"]')!.click();
    await vi.waitFor(() => expect(status()).toBe('running · step 1 / 40'));
    const callId = api.train.mock.calls[0]![2]!.callId!;
    expect(callId).toEqual(expect.any(String));
    // a fine-tune of the shipped expert link, under the runner's name of the offline style
    const req = api.train.mock.calls[0]![0];
    expect([req.kind, req.style, req.role, req.model, req.initLinks]).toEqual([
      'inner', 'tiny_distillation', 'expert', '/m/expert', { adapter: new Uint8Array([9]) },
    ]);
    expect(req.rows[0]).toEqual(expect.objectContaining({ distill_expert: expect.any(String), distill_learner: expect.any(String) }));
    // its held-out questions go through the whole system at one round, this run's link in place of the expert's
    expect([req.heldOut!.rows.length, req.heldOut!.rounds, Object.keys(req.heldOut!.outerLinks!), Object.keys(req.agents!)]).toEqual([
      20, 1, ['outer_el', 'outer_le'], ['expert', 'learner'],
    ]);

    button('Pause').click();
    await vi.waitFor(() => expect(status()).toMatch(/^paused/));
    button('Resume').click();
    await vi.waitFor(() => expect(status()).toMatch(/^running/));
    button('Stop').click();
    await vi.waitFor(() => expect(status()).toMatch(/^saved “tiny expert .*” at step 1$/));
    expect(api.pauseTraining).toHaveBeenCalledWith(callId);
    expect(api.resumeTraining).toHaveBeenCalledWith(callId);
    expect(api.cancel).toHaveBeenCalledWith(callId);
    expect(api.checkpointFiles).toHaveBeenCalledWith('run-a');
    expect(saveFromFiles).toHaveBeenCalledTimes(1);
    expect(saveFromFiles.mock.calls[0]![1]).toMatchObject({ kind: 'inner', style: TINY, role: 'expert', step: 1 });
  });
});

describe('TrainView after an engine fault (fake engine)', () => {
  it('resumes on its own once; the same fault again before a newer checkpoint waits for one click', async () => {
    const { api, saveFromFiles, services } = fakeEngine();
    const lost = () => Object.assign(new EngineRestarted(`${FAULTS.deviceLost} (unknown: reset); a new engine worker was started`), {
      fault: FAULTS.deviceLost,
    });
    const step = (n: number): TrainEvent => ({
      type: 'step', step: n, maxSteps: 6, loss: 1 / n, lr: 1e-3, gradNorm: 1, tokensPerSec: 1, etaSec: 1,
    });
    const emitted = async (on: (e: TrainEvent) => void, events: TrainEvent[]) => {
      for (const e of events) on(e);
      await new Promise((r) => setTimeout(r, 20)); // the view's save of a checkpoint goes first
    };
    // the run: lost after step 4 (checkpoint at 3); resumed from 3, lost again after step 4; resumed by the click
    api.train
      .mockImplementationOnce(async (_req, on) => {
        await emitted(on, [{ type: 'start', runId: 'run-a', backend: 'webgpu', samples: 1000, dropped: {} }, step(1), step(2), step(3),
          { type: 'saved', step: 3, final: false }, step(4)]);
        throw lost();
      })
      .mockImplementationOnce(async (_req, on) => {
        await emitted(on, [{ type: 'start', runId: 'run-a', backend: 'webgpu', samples: 1000, dropped: {}, resumedFrom: 3 }, step(4)]);
        throw lost();
      })
      .mockImplementationOnce(async (_req, on) => {
        await emitted(on, [{ type: 'start', runId: 'run-a', backend: 'webgpu', samples: 1000, dropped: {}, resumedFrom: 3 }, step(4),
          step(5), step(6), { type: 'saved', step: 6, final: true }, { type: 'done', steps: 6, stopped: false }]);
        return { runId: 'run-a', steps: 6, stopped: false };
      });
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
    const notice = () => target.querySelector('[data-testid="train-recovery-text"]')?.textContent ?? '';
    await vi.waitFor(() => expect(target.querySelector('[data-testid="data-summary"]')!.textContent).toMatch(/1000 usable/));

    target.querySelector<HTMLButtonElement>('[data-testid="train-start"]')!.click();
    await vi.waitFor(() => expect(target.querySelector('[data-testid="train-recovery-resume"]')).not.toBeNull());
    expect(notice()).toBe(
      'The GPU device was lost again after step 4, before a checkpoint newer than step 3: not resumed on its own, since the fault ' +
        'may come back at the same point.',
    );
    expect(api.train).toHaveBeenCalledTimes(2);
    expect(api.train.mock.calls[1]![0].resume).toEqual({ runId: 'run-a' });
    // the registry holds the step-3 checkpoint the view saved before the fault
    const status = () => target.querySelector('[data-testid="train-status"]')!.textContent!.trim();
    expect(status()).toMatch(/^saved “.*” at step 3 \(intermediate\)$/);

    target.querySelector<HTMLButtonElement>('[data-testid="train-recovery-resume"]')!.click();
    await vi.waitFor(() => expect(status()).toMatch(/at step 6$/));
    expect(notice()).toBe('Resumed from its checkpoint at step 3.');
    expect(api.train.mock.calls[2]![0]).toEqual({ ...api.train.mock.calls[0]![0], resume: { runId: 'run-a' } });
    // the curve: steps 1–3 of the first call, then 4–6 of the last
    expect(target.querySelector('[data-testid=curves] figure[data-series=loss]')!.getAttribute('data-points')).toBe('6');
    expect(saveFromFiles.mock.calls.map((c) => c[1].step)).toEqual([3, 6]);
  });
});
