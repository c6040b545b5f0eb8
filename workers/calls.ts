/**
 * The one way the engine worker cancels a long call (loadSystem, ask, evaluate, train): each registers the
 * callId the page gave it and gets an AbortSignal, and EngineApi.cancel(callId) aborts that signal. What an
 * abort means is the call's: the system calls stop at once, a training run after its current step.
 */
import { InvalidArgument } from '../src/errors';
import type { EngineApi } from './protocol';

export interface Calls {
  /** A call in flight under `callId` (none: it cannot be cancelled); `done` frees the id when the call settles. */
  register(callId: string | undefined): { signal: AbortSignal; done(): void };
  cancel: EngineApi['cancel'];
}

export function callRegistry(): Calls {
  const controllers = new Map<string, AbortController>();
  const cancelledEarly = new Set<string>();
  return {
    register(callId) {
      const ctl = new AbortController();
      if (callId !== undefined) {
        if (controllers.has(callId)) throw new InvalidArgument(`call id ${callId} is already in use; give each long call its own id`);
        controllers.set(callId, ctl);
        if (cancelledEarly.delete(callId)) ctl.abort();
      }
      return { signal: ctl.signal, done: () => void (callId !== undefined && controllers.delete(callId)) };
    },
    async cancel(callId) {
      const ctl = controllers.get(callId);
      if (ctl) ctl.abort();
      else cancelledEarly.add(callId); // the call may not have arrived yet
    },
  };
}
