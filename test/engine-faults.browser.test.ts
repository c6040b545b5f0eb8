/**
 * The page under faults, in headless Chromium with the real engine worker (src/ui/engine.ts replaces a worker that
 * crashed or lost its GPU device). The faults come from the worker's test hook (EngineApi.testFault) at a chosen
 * event: the hook runs inside the page's event callback, which the worker awaits for training events, so a run is
 * held at that step until the page has replaced its worker.
 * - The GPU device lost after step 4 of a WebGPU run (SwiftShader) checkpointing every 3 steps: the Train view says
 *   so, resumes from step 3 on the new engine by itself, and ends with the links, AdamW moments and trainer state of
 *   the same run done without a fault, byte for byte.
 * - The worker crashing after step 2, before the first checkpoint: the Train view says there is nothing to resume
 *   from, and its "start again" runs to the end.
 * - The worker crashing mid-ask: the run shows what happened in place, and asking again on the new engine writes the
 *   answer the runner recorded (models/tiny/distillation/eval.json, as test/e2e/playground.test.ts compares).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import { proxy } from 'comlink';
import App from '../src/ui/App.svelte';
import { DEFAULT_ROW } from '../src/ui/offline';
import { realServices, type EngineRemote, type Services } from '../src/ui/services';
import { askHistory, engineHealth, noteRestart, prefs } from '../src/ui/state.svelte';
import { activeRun } from '../src/ui/train';
import type { EngineEvent, TestFault, TrainEvent } from '../workers/protocol';

const start = location.href;
let app: ReturnType<typeof mount> | null = null;
let stopEngine: (() => void) | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  stopEngine?.();
  stopEngine = null;
  document.body.replaceChildren();
  history.replaceState(null, '', start);
  engineHealth.lost = null;
  engineHealth.restarts = 0;
  askHistory.entries = [];
  prefs.backend = 'auto';
  activeRun.clear();
});

type Armed = { kind: TestFault; at: (e: TrainEvent | EngineEvent) => boolean };

/**
 * The page's real services, whose train and ask calls pass their events through a fault armed with `arm`: when the
 * event `at` arrives, the view sees it, then the worker gets testFault(kind), and the callback returns only once the
 * page has replaced the worker (the worker awaits each training event, and an ask's reply waits for all of its
 * events, so neither gets further).
 */
function faultyServices(): { services: Services; arm(a: Armed): void; trainCalls: TrainEvent[][] } {
  const real = realServices(noteRestart);
  stopEngine = () => real.engine.stop();
  let armed: Armed | null = null;
  /** The events of each train call, in order. */
  const trainCalls: TrainEvent[][] = [];
  const withFault = (api: EngineRemote): EngineRemote =>
    new Proxy(api, {
      get(target, name) {
        const fn = (target as unknown as Record<string | symbol, (...a: unknown[]) => Promise<unknown>>)[name]!;
        if (name !== 'train' && name !== 'ask') return fn;
        return (req: unknown, onEvent: (e: TrainEvent | EngineEvent) => unknown, opts: unknown) => {
          const seen: (TrainEvent | EngineEvent)[] = [];
          if (name === 'train') trainCalls.push(seen as TrainEvent[]);
          return fn(req, proxy(async (e: TrainEvent | EngineEvent) => {
            seen.push(e);
            const r = onEvent(e);
            const a = armed;
            if (a?.at(e)) {
              armed = null;
              const restarts = engineHealth.restarts;
              void api.testFault(a.kind).catch(() => {}); // the page may replace the worker before it answers
              await vi.waitFor(() => expect(engineHealth.restarts).toBe(restarts + 1), { timeout: 20_000 });
            }
            return r;
          }), opts);
        };
      },
    });
  const services: Services = { ...real, engine: { ...real.engine, api: () => withFault(real.engine.api()) } };
  return { services, arm: (a) => (armed = a), trainCalls };
}

function mountApp(services: Services, query: string): HTMLElement {
  history.replaceState(null, '', `${location.pathname}${query}`);
  const target = document.body.appendChild(document.createElement('div'));
  app = mount(App, { target, props: { services } });
  flushSync();
  return target;
}

const byId = (root: ParentNode, id: string) => root.querySelector<HTMLElement>(`[data-testid="${id}"]`);
const text = (root: ParentNode, id: string) => (byId(root, id)?.textContent ?? '').replace(/\s+/g, ' ').trim();
function fill(root: ParentNode, id: string, value: string | number) {
  const el = byId(root, id) as HTMLInputElement;
  el.value = String(value);
  el.dispatchEvent(new Event('input', { bubbles: true }));
  flushSync();
}
const click = (root: ParentNode, id: string) => {
  byId(root, id)!.click();
  flushSync();
};

