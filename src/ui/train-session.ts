/**
 * One training run of the Train view, from Start to its saved checkpoint: the train call through the engine worker,
 * its events (curve, speed, status), its checkpoints into the registry, Pause/Resume/Stop by the call's id, and what
 * happens when the engine is replaced under it: the run resumes from its last checkpoint on the new engine on its own
 * where train-faults.ts allows, else the view says what happened and what it offers. The view owns the settings and
 * builds the request; this module owns the sequence, and writes what the view shows into a state object the view
 * passes in (a `$state` proxy there, a plain object in tests).
 */
import { proxy } from 'comlink';
import type { TrainEvent, TrainRequest } from '../../workers/protocol';
import type { TrainPoint } from './curves';
import { faultOf } from './engine';
import type { Services } from './services';
import { problem, type Problem } from './state.svelte';
import { activeRun, stepsPerSec, type ActiveRun, type Trained } from './train';
import { noCheckpoint, notResumed, resumedText, resumesOnItsOwn, resumingText, type Recovery, type RunFault } from './train-faults';

export type TrainPhase = 'idle' | 'starting' | 'resuming' | 'running' | 'paused' | 'stopping' | 'saving';

/** What the view shows of the run. */
export interface TrainSessionState {
  phase: TrainPhase;
  /** The loss curve: one point per step reported (a resumed run goes on from its checkpoint's step). */
  points: TrainPoint[];
  /** Steps per second over the last steps, and the worker's estimate of the seconds left (NaN: none yet). */
  rate: number;
  eta: number;
  /** Samples, backend and dropped rows, from the run's start event. */
  startInfo: string;
  /** The last checkpoint saved to the registry, in words. */
  saved: string | null;
  /** What happened when the engine was replaced under the run: resumed (text only), or what it offers (train-faults.ts). */
  recovery: Recovery | null;
  error: Problem | null;
  /** The checkpoint the last run saved, offered to try, ask with and export (its best held-out step's, when it has one). */
  trained: Trained | null;
  /** Held-out scores during the run (TrainRequest.heldOut), the first before any step. */
  heldOut: HeldOutPoint[];
  /** The best of them so far: its step's links are the run's best checkpoint. */
  best: HeldOutPoint | null;
}

/** One held-out score: questions right of `total` with the links of `step` (0: the links the run started from). */
export interface HeldOutPoint {
  step: number;
  correct: number;
  total: number;
}

/** '38/40 (95.0%) at step 30'. */
export const heldOutWords = (p: HeldOutPoint): string =>
  `${p.correct}/${p.total} (${((100 * p.correct) / Math.max(1, p.total)).toFixed(1)}%) at step ${p.step}`;

export const idleSession = (): TrainSessionState => ({
  phase: 'idle',
  points: [],
  rate: NaN,
  eta: NaN,
  startInfo: '',
  saved: null,
  recovery: null,
  error: null,
  trained: null,
  heldOut: [],
  best: null,
});

/** What the run is of, as the view's pickers say now: read when a checkpoint is saved and when the run ends. */
export interface TrainTarget {
  style: string;
  loop: 'inner' | 'outer';
  role: string;
  /** Outer: the rounds and latent steps the run trains for (Trained keeps them for "compare before / after"). */
  rounds?: number;
  latentSteps?: number;
}

/** The checkpoint `id` of a run of `t`, as the view offers it. */
const trainedOf = (t: TrainTarget, id: string, name: string): Trained => ({
  id, name, loop: t.loop, ...(t.loop === 'inner' ? { role: t.role } : {}),
  ...(t.loop === 'outer' && t.rounds !== undefined ? { rounds: t.rounds } : {}),
  ...(t.loop === 'outer' && t.latentSteps !== undefined ? { latentSteps: t.latentSteps } : {}),
});

/**
 * One training run at a time across the page's tabs (they share the checkpoint store and the interrupted-run note): a
 * tab holds the lock while its run goes, and another tab neither starts a run nor takes that one for interrupted.
 */
export interface RunLock {
  /** The lock, held until the function returned is called; null while another tab holds it. */
  take(): Promise<(() => void) | null>;
  /** Whether some tab holds it now. */
  held(): Promise<boolean>;
}

