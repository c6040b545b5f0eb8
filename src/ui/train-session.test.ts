// The Train view's run over a scripted fake engine, in Node: a run to its end, a fault it resumes from on its own,
// faults it does not (and the words the view shows then), Pause/Resume/Stop by the call's id, and errors.
// src/ui/views/TrainView.browser.test.ts drives the same through the view's buttons.
import { describe, expect, it } from 'vitest';
import type { TrainEvent, TrainRequest, TrainResult } from '../../workers/protocol';
import { EngineRestarted, InvalidArgument, MissingCheckpoint } from '../errors';
import { FAULTS } from './engine';
import type { CheckpointMeta, EngineRemote, Services } from './services';
import type { ActiveRun } from './train';
import { RUN_ELSEWHERE, TrainSession, type RunLock, type TrainSessionState, type TrainTarget } from './train-session';

const REQ: TrainRequest = {
  kind: 'inner',
  rows: [{ question: 'q', answer: 'a' }],
  style: 'tiny_distillation',
  model: '/m/expert',
  role: 'expert',
  options: { maxSteps: 6, batchSize: 4, saveSteps: 3 },
};

const NAME = 'tiny expert 2026-01-02 03:04';
const note = (): ActiveRun => ({ name: NAME, style: 'tiny', loop: 'inner', role: 'expert', maxSteps: 6, startedAt: 0 });

const startEv = (extra: Partial<Extract<TrainEvent, { type: 'start' }>> = {}): TrainEvent => ({
  type: 'start', runId: 'run-a', backend: 'cpu', samples: 1000, dropped: {}, ...extra,
});
const step = (n: number): TrainEvent => ({
  type: 'step', step: n, maxSteps: 6, loss: 1 / n, lr: 1e-3, gradNorm: 0.5, tokensPerSec: 100, etaSec: 6 - n,
});
const saved = (n: number, final = false): TrainEvent => ({ type: 'saved', step: n, final });
const lost = (why: string = FAULTS.deviceLost) =>
  Object.assign(new EngineRestarted(`${why} (unknown: reset); a new engine worker was started`), { fault: why });
const tick = () => new Promise((r) => setTimeout(r, 0));

type Call = (req: TrainRequest, on: (e: TrainEvent) => void, callId: string) => Promise<TrainResult>;

/**
 * A session over an engine whose train calls follow `calls` in order; the registry gives ids ck1, ck2, …; the clock
 * moves 500 ms each time it is read; call ids are call-1, call-2, ….
 */
