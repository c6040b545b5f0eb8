/**
 * The engine worker's training (workers/trainer.ts, train-calls.ts) on the CPU backend in Node: a run
 * interrupted after its step-3 checkpoint and resumed by `resume: { runId }` ends with the same link weights
 * and the same losses for steps 4–6 as the run done in one go; a checkpoint without trainer state is refused
 * by name; the training calls pause and resume a run by its call id, and cancel(callId) ends it after its
 * step with a final checkpoint, train() resolving with stopped: true.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../src/tensor/cpu';
import { memoryStore } from '../src/train/file-store';
import { callRegistry } from '../workers/calls';
import type { TrainEvent, TrainRequest } from '../workers/protocol';
import { trainCalls } from '../workers/train-calls';
import { runIdFor, trainRun, type TrainDeps, type TrainRun } from '../workers/trainer';

const ROOT = 'http://app.test/';
/** The repository on disk as an HTTP server that ignores Range (whole files). */
const diskFetch: typeof fetch = async (input) => {
  const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
  try {
    return new Response(readFileSync(join(process.cwd(), decodeURIComponent(url.pathname))), { status: 200 });
  } catch {
    return new Response(null, { status: 404 });
  }
};

const stores = new Map<string, ReturnType<typeof memoryStore>>();
const deps: TrainDeps = {
  // one store per run id that outlives the run, as the worker's IndexedDB does across a reload
  storeFor: async (id) => stores.get(id) ?? stores.set(id, memoryStore()).get(id)!,
  backend: async () => ({ backend: new CpuBackend('f32') }),
  fetch: diskFetch,
};

const rows = Array.from({ length: 6 }, (_, i) => {
  const [a, b] = [3 + 2 * i, 11 - i];
  return {
    question: `What is ${a} + ${b}?`,
    plan: `Step 1: add ${a} and ${b}.`,
    refined_plan: `Step 1: add ${a} and ${b}. Step 2: box it.`,
    answer: `${a + b}. \\boxed{${a + b}}`,
  };
});
// 6 samples in batches of 2: steps 4–6 are the second epoch, whose order the saved Rng draws
const request = (): TrainRequest => ({
  kind: 'inner', backend: 'cpu', rows, model: `${ROOT}models/tiny/qwen3-tiny/`, style: 'sequential_light', role: 'planner',
  options: { maxSteps: 6, batchSize: 2, lr: 2e-2, warmupSteps: 1, seed: 11, saveSteps: 3, maxLength: 256 },
});

let counter = 0;
function newRun(req: TrainRequest): TrainRun {
  return { id: runIdFor(req, () => `run-test-${++counter}`), stop: new AbortController().signal, paused: false, wake: null, store: null };
}

async function go(req: TrainRequest, on: (e: TrainEvent) => void = () => {}) {
  const run = newRun(req);
  const events: TrainEvent[] = [];
  const result = await trainRun(req, run, async (e) => {
    events.push(e);
    on(e);
  }, deps);
  return { run, events, result };
}

const losses = (events: TrainEvent[]) => events.flatMap((e) => (e.type === 'step' ? [[e.step, e.loss] as const] : []));
const finalBytes = async (id: string, file: string) => stores.get(id)!.read(file);

