// The Train view's controls over a fake engine: Start gives the train call an id, Pause and Resume name that call,
// and Stop cancels it; the cancelled run still resolves (stopped) and its final checkpoint is saved to the registry.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mount, unmount } from 'svelte';
import type { SystemSpec, TrainEvent, TrainRequest, TrainResult } from '../../../workers/protocol';
import { reactiveProps } from '../components/props.svelte';
import type { CheckpointMeta, EngineRemote, Services } from '../services';
import { TINY } from '../system';
import { activeRun } from '../train';
import TrainView from './TrainView.svelte';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
  activeRun.clear();
});

const offline: SystemSpec = {
  style: 'tiny_distillation',
  roles: {
    expert: { model: '/m/expert', innerLink: new Uint8Array([9]) },
    learner: { model: '/m/learner', innerLink: new Uint8Array([8]) },
  },
};

/** An engine whose run emits start and one step, then waits for pause, resume or cancel by its call id. */
function fakeEngine() {
  let on: (e: TrainEvent) => void = () => {};
  let finish: (r: TrainResult) => void = () => {};
  const api = {
    offlineSystem: vi.fn(async () => offline),
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

describe('TrainView', () => {
  it('pauses, resumes and stops the run by its call id; a stopped run keeps its final checkpoint', async () => {
    const { api, saveFromFiles, services } = fakeEngine();
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(TrainView, { target, props: reactiveProps({ services, style: TINY, onAsk: () => {} }) });
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
