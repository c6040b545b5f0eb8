/**
 * Held-out scores across a run's interruptions (workers/trainer.ts). A resumed run keeps the best score it had: the
 * tab's one-click request at lr 0, cut after its step-2 checkpoint and resumed, scores every step alike; the resumed
 * run's first score is not a new best, because the best checkpoint's record (best/train_args.json) says step 0 had it
 * first. A Stop while the questions are being asked cuts the scoring short and ends the run with its final checkpoint.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { memoryStore } from '../../src/train/file-store';
import type { TrainEvent } from '../../workers/protocol';
import { trainRun, type TrainDeps } from '../../workers/trainer';
import { diskFetch, oneClick } from './one-click';

describe('held-out scores across a resume (cpu)', () => {
  it('the resumed run goes on from the best it had', async () => {
    const store = memoryStore();
    const deps: TrainDeps = { storeFor: async () => store, backend: async () => ({ backend: new CpuBackend('f32') }), fetch: diskFetch };
    const req = oneClick();
    req.options = { ...req.options, lr: 0, maxSteps: 4, saveSteps: 2 };
    req.heldOut = { ...req.heldOut!, rows: req.heldOut!.rows.slice(0, 4), every: 1 };
    const run = () => ({ id: 'run-held-resume', stop: new AbortController().signal, paused: false, wake: null, store: null });
    const held = (events: TrainEvent[]) => events.flatMap((e) => (e.type === 'heldOut' ? [[e.step, e.correct, e.best]] : []));

    const first: TrainEvent[] = [];
    await expect(trainRun(req, run(), async (e) => {
      first.push(e);
      if (e.type === 'saved' && e.step === 2) throw new Error('page reloaded');
    }, deps)).rejects.toThrow('page reloaded');
    expect(held(first)).toEqual([[0, 4, true], [1, 4, false], [2, 4, false]]);

    const second: TrainEvent[] = [];
    await trainRun({ ...req, resume: { runId: 'run-held-resume' } }, run(), async (e) => void second.push(e), deps);
    expect(held(second)).toEqual([[2, 4, false], [3, 4, false], [4, 4, false]]);
    expect((second.at(-1) as Extract<TrainEvent, { type: 'done' }>).best).toEqual({ step: 0, correct: 4, total: 4 });
  }, 120_000);

  it('a stop while the questions are asked ends the run at once, with its final checkpoint', async () => {
    const store = memoryStore();
    const deps: TrainDeps = { storeFor: async () => store, backend: async () => ({ backend: new CpuBackend('f32') }), fetch: diskFetch };
    const stop = new AbortController();
    const events: TrainEvent[] = [];
    const run = { id: 'run-held-stop', stop: stop.signal, paused: false, wake: null, store: null };
    let t0 = 0;
    // 200 questions at 3 rounds take about 11 s; the stop comes 0.5 s into them
    const result = await trainRun(oneClick(), run, async (e) => {
      events.push(e);
      if (e.type === 'start') {
        t0 = performance.now();
        setTimeout(() => stop.abort(), 500);
      }
    }, deps);
    expect(result).toMatchObject({ steps: 0, stopped: true });
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(events.map((e) => e.type)).toEqual(['start', 'saved', 'done']);
  }, 60_000);
});