/** The Train view of the offline system's inner loop, its expert's link, `maxSteps` of 2 samples, a checkpoint every 3 steps. */
async function trainSetup(target: HTMLElement, maxSteps: number) {
  // the inner loop (the view opens on the offline system's outer fine-tune)
  await vi.waitFor(() => expect(byId(target, 'train-loop')).not.toBeNull(), { timeout: 30_000 });
  const loop = byId(target, 'train-loop') as HTMLSelectElement;
  loop.value = 'inner';
  loop.dispatchEvent(new Event('change', { bubbles: true }));
  flushSync();
  const summary = 'tiny task, training split (offline): 1000 rows, 1000 usable for expert';
  await vi.waitFor(() => expect(text(target, 'data-summary')).toBe(summary), { timeout: 30_000 });
  fill(target, 'train-max-steps', maxSteps);
  fill(target, 'train-batch', 2);
  fill(target, 'train-warmup', 1);
  fill(target, 'train-save-every', 3);
}

/** Start, then the status of a run saved at its last step; the registry's new checkpoint's files. */
async function trainToEnd(target: HTMLElement, services: Services, steps: number, click: () => void) {
  const reg = await services.checkpoints();
  const before = new Set((await reg.listCheckpoints()).map((c) => c.id));
  const t0 = performance.now();
  click();
  await vi.waitFor(() => expect(text(target, 'train-status')).toMatch(new RegExp(`^saved “.*” at step ${steps}$`)), {
    timeout: 300_000,
    interval: 250,
  });
  const seconds = (performance.now() - t0) / 1000;
  const made = (await reg.listCheckpoints()).filter((c) => !before.has(c.id));
  expect(made.map((c) => c.step)).toEqual([steps]); // the intermediate ones were replaced
  const files = await reg.files(made[0]!.id);
  await reg.remove(made[0]!.id);
  return { files, seconds };
}

/** The steps of a train call's events, each with its loss. */
const losses = (events: TrainEvent[]) => events.flatMap((e) => (e.type === 'step' ? [[e.step, e.loss] as const] : []));
const state = (files: Record<string, Uint8Array>) => JSON.parse(new TextDecoder().decode(files['trainer_state.json'])).state;
const lossPoints = (target: HTMLElement) =>
  Number(target.querySelector('[data-testid=curves] figure[data-series=loss]')?.getAttribute('data-points'));