function harness(calls: Call[], target: TrainTarget = { style: 'tiny', loop: 'inner', role: 'expert' }, lock?: RunLock) {
  const log = {
    train: [] as { req: TrainRequest; callId: string; phase: string; recovery: string | null }[],
    controls: [] as string[],
    files: [] as string[],
    saves: [] as CheckpointMeta[],
    removed: [] as string[],
    notes: [] as ActiveRun[],
    cleared: 0,
    finished: 0,
  };
  const handlers: ((e: TrainEvent) => void)[] = [];
  let finishOnCancel: ((r: TrainResult) => void) | null = null;
  const api = {
    train: async (req: TrainRequest, on: (e: TrainEvent) => void, opts?: { callId?: string }) => {
      const callId = opts!.callId!;
      log.train.push({ req, callId, phase: session.state.phase, recovery: session.state.recovery?.text ?? null });
      handlers.push(on);
      const call = calls.shift();
      if (!call) throw new Error('no more train calls scripted');
      return call(req, on, callId);
    },
    pauseTraining: async (id: string) => {
      log.controls.push(`pause ${id}`);
      handlers.at(-1)!({ type: 'paused' });
    },
    resumeTraining: async (id: string) => {
      log.controls.push(`resume ${id}`);
      handlers.at(-1)!({ type: 'resumed' });
    },
    cancel: async (id: string) => {
      log.controls.push(`cancel ${id}`);
      finishOnCancel?.({ runId: 'run-a', steps: session.state.points.at(-1)?.step ?? 0, stopped: true });
    },
    checkpointFiles: async (runId: string) => {
      log.files.push(runId);
      return { 'adapter.safetensors': new Uint8Array([1]) };
    },
  };
  let ids = 0;
  const services: Pick<Services, 'engine' | 'checkpoints'> = {
    engine: { api: () => api as unknown as EngineRemote, restart: () => {}, stop: () => {} },
    checkpoints: async () => ({
      saveFromFiles: async (_files: Record<string, Uint8Array>, meta: CheckpointMeta) => {
        log.saves.push(meta);
        return { id: `ck${++ids}`, ...meta, created: 0, bytes: 1, files: [] };
      },
      remove: async (id: string) => void log.removed.push(id),
    }) as never,
  };
  let clock = 0;
  let callCount = 0;
  const session: TrainSession = new TrainSession({
    services,
    target: () => target,
    onFinished: () => void log.finished++,
    notes: { write: (r) => void log.notes.push({ ...r }), clear: () => void log.cleared++ },
    now: () => (clock += 500),
    callId: () => `call-${++callCount}`,
    ...(lock ? { lock } : {}),
  });
  /** A train call that resolves when Stop cancels it (after its final checkpoint is reported). */
  const untilCancelled = (events: TrainEvent[]): Call => (_req, on) =>
    new Promise<TrainResult>((resolve) => {
      for (const e of events) on(e);
      finishOnCancel = (r) => {
        on(saved(r.steps, true));
        on({ type: 'done', steps: r.steps, stopped: true });
        resolve(r);
      };
    });
  return { session, state: session.state, log, api, handlers, calls, untilCancelled };
}

/** A call that reports `events`, lets the session's saves run, then fails with `error` (or resolves with the run's steps). */
const script = (events: TrainEvent[], error?: Error): Call => async (_req, on) => {
  for (const e of events) on(e);
  await tick();
  if (error) throw error;
  const last = [...events].reverse().find((e) => e.type === 'step') as { step: number } | undefined;
  return { runId: 'run-a', steps: last?.step ?? 0, stopped: false };
};

const steps = (s: TrainSessionState) => s.points.map((p) => p.step);

