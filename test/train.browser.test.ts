/**
 * Link training in the tab: the engine worker trains through comlink in headless Chromium, streams its
 * events in order, pauses and resumes between steps by the train call's id, ends a cancelled call with a
 * final checkpoint (train() resolves, stopped), and hands the checkpoint files back with upstream key names.
 * CPU backend for the longer runs (SwiftShader is slow), a two-step WebGPU smoke run.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { proxy } from 'comlink';
import { parseLinkBytes } from '../src/mas/upstream';
import { startEngine } from '../src/ui/engine';
import type { TrainEvent, TrainRequest } from '../workers/protocol';

const engine = startEngine();
afterAll(() => engine.stop());

const MODEL = '/models/tiny/qwen3-tiny/';
const QWEN3_TINY_D = 48;

/** Arithmetic rows in Sequential-Math's columns (question, plan, refined_plan, answer). */
const rows = Array.from({ length: 8 }, (_, i) => {
  const [a, b] = [3 + 2 * i, 11 - i];
  return {
    question: `What is ${a} + ${b}?`,
    plan: `Step 1: add ${a} and ${b}.`,
    refined_plan: `Step 1: add ${a} and ${b}. Step 2: box it.`,
    answer: `${a + b}. \\boxed{${a + b}}`,
  };
});