/** The lock as a Web Lock (navigator.locks) named `name`; where there are none, every take succeeds. */
export function webLock(name = 'rmas-training'): RunLock {
  const locks = () => (typeof navigator !== 'undefined' ? navigator.locks : undefined);
  return {
    async take() {
      const l = locks();
      if (!l) return () => {};
      return new Promise<(() => void) | null>((resolve, reject) => {
        l.request(name, { ifAvailable: true }, (lock) => {
          if (!lock) return resolve(null);
          return new Promise<void>((done) => resolve(() => done())); // held until released
        }).catch(reject);
      });
    },
    async held() {
      const l = locks();
      return !!l && ((await l.query()).held ?? []).some((x) => x.name === name);
    },
  };
}

/** What a tab says when another holds the run lock. */
export const RUN_ELSEWHERE =
  'a training run is going in another tab of this page; wait for it to end or stop it there (the tabs share its checkpoints)';

export interface TrainSessionDeps {
  services: Pick<Services, 'engine' | 'checkpoints'>;
  target(): TrainTarget;
  /** The run ended with its final checkpoint saved (the view drops its start-from and resume-from choices). */
  onFinished?(): void;
  /** Where the active run's note lives, so that a reload offers to resume it (default: localStorage, train.ts). */
  notes?: Pick<typeof activeRun, 'write' | 'clear'>;
  /** ms, for steps per second (default performance.now). */
  now?(): number;
  /** A fresh id for each train call (default crypto.randomUUID). */
  callId?(): string;
  /** One run at a time across tabs (default webLock()). */
  lock?: RunLock;
}

export class TrainSession {
  /** The train call in flight: Pause, Resume and Stop name it. */
  private callId: string | null = null;
  /** The last run's request and note, which a resume after an engine fault repeats (same rows, its own settings). */
  private lastRun: { req: TrainRequest; note: ActiveRun } | null = null;
  private times: number[] = [];
  private readonly notes: Pick<typeof activeRun, 'write' | 'clear'>;
  private readonly now: () => number;
  private readonly newCallId: () => string;
  private readonly lock: RunLock;
  /** Releases the run lock while this session holds it. */
  private release: (() => void) | null = null;

  constructor(
    private readonly deps: TrainSessionDeps,
    readonly state: TrainSessionState = idleSession(),
  ) {
    this.notes = deps.notes ?? activeRun;
    this.now = deps.now ?? (() => performance.now());
    this.newCallId = deps.callId ?? (() => crypto.randomUUID());
    this.lock = deps.lock ?? webLock();
  }

  /** A run's call is in flight or the run is not over (Start and the recovery buttons wait). */
  get busy(): boolean {
    return this.callId !== null || this.state.phase !== 'idle';
  }

  /** A new run of the request `build` gives, under `note` (a fresh one, or the interrupted run's to continue exactly). */
  async start(note: ActiveRun, build: () => Promise<TrainRequest>): Promise<void> {
    if (this.busy) return;
    await this.locked(() => this.run(note, build));
  }

  /** `body` under the run lock; while another tab holds it, nothing runs and the error says so. */
  private async locked(body: () => Promise<void>): Promise<void> {
    // the last run's words go now, not after the lock is had (a status read meanwhile would be the old run's)
    const s = this.state;
    const was = s.phase;
    [s.phase, s.saved, s.error] = ['starting', null, null];
    const release = await this.lock.take();
    if (!release) {
      [s.phase, s.error] = [was, { name: 'InvalidArgument', message: RUN_ELSEWHERE }];
      return;
    }
    s.phase = was; // run() sets its own
    this.release = release;
    try {
      await body();
    } finally {
      this.dispose();
    }
  }

  /** Lets go of the run lock (the run has ended, or its view is going away with the page). */
  dispose(): void {
    this.release?.();
    this.release = null;
  }

  /** The last run resumed from its last checkpoint on the current engine (Recovery's one click). */
  async resumeLast(): Promise<void> {
    const last = this.lastRun;
    if (!last?.note.runId || this.busy) return;
    await this.locked(() => this.run(last.note, async () => ({ ...last.req, resume: { runId: last.note.runId! } }), true));
  }

