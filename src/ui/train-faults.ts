/**
 * What the Train view does when the engine is replaced under a run (src/ui/engine.ts: a lost GPU device, a crashed
 * or silent worker, a reload on request): it resumes the run from its last checkpoint on the new engine on its own
 * (the worker's resume is exact: links, AdamW moments, data order and Rng from IndexedDB), or says why not and offers
 * one click. On its own at most once per checkpoint: a fault that comes back before a newer checkpoint (a step that
 * resets the GPU every time) would otherwise loop; a reload the user asked for, or a run being stopped, is not
 * resumed without asking either.
 */
import { FAULTS } from './engine';

/** The run as the page knew it when the engine was replaced under it. */
export interface RunFault {
  /** What happened: a FAULTS phrase of engine.ts. */
  fault: string;
  /** The EngineRestarted message, with the details (the browser's words). */
  reason: string;
  /** The last step the run reported (0: none). */
  afterStep: number;
  /** The step of the newest checkpoint the run reported saved, or null. */
  checkpoint: number | null;
  /** The run's id; null when the engine was lost before the run started. */
  runId: string | null;
  /** Stop had been pressed. */
  stopping: boolean;
}

/** What the view shows after a fault it does not resume from on its own, and what it offers. */
export interface Recovery {
  text: string;
  /** The EngineRestarted message. */
  detail: string;
  /** One click resumes the run from its last checkpoint. */
  offerResume: boolean;
  offerStartAgain: boolean;
}

/**
 * The run resumes without asking: it has an id, Stop was not pressed, the user did not reload the engine, and
 * no automatic resume of it started from this checkpoint before (`autoFrom`: the checkpoint step the last one
 * started from; undefined: none yet).
 */
export function resumesOnItsOwn(f: RunFault, autoFrom: number | null | undefined): boolean {
  if (!f.runId || f.stopping || f.fault === FAULTS.requested) return false;
  return autoFrom === undefined || (f.checkpoint !== null && f.checkpoint !== autoFrom);
}

const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
const head = (f: RunFault, again = false) =>
  `${cap(f.fault)}${again ? ' again' : ''} ${f.afterStep ? `after step ${f.afterStep}` : "before the run's first step"}`;

/** While the resumed run starts. */
export const resumingText = (f: RunFault): string => `${head(f)}; resuming the run from its last checkpoint on a new engine…`;

/** Once the resumed run started from the checkpoint at step `from`. */
export const resumedText = (f: RunFault, from: number): string =>
  `${head(f)}; the run resumed from its checkpoint at step ${from} on a new engine.`;

/** The run has no checkpoint to resume from (none reported, or the worker found none): start again. */
export function noCheckpoint(f: RunFault, saveSteps: number): Recovery {
  const every = saveSteps > 0 ? `one every ${saveSteps} steps` : 'it saves only at the end';
  const text = f.afterStep
    ? `${head(f)}, before the run's first checkpoint (${every}), so there is nothing to resume from.`
    : `${head(f)}, so there is nothing to resume from.`;
  return { text, detail: f.reason, offerResume: false, offerStartAgain: true };
}

/** A fault the run is not resumed from on its own (resumesOnItsOwn false, with a run id). */
export function notResumed(f: RunFault): Recovery {
  const last = f.checkpoint !== null ? ` Its last checkpoint is at step ${f.checkpoint}.` : '';
  const text =
    f.stopping || f.fault === FAULTS.requested
      ? `${head(f)}${f.stopping ? ', while the run was stopping' : ''}.${last}`
      : `${head(f, true)}, before a checkpoint newer than step ${f.checkpoint}: not resumed on its own, since the fault ` +
        'may come back at the same point.';
  return { text, detail: f.reason, offerResume: true, offerStartAgain: true };
}