const innerReq = (maxSteps: number, backend: 'cpu' | 'webgpu' = 'cpu'): TrainRequest => ({
  kind: 'inner', backend, rows, model: MODEL, style: 'sequential_light', role: 'planner',
  options: { maxSteps, batchSize: 2, lr: 2e-2, warmupSteps: 1, seed: 11, maxLength: 256 },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let calls = 0;

/** Starts a run under a fresh call id (for pause, resume and cancel); `on` sees each event as it arrives (the worker waits for it). */
function train(req: TrainRequest, on: (e: TrainEvent, all: TrainEvent[], callId: string) => void = () => {}) {
  const callId = `train-${++calls}`;
  const events: TrainEvent[] = [];
  const result = engine.api.train(req, proxy((e: TrainEvent) => {
    events.push(e);
    on(e, events, callId);
  }), { callId });
  return { events, result };
}

const steps = (events: TrainEvent[]) => events.filter((e): e is Extract<TrainEvent, { type: 'step' }> => e.type === 'step');

describe('training links in the engine worker (chromium)', () => {
  it('inner run on cpu: ordered events, falling loss, pause holds between steps, resume continues', async () => {
    let pausedAt = -1;
    let stepsWhilePaused = -1;
    const t0 = performance.now();
    const { events, result } = train(innerReq(10), (e, all, callId) => {
      if (e.type === 'step' && e.step === 3) void engine.api.pauseTraining(callId);
      if (e.type === 'paused') {
        pausedAt = steps(all).length;
        // no step may arrive while paused; then resume
        void sleep(300).then(() => {
          stepsWhilePaused = steps(events).length - pausedAt;
          return engine.api.resumeTraining(callId);
        });
      }
    });
    const r = await result;
    console.info(`inner cpu run: 10 steps in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(r).toMatchObject({ steps: 10, stopped: false });
    expect(r.runId).toMatch(/^run-/);
    expect(events[0]).toEqual({ type: 'start', runId: r.runId, backend: 'cpu', samples: 8, dropped: {} });
    expect(events.map((e) => (e.type === 'step' ? `step${e.step}` : e.type))).toEqual([
      'start',
      'step1',
      'step2',
      'step3',
      'paused',
      'resumed',
      'step4',
      'step5',
      'step6',
      'step7',
      'step8',
      'step9',
      'step10',
      'saved',
      'done',
    ]);
    expect(pausedAt).toBe(3);
    expect(stepsWhilePaused).toBe(0);
    expect(events.at(-2)).toEqual({ type: 'saved', step: 10, final: true });
    expect(events.at(-1)).toEqual({ type: 'done', steps: 10, stopped: false });
    const s = steps(events);
    expect(s.every((e) => e.maxSteps === 10 && Number.isFinite(e.loss) && e.gradNorm > 0 && e.tokensPerSec > 0)).toBe(true);
    const first = (s[0].loss + s[1].loss) / 2;
    const last = (s[8].loss + s[9].loss) / 2;
    console.info(`inner loss: first two ${first.toFixed(4)}, last two ${last.toFixed(4)}`);
    expect(last).toBeLessThan(first * 0.7);
  });

  it('cancel mid-run saves a final checkpoint and resolves stopped; a second run meanwhile is refused; ' +
    'files carry upstream keys', async () => {
    const second: { err?: Promise<Error | null> } = {};
    const { events, result } = train(innerReq(20), (e, _all, callId) => {
      if (e.type === 'step' && e.step === 1)
        second.err = engine.api
          .train(
            innerReq(2),
            proxy(() => {}),
          )
          .then(
            () => null,
            (err: Error) => err,
          );
      if (e.type === 'step' && e.step === 2) void engine.api.cancel(callId);
    });
    const r = await result;
    expect(r.stopped).toBe(true);
    expect(r.steps).toBeGreaterThanOrEqual(2);
    expect(r.steps).toBeLessThan(20);
    expect(events.slice(-2)).toEqual([
      { type: 'saved', step: r.steps, final: true },
      { type: 'done', steps: r.steps, stopped: true },
    ]);
    const err = await second.err;
    expect(err).toMatchObject({ name: 'InvalidArgument' });
    expect(err?.message).toMatch(/still in progress; stop it/);

    const files = await engine.api.checkpointFiles(r.runId);
    expect(Object.keys(files).sort()).toEqual([
      'adapter.pt',
      'adapter.safetensors',
      'adapter_config.json',
      'optimizer.safetensors',
      'train_args.json',
      'trainer_state.json',
    ]);
    const st = parseLinkBytes(files['adapter.safetensors'], 'adapter.safetensors');
    const pt = parseLinkBytes(files['adapter.pt'], 'adapter.pt');
    // the same names and shapes as the torch-saved planner link of the golden files (qwen3-tiny's width)
    const golden = parseLinkBytes(
      new Uint8Array(await (await fetch('/test/golden/tiny-mas/planner-inner.pt')).arrayBuffer()),
      'planner-inner.pt',
    );
    const shapes = (sd: typeof st) => [...sd].map(([k, t]) => `${k}:${t.shape.join('x')}`).sort();
    expect(shapes(st)).toEqual(shapes(golden));
    expect(shapes(st)).toContain(`proj1.weight:${QWEN3_TINY_D}x${QWEN3_TINY_D}`);
    for (const [k, t] of st) expect(Array.from(pt.get(k)!.data), k).toEqual(Array.from(t.data)); // .pt in f32 holds the same values
    const state = JSON.parse(new TextDecoder().decode(files['trainer_state.json']));
    expect(state).toMatchObject({ kind: 'inner', links: ['adapter'], state: { step: r.steps } });
    expect(JSON.parse(new TextDecoder().decode(files['adapter_config.json']))).toEqual({ adapter_type: 'ln_res_adapter' });
  });

  it('cancel while paused ends the run at once with its final checkpoint (no resumed event)', async () => {
    const { events, result } = train(innerReq(5), (e, _all, callId) => {
      if (e.type === 'step' && e.step === 1) void engine.api.pauseTraining(callId);
      if (e.type === 'paused') void engine.api.cancel(callId);
    });
    const r = await result;
    expect(r).toMatchObject({ steps: 1, stopped: true });
    expect(events.map((e) => e.type)).toEqual(['start', 'step', 'paused', 'saved', 'done']);
    expect(events.at(-1)).toEqual({ type: 'done', steps: 1, stopped: true });
    expect(Object.keys(await engine.api.checkpointFiles(r.runId))).toContain('adapter.safetensors');
  });

  it('starts from given link bytes (initLinks): lr 0 leaves them unchanged through the checkpoint', async () => {
    const start = new Uint8Array(await (await fetch('/test/golden/tiny-mas/planner-inner.pt')).arrayBuffer());
    const { result } = train({ ...innerReq(1), initLinks: { adapter: start }, options: { ...innerReq(1).options, lr: 0 } });
    const r = await result;
    const files = await engine.api.checkpointFiles(r.runId);
    const want = parseLinkBytes(start, 'planner-inner.pt');
    const got = parseLinkBytes(files['adapter.safetensors'], 'adapter.safetensors');
    for (const [k, t] of want) expect(Array.from(got.get(k)!.data), k).toEqual(Array.from(t.data));
  });

  it('webgpu smoke: two inner steps on the device the worker owns', async () => {
    const t0 = performance.now();
    const { events, result } = train(innerReq(2, 'webgpu'));
    const r = await result;
    console.info(`inner webgpu run: 2 steps in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(r).toMatchObject({ steps: 2, stopped: false });
    expect(events[0]).toMatchObject({ type: 'start', backend: 'webgpu', samples: 8 });
    expect(events.map((e) => e.type)).toEqual(['start', 'step', 'step', 'saved', 'done']);
    expect(steps(events).every((e) => Number.isFinite(e.loss) && e.loss > 0 && e.gradNorm > 0)).toBe(true);
  });

  it('outer run on cpu: the tiny sequential system (qwen3 / llama / qwen2), one round, two steps', async () => {
    const models = { planner: 'qwen3-tiny', critic: 'llama-tiny', solver: 'qwen2-tiny' };
    const agents: NonNullable<TrainRequest['agents']> = {};
    for (const [role, m] of Object.entries(models)) {
      const innerLink = new Uint8Array(await (await fetch(`/test/golden/tiny-mas/${role}-inner.pt`)).arrayBuffer());
      agents[role] = { model: `/models/tiny/${m}/`, innerLink };
    }
    const t0 = performance.now();
    const { events, result } = train({
      kind: 'outer', backend: 'cpu', rows, style: 'sequential_light', agents,
      options: { maxSteps: 2, batchSize: 2, lr: 1e-2, warmupSteps: 0, seed: 5, rounds: 1, maxLatentTokens: 6, maxLength: 512 },
    });
    const r = await result;
    console.info(`outer cpu run: 2 steps in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(r).toMatchObject({ steps: 2, stopped: false });
    expect(events.map((e) => e.type)).toEqual(['start', 'step', 'step', 'saved', 'done']);
    expect(steps(events).every((e) => Number.isFinite(e.loss) && e.loss > 0)).toBe(true);
    const files = await engine.api.checkpointFiles(r.runId);
    // every link of the style is saved, outer_31 too (unused with one round), as rmas train-outer does
    expect(Object.keys(files).sort()).toEqual([
      'optimizer.safetensors',
      'outer_12.pt',
      'outer_12.safetensors',
      'outer_23.pt',
      'outer_23.safetensors',
      'outer_31.pt',
      'outer_31.safetensors',
      'outer_adapter_config.json',
      'outerlink_config.json',
      'train_args.json',
      'trainer_state.json',
    ]);
    // the golden outer_12 (torch) has the same names and shapes: planner (qwen3-tiny) → critic (llama-tiny)
    const golden = parseLinkBytes(new Uint8Array(await (await fetch('/test/golden/tiny-mas/outer_12.pt')).arrayBuffer()), 'outer_12.pt');
    const got = parseLinkBytes(files['outer_12.safetensors'], 'outer_12.safetensors');
    const shapes = (sd: typeof got) => [...sd].map(([k, t]) => `${k}:${t.shape.join('x')}`).sort();
    expect(shapes(got)).toEqual(shapes(golden));
  });

  it('names bad requests: a missing model folder, a call that is not training, a run id it never had', async () => {
    const err = await engine.api.train({ ...innerReq(2), model: '/models/tiny/no-such-model/' }, proxy(() => {})).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'MissingCheckpoint' });
    expect((err as Error).message).toMatch(/no-such-model\/config\.json/);
    await expect(engine.api.pauseTraining('no-such-call')).rejects.toMatchObject({ name: 'InvalidArgument' });
    await expect(engine.api.checkpointFiles('run-x')).rejects.toMatchObject({ name: 'InvalidArgument' });
  });
});