  /** Stop cancels the train call: the run ends after its current step, and train() still resolves with its checkpoint. */
  async control(what: 'pause' | 'resume' | 'stop'): Promise<void> {
    const id = this.callId;
    if (!id) return;
    if (what === 'stop') this.state.phase = 'stopping';
    const api = this.deps.services.engine.api();
    try {
      await (what === 'pause' ? api.pauseTraining(id) : what === 'resume' ? api.resumeTraining(id) : api.cancel(id));
    } catch (e) {
      this.state.error = problem(e);
    }
  }

  /** The phase now (the run's events change it while run() awaits: no narrowing from run()'s own assignments). */
  private phase(): TrainPhase {
    return this.state.phase;
  }

  /** Runs the request `build` gives to its end, resuming it after engine faults where train-faults.ts allows. */
  private async run(note: ActiveRun, build: () => Promise<TrainRequest>, keepCurve = false): Promise<void> {
    const s = this.state;
    s.error = null;
    s.saved = null;
    s.trained = null;
    s.recovery = null;
    if (!keepCurve) {
      // a run resumed from its note (after a reload) draws the curve it had up to its checkpoint
      s.points = note.runId && note.points ? note.points.map((p) => ({ ...p })) : [];
      s.heldOut = [];
      s.best = null;
    }
    this.times = [];
    s.rate = s.eta = NaN;
    s.phase = keepCurve ? 'resuming' : 'starting';
    /** The newest checkpoint the worker reported saved (in its IndexedDB store), and the one an automatic resume used. */
    let checkpoint: number | null = null;
    let autoFrom: number | null | undefined;
    let fault: RunFault | null = null;
    let wasPaused = false;
    try {
      const first = await build();
      this.lastRun = { req: first, note };
      let req = first;
      for (;;) {
        const id = this.newCallId();
        this.callId = id;
        const holdPaused = wasPaused; // paused when the engine was lost: the resumed run holds too
        let saving = Promise.resolve();
        let runId: string | null = null;
        const current = () => this.callId === id;
        const onEvent = (e: TrainEvent) => {
          if (!current()) return; // a late event of a worker already replaced
          if (e.type === 'start') {
            runId = e.runId;
            note.runId = e.runId;
            s.phase = 'running';
            const dropped = Object.entries(e.dropped).map(([k, n]) => `${n} ${k}`).join(', ');
            s.startInfo = `${e.samples} samples on ${e.backend}${dropped ? `; dropped ${dropped}` : ''}${e.reason ? ` (${e.reason})` : ''}`;
            if (e.resumedFrom !== undefined) {
              const from = e.resumedFrom;
              checkpoint = from;
              s.points = s.points.filter((p) => p.step <= from); // the curve goes on from the checkpoint
              s.heldOut = s.heldOut.filter((p) => p.step < from); // the resumed run scores its start again
              const text = fault ? resumedText(fault, from) : `Resumed from its checkpoint at step ${from}.`;
              s.recovery = { text, detail: fault?.reason ?? '', offerResume: false, offerStartAgain: false };
              if (autoFrom !== undefined) autoFrom = from;
            }
            this.notes.write(note);
            if (holdPaused) void this.deps.services.engine.api().pauseTraining(id).catch(() => {});
          } else if (e.type === 'step') {
            s.points.push({ step: e.step, loss: e.loss, lr: e.lr, gradNorm: e.gradNorm });
            // the note keeps the whole curve so far: a reload's resume goes on from the worker's newest checkpoint,
            // which can be newer than the one the note names (the registry's copy lags the worker's save)
            if (note.runId) {
              note.points = s.points.map((p) => ({ ...p }));
              this.notes.write(note);
            }
            this.times.push(this.now());
            s.rate = stepsPerSec(this.times);
            s.eta = e.etaSec;
          } else if (e.type === 'saved' && runId) {
            if (!e.final) checkpoint = e.step;
            const r = runId;
            // a save that the engine's replacement cut short is made again by the resumed run's next checkpoint
            saving = saving.then(() => this.save(r, e.step, e.final, note)).catch((err) => {
              if (current() && !faultOf(err)) s.error = problem(err);
            });
          } else if (e.type === 'heldOut') {
            const p = { step: e.step, correct: e.correct, total: e.total };
            s.heldOut.push(p);
            if (e.best) s.best = p;
          } else if (e.type === 'done' && e.best) s.best = { ...e.best };
          else if (e.type === 'paused') s.phase = 'paused';
          else if (e.type === 'resumed') s.phase = 'running';
        };
        try {
          const res = await this.deps.services.engine.api().train(req, proxy(onEvent), { callId: id });
          s.phase = 'saving';
          await saving;
          if (!note.checkpointId) await this.save(res.runId, res.steps, true, note); // a worker that sent no final 'saved'
          s.trained = trainedOf(this.deps.target(), note.checkpointId!, note.name);
          // the best held-out step, when it is neither the last nor the links the run started from, is kept beside the
          // last and is what the view offers
          const best = s.best;
          if (best && best.step !== res.steps && best.step > 0) s.trained = await this.saveBest(res.runId, best, note);
          else if (best?.step === 0) s.saved = `${s.saved ?? ''}; the links it started from scored best (${heldOutWords(best)})`;
          this.notes.clear();
          this.deps.onFinished?.();
          return;
        } catch (e) {
          const what = faultOf(e);
          const saveSteps = first.options.saveSteps ?? 0;
          if (fault && !what && (e as Error | null)?.name === 'MissingCheckpoint') {
            s.recovery = noCheckpoint(fault, saveSteps); // the worker found no complete checkpoint of the run
            return;
          }
          if (!what) throw e;
          fault = {
            fault: what,
            reason: (e as Error).message,
            afterStep: s.points.at(-1)?.step ?? 0,
            checkpoint,
            runId: note.runId ?? null,
            stopping: this.phase() === 'stopping',
          };
          if (!fault.runId) {
            s.recovery = noCheckpoint(fault, saveSteps);
            return;
          }
          if (!resumesOnItsOwn(fault, autoFrom)) {
            s.recovery = fault.stopping || checkpoint !== null ? notResumed(fault) : noCheckpoint(fault, saveSteps);
            return;
          }
          autoFrom = checkpoint;
          s.recovery = { text: resumingText(fault), detail: fault.reason, offerResume: false, offerStartAgain: false };
          wasPaused = this.phase() === 'paused';
          s.phase = 'resuming';
          req = { ...first, resume: { runId: fault.runId } };
        }
      }
    } catch (e) {
      s.error = problem(e);
    } finally {
      this.callId = null;
      s.phase = 'idle';
    }
  }