describe('resuming an interrupted training run in the worker (cpu)', () => {
  it('3 steps, interruption after the step-3 checkpoint, resume to 6 = 6 steps in one go', async () => {
    const whole = await go(request());
    expect(whole.result).toMatchObject({ steps: 6, stopped: false });

    // the page reloads right after the step-3 checkpoint: the worker dies mid-run
    const first = newRun(request());
    const seen: TrainEvent[] = [];
    const died = await trainRun(request(), first, async (e) => {
      seen.push(e);
      if (e.type === 'saved' && e.step === 3) throw new Error('page reloaded');
    }, deps).catch((e: Error) => e);
    expect((died as Error).message).toBe('page reloaded');
    expect(losses(seen).map(([s]) => s)).toEqual([1, 2, 3]);

    // the options of the resume request are not used: the run's saved settings are
    const req = { ...request(), options: { maxSteps: 99, lr: 1 }, resume: { runId: first.id } };
    const resumed = await go(req);
    expect(resumed.run.id).toBe(first.id);
    expect(resumed.events[0]).toMatchObject({ type: 'start', runId: first.id, resumedFrom: 3 }); // what the page says it resumed from
    expect(resumed.result).toEqual({ runId: first.id, steps: 6, stopped: false });
    expect(resumed.events.map((e) => (e.type === 'step' ? `step${e.step}/${e.maxSteps}` : e.type))).toEqual([
      'start',
      'step4/6',
      'step5/6',
      'step6/6',
      'saved',
      'done',
    ]);

    const w = losses(whole.events);
    console.info(`losses in one go: ${w.map(([s, l]) => `${s}:${l.toFixed(6)}`).join(' ')}`);
    expect(losses(seen)).toEqual(w.slice(0, 3));
    expect(losses(resumed.events)).toEqual(w.slice(3)); // bitwise: same data order, schedule, moments
    expect(w[5][1]).not.toBe(w[2][1]);
    for (const f of ['adapter.safetensors', 'optimizer.safetensors']) {
      expect(Buffer.from(await finalBytes(first.id, f)).equals(Buffer.from(await finalBytes(whole.run.id, f))), f).toBe(true);
    }
    const state = (id: string) => finalBytes(id, 'trainer_state.json').then((b) => JSON.parse(new TextDecoder().decode(b)).state);
    expect(await state(first.id)).toEqual(await state(whole.run.id));
    expect((await state(first.id)).epoch).toBe(1);
    // the later checkpoints landed in the same run's store
    expect(await stores.get(first.id)!.exists('checkpoint-3/trainer_state.json')).toBe(true);
  }, 30_000);

  it('a checkpoint without trainer state, or a run with none, is refused by name', async () => {
    const { run } = await go({ ...request(), options: { ...request().options, maxSteps: 3 } });
    await stores.get(run.id)!.remove('checkpoint-3/trainer_state.json');
    const err = await go({ ...request(), resume: { runId: run.id, checkpoint: 'checkpoint-3' } }).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'CorruptCheckpoint' });
    expect((err as Error).message).toMatch(/checkpoint-3 of run run-test-\d+ has no trainer_state\.json.*start a new run from it instead/);
    const none = await go({ ...request(), resume: { runId: 'run-never' } }).catch((e: Error) => e);
    expect(none).toMatchObject({ name: 'MissingCheckpoint' });
    expect((none as Error).message).toMatch(/run run-never has no complete checkpoint/);
    expect(() => runIdFor({ ...request(), resume: { runId: '../x' } }, () => 'run-1')).toThrow(
      /resume\.runId must be the id of an earlier run/,
    );
  }, 20_000);
});

describe('training calls: one run, paused, resumed and cancelled by its call id (cpu)', () => {
  it('cancel ends the run after its step with a final checkpoint and resolves stopped; others are refused by name', async () => {
    const calls = callRegistry();
    const api = trainCalls(deps, calls);
    const events: TrainEvent[] = [];
    const refused: Promise<unknown>[] = [];
    const r = await api.train({ ...request(), options: { ...request().options, saveSteps: 0 } }, async (e) => {
      events.push(e);
      if (e.type === 'step' && e.step === 1) {
        await api.pauseTraining('t1');
        // handled at once: the run yields to the event loop before they are looked at
        refused.push(...[api.train(request(), () => {}), api.pauseTraining('t-other')].map((p) => p.catch((e: Error) => e)));
      }
      if (e.type === 'paused') await api.resumeTraining('t1');
      if (e.type === 'step' && e.step === 2) await calls.cancel('t1');
    }, { callId: 't1' });
    expect(r).toMatchObject({ steps: 2, stopped: true });
    expect(events.map((e) => (e.type === 'step' ? `step${e.step}` : e.type))).toEqual([
      'start',
      'step1',
      'paused',
      'resumed',
      'step2',
      'saved',
      'done',
    ]);
    expect(events.at(-2)).toEqual({ type: 'saved', step: 2, final: true });
    const [second, other] = await Promise.all(refused);
    expect(second).toMatchObject({
      name: 'InvalidArgument',
      message: expect.stringMatching(/still in progress; stop it \(cancel its call\)/),
    });
    expect(other).toMatchObject({
      name: 'InvalidArgument',
      message: expect.stringMatching(/call t-other is not the training run in progress/),
    });
    const files = await api.checkpointFiles(r.runId);
    expect(JSON.parse(new TextDecoder().decode(files['trainer_state.json'])).state.step).toBe(2);
    await expect(api.resumeTraining('t1')).rejects.toMatchObject({
      name: 'InvalidArgument',
      message: expect.stringMatching(/no training run is in progress/),
    });

    // a cancel that arrives before its call: the run stops before its first step, still with a final checkpoint
    await calls.cancel('t2');
    const early: TrainEvent[] = [];
    const r2 = await api.train(request(), async (e) => void early.push(e), { callId: 't2' });
    expect(r2).toMatchObject({ steps: 0, stopped: true });
    expect(early.map((e) => e.type)).toEqual(['start', 'saved', 'done']);
  }, 20_000);
});
