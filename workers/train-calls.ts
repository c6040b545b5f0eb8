/**
 * The engine API's training calls (protocol.ts EngineApi): one run at a time, paused and resumed by the callId
 * of its train call, cancelled through the worker's call registry (calls.ts) like every long call, and the
 * checkpoint files of the last few runs by run id. Kept out of the worker's comlink wiring so that Node tests
 * run it on the CPU backend.
 */
import { transfer } from 'comlink';
import { InvalidArgument } from '../src/errors';
import type { FileStore } from '../src/train';
import type { Calls } from './calls';
import type { EngineApi, TrainEvent } from './protocol';
import { BEST_DIR, type TrainDeps, type TrainRun, runIdFor, trainRun } from './trainer';

export type TrainCalls = Pick<EngineApi, 'train' | 'pauseTraining' | 'resumeTraining' | 'checkpointFiles'>;

/** Finished runs whose checkpoint files stay readable by run id. */
const KEEP_PAST_RUNS = 8;

export function trainCalls(deps: TrainDeps, calls: Calls): TrainCalls {
  let active: { run: TrainRun; callId: string | undefined } | null = null;
  const pastRuns = new Map<string, FileStore>();
  let runCounter = 0;

  function runOf(callId: string, what: string): TrainRun {
    if (!active) throw new InvalidArgument(`${what}: no training run is in progress; start one with train()`);
    if (active.callId !== callId)
      throw new InvalidArgument(
        `${what}: call ${callId} is not the training run in progress (${active.run.id}); it has finished or never existed`,
      );
    return active.run;
  }

  return {
    async train(req, onEvent, opts = {}) {
      if (active)
        throw new InvalidArgument(
          `training run ${active.run.id} is still in progress; stop it (cancel its call) or wait for it to finish before starting another`,
        );
      // a resumed run keeps its id, so its later checkpoints land in the same store
      const id = runIdFor(req, () => `run-${Date.now().toString(36)}-${++runCounter}`);
      const reg = calls.register(opts.callId);
      const run: TrainRun = { id, stop: reg.signal, paused: false, wake: null, store: null };
      active = { run, callId: opts.callId }; // taken before any await, so a concurrent second call sees it
      try {
        // awaited: a proxied callback has its own message channel, so an unawaited event could arrive after the reply
        const emit = async (e: TrainEvent) => void (await onEvent(e));
        return await trainRun(req, run, emit, deps);
      } finally {
        active = null;
        reg.done();
        if (run.store) {
          pastRuns.delete(run.id);
          pastRuns.set(run.id, run.store);
          while (pastRuns.size > KEEP_PAST_RUNS) pastRuns.delete(pastRuns.keys().next().value!);
        }
      }
    },

    async pauseTraining(callId) {
      runOf(callId, 'pauseTraining').paused = true;
    },

    async resumeTraining(callId) {
      const run = runOf(callId, 'resumeTraining');
      run.paused = false;
      run.wake?.();
    },

    // `${runId}/best`: the run's best held-out checkpoint (TrainRequest.heldOut), else its latest
    async checkpointFiles(which) {
      const [runId, folder] = which.endsWith(`/${BEST_DIR}`) ? [which.slice(0, -BEST_DIR.length - 1), BEST_DIR] : [which, '.'];
      const store = active?.run.id === runId ? active.run.store : pastRuns.get(runId);
      if (!store)
        throw new InvalidArgument(
          `checkpointFiles: no run ${runId} in this worker (only the last ${KEEP_PAST_RUNS} runs are kept); train first`,
        );
      const { latestCheckpoint } = await import('../src/train');
      const { dir } = await latestCheckpoint(store, folder);
      const files: Record<string, Uint8Array> = {};
      const prefix = dir && dir !== '.' ? `${dir}/` : '';
      const state = JSON.parse(new TextDecoder().decode(await store.read(`${prefix}trainer_state.json`))) as { files: string[] };
      for (const name of state.files) files[name] = await store.read(prefix + name);
      return transfer(files, Object.values(files).map((b) => b.buffer as ArrayBuffer));
    },
  };
}