  /** The run's best held-out checkpoint into the registry beside its last, named by its step. */
  private async saveBest(runId: string, best: HeldOutPoint, note: ActiveRun): Promise<Trained> {
    const reg = await this.deps.services.checkpoints();
    const files = await this.deps.services.engine.api().checkpointFiles(`${runId}/best`);
    const { style, loop, role } = this.deps.target();
    const name = `${note.name} (best, step ${best.step})`;
    const info = await reg.saveFromFiles(files, { name, kind: loop, style, role: loop === 'inner' ? role : undefined, step: best.step });
    this.state.saved = `saved “${note.name}” at step ${note.step ?? '—'} and its best held-out score, ${heldOutWords(best)}, as “${name}”`;
    return trainedOf(this.deps.target(), info.id, name);
  }

  /** The run's checkpoint `id` (its worker run id) at `step` into the registry, replacing the run's previous one. */
  private async save(id: string, step: number, final: boolean, note: ActiveRun): Promise<void> {
    const reg = await this.deps.services.checkpoints();
    const files = await this.deps.services.engine.api().checkpointFiles(id);
    const { style, loop, role } = this.deps.target();
    const info = await reg.saveFromFiles(files, {
      name: `${note.name}${final ? '' : ` (step ${step})`}`,
      kind: loop,
      style,
      role: loop === 'inner' ? role : undefined,
      step,
    });
    const newId = info.id;
    // the new checkpoint is written before the run's previous one is removed
    if (note.checkpointId && newId && note.checkpointId !== newId) await reg.remove(note.checkpointId).catch(() => {});
    note.checkpointId = newId;
    note.step = step;
    if (!final) this.notes.write(note);
    this.state.saved = `saved “${note.name}” at step ${step}${final ? '' : ' (intermediate)'}`;
  }
}