describe('the page under faults (chromium, the real engine worker)', () => {
  it('a GPU device lost after step 4: the Train view resumes from step 3 on a new engine; links as without the fault', async () => {
    const { services, arm, trainCalls } = faultyServices();
    const target = mountApp(services, '?tab=train');
    await trainSetup(target, 6);

    const whole = await trainToEnd(target, services, 6, () => click(target, 'train-start'));
    expect(text(target, 'train-recovery')).toBe('');
    expect(target.querySelector('.figures')!.textContent).toMatch(/^1000 samples on webgpu/);
    console.info(`6 webgpu steps without a fault: ${whole.seconds.toFixed(1)} s`);

    arm({ kind: 'lose-device', at: (e) => e.type === 'step' && e.step === 4 });
    const lost = await trainToEnd(target, services, 6, () => click(target, 'train-start'));
    console.info(`6 webgpu steps, the device lost after step 4: ${lost.seconds.toFixed(1)} s`);
    expect(text(target, 'train-recovery-text')).toBe(
      'The GPU device was lost after step 4; the run resumed from its checkpoint at step 3 on a new engine.',
    );
    const reason = target.querySelector('[data-testid="train-recovery"] .detail')!.textContent!;
    expect(reason).toMatch(/^the GPU device was lost \(destroyed: [^)]*\); a new engine worker was started$/);
    expect(byId(target, 'train-recovery-resume')).toBeNull();
    expect(target.querySelector('.figures')!.textContent).toMatch(/^1000 samples on webgpu/);
    expect(lossPoints(target)).toBe(6); // steps 1–3, then 4–6 of the resumed run
    expect(engineHealth.restarts).toBe(1);
    const kept = 'Models and checkpoints stored in this browser are intact.';
    expect(text(target, 'engine-banner')).toBe(`EngineRestarted ${reason} ${kept} dismiss`);

    // the worker ran steps 1–4, then the resumed run 4–6 from the step-3 checkpoint, with the losses of the run
    // without the fault (bitwise: same data order, schedule and AdamW moments), and ended with its links
    const [w, before, after] = trainCalls.map(losses);
    expect(trainCalls.length).toBe(3);
    expect(trainCalls[2]![0]).toMatchObject({ type: 'start', backend: 'webgpu', resumedFrom: 3 });
    expect(before).toEqual(w!.slice(0, 4));
    expect(after).toEqual(w!.slice(3));
    for (const f of ['adapter.safetensors', 'optimizer.safetensors']) expect(lost.files[f], f).toEqual(whole.files[f]);
    expect(state(lost.files)).toEqual(state(whole.files));
    expect(state(lost.files).step).toBe(6);
  }, 600_000);

  it('the worker crashing after step 2, before the first checkpoint: nothing to resume, and "start again" runs to the end', async () => {
    prefs.backend = 'cpu';
    const { services, arm } = faultyServices();
    const target = mountApp(services, '?tab=train');
    await trainSetup(target, 4);
    arm({ kind: 'crash', at: (e) => e.type === 'step' && e.step === 2 });
    click(target, 'train-start');
    await vi.waitFor(() => expect(byId(target, 'train-start-again')).not.toBeNull(), { timeout: 120_000, interval: 250 });
    expect(text(target, 'train-recovery-text')).toBe(
      "The engine worker crashed after step 2, before the run's first checkpoint (one every 3 steps), so there is nothing to resume from.",
    );
    expect(text(target, 'train-recovery')).toMatch(
      /the engine worker crashed \(.*test fault: a simulated crash\); a new one was started$/,
    );
    expect(byId(target, 'train-recovery-resume')).toBeNull();
    expect(byId(target, 'train-status')!.textContent!.trim()).toBe('');
    expect(target.querySelector('#panel-train .error-box')).toBeNull();

    const again = await trainToEnd(target, services, 4, () => click(target, 'train-start-again'));
    expect(state(again.files).step).toBe(4);
    expect(byId(target, 'train-recovery')).toBeNull();
    expect(target.querySelector('.figures')!.textContent).toMatch(/^1000 samples on cpu/);
    expect(lossPoints(target)).toBe(4);
  }, 300_000);

  it('the worker crashing mid-ask: the answer says what happened in place; asking again gives the recorded answer', async () => {
    prefs.backend = 'cpu';
    const { services, arm } = faultyServices();
    const target = mountApp(services, '?rounds=1&greedy=1');
    const recorded = (await (await fetch('/models/tiny/distillation/eval.json')).json()) as {
      results: { config: string; answers: string[] }[];
    };
    const want = recorded.results.find((r) => r.config === 'latent1')!.answers[DEFAULT_ROW]!;
    const askButton = () => target.querySelector<HTMLButtonElement>('[data-testid="ask-button"]')!;
    await vi.waitFor(() => expect(askButton().disabled).toBe(false));

    // the first stage has started: the system is loaded and the answer is under way; the worker cannot answer before the
    // page has seen its crash (an ask's reply waits for the page to take its events)
    arm({ kind: 'crash', at: (e) => e.type === 'stage' && e.state === 'running' });
    askButton().click();
    const box = () => target.querySelector('#panel-ask .run .error-box');
    await vi.waitFor(() => expect(box()).not.toBeNull(), { timeout: 120_000, interval: 100 });
    expect(box()!.getAttribute('data-error-name')).toBe('EngineRestarted');
    expect(box()!.querySelector('.msg')!.textContent).toMatch(
      new RegExp(
        '^The engine worker crashed \\(.*test fault: a simulated crash\\); a new one was started\\. ' +
          'This answer was lost; ask again: the new engine loads the system first\\.$',
      ),
    );
    await vi.waitFor(() => expect(text(target, 'ask-status')).toBe('failed'));
    expect(text(target, 'ask-stats')).toBe(''); // no answer came
    expect(text(target, 'history-error')).toMatch(/^EngineRestarted: The engine worker crashed/);
    expect(text(target, 'engine-banner')).toMatch(/^EngineRestarted the engine worker crashed/);

    // the page is usable: asking again loads the system on the new worker and answers as the runner did
    askButton().click();
    await vi.waitFor(() => expect(text(target, 'ask-status')).toBe('done'), { timeout: 120_000, interval: 100 });
    expect(box()).toBeNull();
    expect(byId(target, 'answer-text')!.textContent).toBe(want);
    expect(text(target, 'ask-stats')).toMatch(/ s total on cpu \(f32 KV cache\)$/);
    expect(askHistory.entries.map((e) => e.answers[0]!.text)).toEqual(['', want]);
    expect(engineHealth.restarts).toBe(1);
  }, 300_000);
});