describe('TrainSession', () => {
  it('runs to the end: curve, speed, checkpoints into the registry, the note, and the checkpoint it offers', async () => {
    const { session, state, log } = harness([
      script([startEv({ dropped: { empty: 2 }, reason: 'no WebGPU adapter' }), step(1), step(2), step(3), saved(3), step(4), step(5),
        step(6), saved(6, true), { type: 'done', steps: 6, stopped: false }]),
    ]);
    await session.start(note(), async () => REQ);

    expect(log.train).toEqual([{ req: REQ, callId: 'call-1', phase: 'starting', recovery: null }]);
    expect(state.phase).toBe('idle');
    expect(steps(state)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(state.points[1]).toEqual({ step: 2, loss: 0.5, lr: 1e-3, gradNorm: 0.5 });
    expect(state.rate).toBe(2); // one step every 500 ms
    expect(state.eta).toBe(0);
    expect(state.startInfo).toBe('1000 samples on cpu; dropped 2 empty (no WebGPU adapter)');
    expect(log.files).toEqual(['run-a', 'run-a']);
    expect(log.saves).toEqual([
      { name: `${NAME} (step 3)`, kind: 'inner', style: 'tiny', role: 'expert', step: 3 },
      { name: NAME, kind: 'inner', style: 'tiny', role: 'expert', step: 6 },
    ]);
    expect(log.removed).toEqual(['ck1']); // the intermediate checkpoint, once the final one is written
    expect(state.saved).toBe(`saved “${NAME}” at step 6`);
    // the note: from the start (with the run id), then naming the intermediate checkpoint; cleared at the end. It is
    // written again at every step (its curve)
    const said = log.notes.map((n) => JSON.stringify([n.runId, n.checkpointId, n.step]));
    expect(said.filter((n, i) => n !== said[i - 1])).toEqual(['["run-a",null,null]', '["run-a","ck1",3]']);
    expect(log.notes.at(-1)!.points!.map((p) => p.step)).toEqual([1, 2, 3, 4, 5, 6]);
    expect([log.cleared, log.finished]).toEqual([1, 1]);
    expect(state.trained).toEqual({ id: 'ck2', name: NAME, loop: 'inner', role: 'expert' });
    expect([state.recovery, state.error]).toEqual([null, null]);
  });

  it('an outer run with held-out scores: their curve, and its best step kept beside the last and offered', async () => {
    const held = (n: number, correct: number, best: boolean): TrainEvent => ({ type: 'heldOut', step: n, correct, total: 40, best });
    const outer = { style: 'tiny', loop: 'outer', role: 'expert', rounds: 3, latentSteps: 4 } as const;
    const { session, state, log } = harness([
      script([startEv(), held(0, 38, true), step(1), step(2), held(2, 40, true), step(3), saved(3), step(4), held(4, 39, false),
        step(5), step(6), held(6, 39, false), saved(6, true),
        { type: 'done', steps: 6, stopped: false, best: { step: 2, correct: 40, total: 40 } }]),
    ], outer);
    await session.start({ ...note(), loop: 'outer', role: undefined }, async () => ({ ...REQ, kind: 'outer' }));
    expect(state.heldOut).toEqual([[0, 38], [2, 40], [4, 39], [6, 39]].map(([step, correct]) => ({ step, correct, total: 40 })));
    expect(state.best).toEqual({ step: 2, correct: 40, total: 40 });
    // the last checkpoint, then the best one read from the run's best folder
    expect(log.files).toEqual(['run-a', 'run-a', 'run-a/best']);
    expect(log.saves.map((m) => [m.name, m.kind, m.step])).toEqual([
      [`${NAME} (step 3)`, 'outer', 3], [NAME, 'outer', 6], [`${NAME} (best, step 2)`, 'outer', 2],
    ]);
    expect(state.trained).toEqual({ id: 'ck3', name: `${NAME} (best, step 2)`, loop: 'outer', rounds: 3, latentSteps: 4 });
    expect(state.saved)
      .toBe(`saved “${NAME}” at step 6 and its best held-out score, 40/40 (100.0%) at step 2, as “${NAME} (best, step 2)”`);
  });

  it('a run whose best is its last step, or the links it started from, keeps one checkpoint', async () => {
    const held = (n: number, correct: number, best: boolean): TrainEvent => ({ type: 'heldOut', step: n, correct, total: 5, best });
    const run = (events: TrainEvent[], best: number, correct: number) => script([startEv(), ...events, saved(2, true),
      { type: 'done', steps: 2, stopped: false, best: { step: best, correct, total: 5 } }]);
    const { session, state, log } = harness([
      run([held(0, 3, true), step(1), step(2), held(2, 5, true)], 2, 5),
      run([held(0, 5, true), step(1), step(2), held(2, 3, false)], 0, 5),
    ], { style: 'tiny', loop: 'outer', role: 'expert', rounds: 3 });
    await session.start(note(), async () => REQ);
    expect(log.files).toEqual(['run-a']);
    expect(state.trained).toEqual({ id: 'ck1', name: NAME, loop: 'outer', rounds: 3 });
    expect(state.saved).toBe(`saved “${NAME}” at step 2`);
    await session.start(note(), async () => REQ);
    expect(log.files).toEqual(['run-a', 'run-a']);
    expect(state.trained).toEqual({ id: 'ck2', name: NAME, loop: 'outer', rounds: 3 });
    expect(state.saved).toBe(`saved “${NAME}” at step 2; the links it started from scored best (5/5 (100.0%) at step 0)`);
  });

  it('saves the end itself when the worker sends no final checkpoint', async () => {
    const { session, state, log } = harness([script([startEv(), step(1), step(2)])]);
    await session.start(note(), async () => REQ);
    expect(log.saves.map((m) => [m.name, m.step])).toEqual([[NAME, 2]]);
    expect(state.trained?.id).toBe('ck1');
  });

  it('resumes on its own after a fault, from the run\'s checkpoint, and the curve goes on from there', async () => {
    const { session, state, log, handlers } = harness([
      script([startEv(), step(1), step(2), step(3), saved(3), step(4)], lost()),
      async (req, on, callId) => {
        on(startEv({ resumedFrom: 3 }));
        handlers[0]!(step(99)); // a late event of the replaced worker
        return script([step(4), step(5), step(6), saved(6, true)])(req, on, callId);
      },
    ]);
    await session.start(note(), async () => REQ);

    expect(log.train.map((c) => [c.callId, c.phase])).toEqual([['call-1', 'starting'], ['call-2', 'resuming']]);
    expect(log.train[1]!.req).toEqual({ ...REQ, resume: { runId: 'run-a' } });
    expect(log.train[1]!.recovery).toBe(
      'The GPU device was lost after step 4; resuming the run from its last checkpoint on a new engine…',
    );
    expect(state.recovery).toEqual({
      text: 'The GPU device was lost after step 4; the run resumed from its checkpoint at step 3 on a new engine.',
      detail: 'the GPU device was lost (unknown: reset); a new engine worker was started',
      offerResume: false,
      offerStartAgain: false,
    });
    expect(steps(state)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(log.saves.map((m) => m.step)).toEqual([3, 6]);
    expect(state.saved).toBe(`saved “${NAME}” at step 6`);
    expect(state.trained?.id).toBe('ck2');
    expect([state.phase, state.error]).toEqual(['idle', null]);
  });

  it('holds a run that was paused when the engine was lost: the resumed call is paused again', async () => {
    const { session, state, log } = harness([
      async (_req, on) => {
        on(startEv());
        on(step(1));
        on(saved(1));
        await session.control('pause');
        await tick();
        throw lost();
      },
      script([startEv({ resumedFrom: 1 }), step(2), saved(2, true)]),
    ]);
    await session.start(note(), async () => REQ);
    expect(log.controls).toEqual(['pause call-1', 'pause call-2']);
    expect(steps(state)).toEqual([1, 2]);
  });

  it('does not resume the same fault again before a newer checkpoint; one click resumes it', async () => {
    const { session, state, log } = harness([
      script([startEv(), step(1), step(2), step(3), saved(3), step(4)], lost()),
      script([startEv({ resumedFrom: 3 }), step(4)], lost()),
      script([startEv({ resumedFrom: 3 }), step(4), step(5), step(6), saved(6, true)]),
    ]);
    await session.start(note(), async () => REQ);

    expect(log.train).toHaveLength(2);
    expect(state.recovery).toEqual({
      text: 'The GPU device was lost again after step 4, before a checkpoint newer than step 3: not resumed on its own, since the ' +
        'fault may come back at the same point.',
      detail: 'the GPU device was lost (unknown: reset); a new engine worker was started',
      offerResume: true,
      offerStartAgain: true,
    });
    // the registry holds the step-3 checkpoint saved before the first fault
    expect([state.phase, state.saved, state.trained]).toEqual(['idle', `saved “${NAME}” at step 3 (intermediate)`, null]);

    await session.resumeLast();
    expect(log.train.map((c) => [c.callId, c.phase])).toEqual([['call-1', 'starting'], ['call-2', 'resuming'], ['call-3', 'resuming']]);
    expect(log.train[2]!.req).toEqual({ ...REQ, resume: { runId: 'run-a' } });
    expect(state.recovery?.text).toBe('Resumed from its checkpoint at step 3.');
    expect(steps(state)).toEqual([1, 2, 3, 4, 5, 6]); // the kept curve, cut back to the checkpoint
    expect(log.saves.map((m) => m.step)).toEqual([3, 6]);
    expect(log.removed).toEqual(['ck1']);
    expect(state.trained?.id).toBe('ck2');
  });

  it('says there is nothing to resume from: no checkpoint the worker finds, or no run yet', async () => {
    const crashed = harness([
      script([startEv(), step(1), step(2)], lost(FAULTS.crashed)),
      script([], new MissingCheckpoint('run-a has no complete checkpoint')),
    ]);
    await crashed.session.start(note(), async () => REQ);
    expect(crashed.log.train[1]!.req.resume).toEqual({ runId: 'run-a' }); // the worker may hold one the page did not see
    expect(crashed.state.recovery).toEqual({
      text: "The engine worker crashed after step 2, before the run's first checkpoint (one every 3 steps), so there is nothing to " +
        'resume from.',
      detail: 'the engine worker crashed (unknown: reset); a new engine worker was started',
      offerResume: false,
      offerStartAgain: true,
    });
    expect([crashed.state.phase, crashed.state.error, crashed.log.saves]).toEqual(['idle', null, []]);

    const early = harness([script([], lost(FAULTS.unresponsive))]);
    await early.session.start(note(), async () => REQ);
    expect(early.log.train).toHaveLength(1);
    expect(early.state.recovery?.text).toBe(
      "The engine worker stopped answering before the run's first step, so there is nothing to resume from.",
    );
    await early.session.resumeLast(); // no run id: nothing to resume
    expect(early.log.train).toHaveLength(1);
  });

  it('does not resume a run reloaded on request, or one being stopped', async () => {
    const reloaded = harness([script([startEv(), step(1), step(2), step(3), saved(3), step(4)], lost(FAULTS.requested))]);
    await reloaded.session.start(note(), async () => REQ);
    expect(reloaded.state.recovery).toMatchObject({
      text: 'The engine was reloaded on request after step 4. Its last checkpoint is at step 3.',
      offerResume: true,
    });

    const stopping = harness([
      async (_req, on) => {
        for (const e of [startEv(), step(1), step(2), saved(2)]) on(e);
        void stopping.session.control('stop'); // the cancel is recorded, but the engine is lost before the run ends
        await tick();
        throw lost();
      },
    ]);
    await stopping.session.start(note(), async () => REQ);
    expect(stopping.log.controls).toEqual(['cancel call-1']);
    expect(stopping.state.recovery?.text).toBe(
      'The GPU device was lost after step 2, while the run was stopping. Its last checkpoint is at step 2.',
    );
    expect(stopping.log.train).toHaveLength(1);
  });

  it('pauses, resumes and stops the call by its id; a stopped run keeps its final checkpoint', async () => {
    const { session, state, log, calls, untilCancelled } = harness([]);
    await session.control('pause'); // no call in flight: nothing to name
    expect(log.controls).toEqual([]);
    calls.push(untilCancelled([startEv(), step(1), step(2)]));
    const running = session.start(note(), async () => REQ);
    await tick();
    expect([state.phase, steps(state)]).toEqual(['running', [1, 2]]);
    await session.control('pause');
    expect(state.phase).toBe('paused');
    await session.control('resume');
    expect(state.phase).toBe('running');
    await session.start(note(), async () => REQ); // Start while a run is in flight does nothing
    expect(log.train).toHaveLength(1);

    const stopped = session.control('stop');
    expect(state.phase).toBe('stopping');
    await stopped;
    await running;
    expect(log.controls).toEqual(['pause call-1', 'resume call-1', 'cancel call-1']);
    expect(log.saves).toEqual([{ name: NAME, kind: 'inner', style: 'tiny', role: 'expert', step: 2 }]);
    expect([state.phase, state.saved, state.recovery]).toEqual(['idle', `saved “${NAME}” at step 2`, null]);
    expect(state.trained).toEqual({ id: 'ck1', name: NAME, loop: 'inner', role: 'expert' });
    expect([log.cleared, log.finished]).toEqual([1, 1]);
  });

  it('shows an error that is not an engine fault, and a control call that fails', async () => {
    const { session, state, log, api, calls, untilCancelled } = harness([]);
    await session.start(note(), async () => {
      throw new InvalidArgument('no training rows; upload a JSON or JSONL file, or load a Hugging Face dataset');
    });
    expect(log.train).toEqual([]);
    expect(state.error).toEqual({
      name: 'InvalidArgument',
      message: 'no training rows; upload a JSON or JSONL file, or load a Hugging Face dataset',
    });
    expect(state.phase).toBe('idle');

    calls.push(script([startEv(), step(1)], new RangeError('loss is NaN at step 2')));
    await session.start(note(), async () => REQ);
    expect([state.error, state.recovery, state.phase]).toEqual([{ name: 'RangeError', message: 'loss is NaN at step 2' }, null, 'idle']);
    expect(steps(state)).toEqual([1]);

    calls.push(untilCancelled([startEv(), step(1)]));
    const running = session.start(note(), async () => REQ);
    await tick();
    expect(state.error).toBeNull(); // a new run clears the last one's error
    api.pauseTraining = async () => {
      throw new Error('the worker refused');
    };
    await session.control('pause');
    expect(state.error).toEqual({ name: 'Error', message: 'the worker refused' });
    expect(state.phase).toBe('running');
    await session.control('stop');
    await running;
    expect(state.saved).toBe(`saved “${NAME}” at step 1`);
  });

  it('trains one run at a time across tabs: the lock held for the run, released at its end or error; refused while elsewhere', async () => {
    const held: string[] = [];
    let other = false;
    const lock: RunLock = {
      take: async () => {
        if (other) return null;
        held.push('taken');
        return () => void held.push('released');
      },
      held: async () => other || held.at(-1) === 'taken',
    };
    const { session, state, log } = harness([
      script([startEv(), step(1), saved(1, true), { type: 'done', steps: 1, stopped: false }]),
      script([startEv()], new InvalidArgument('rows: bad')),
    ], undefined, lock);
    await session.start(note(), async () => REQ);
    expect(held).toEqual(['taken', 'released']);
    await session.start(note(), async () => REQ);
    expect(held).toEqual(['taken', 'released', 'taken', 'released']); // released after an error too
    expect(state.error?.message).toBe('rows: bad');
    other = true; // another tab trains
    await session.start(note(), async () => REQ);
    expect(log.train.length).toBe(2); // nothing sent
    expect(state.error).toEqual({ name: 'InvalidArgument', message: RUN_ELSEWHERE });
    expect(held.length).toBe(4);
  });

  it('keeps the curve in the note, step by step, and draws it again when the noted run resumes after a reload', async () => {
    const { session, log } = harness([script([startEv(), step(1), step(2), step(3), saved(3), step(4), step(5)], lost())]);
    // the first run dies with its tab at step 5, after step 3's checkpoint: its note names that one and holds the curve
    await session.start(note(), async () => REQ);
    const noted = log.notes.at(-1)!;
    expect(noted.step).toBe(3);
    expect(noted.points!.map((p) => p.step)).toEqual([1, 2, 3, 4, 5]);
    expect(noted.points![2]).toEqual({ step: 3, loss: 1 / 3, lr: 1e-3, gradNorm: 0.5 });
    // a new page: a session with nothing drawn resumes the noted run from the worker's newest checkpoint; the curve
    // starts with the noted points up to it: step 3's, or step 5's when the worker saved that one (the registry's copy
    // lags the worker's save)
    for (const from of [3, 5]) {
      const after = harness([
        script([startEv({ resumedFrom: from }), step(from + 1), saved(from + 1, true), { type: 'done', steps: from + 1, stopped: false }]),
      ]);
      const resumed: ActiveRun = JSON.parse(JSON.stringify(noted));
      await after.session.start(resumed, async () => ({ ...REQ, resume: { runId: resumed.runId! } }));
      expect(steps(after.state)).toEqual(Array.from({ length: from + 1 }, (_, i) => i + 1));
      expect(after.log.train[0]!.req.resume).toEqual({ runId: 'run-a' });
    }
  });
});
