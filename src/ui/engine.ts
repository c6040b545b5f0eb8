/**
 * The page's handle on the engine worker, which owns the GPU device. A worker that dies (an 'error' event,
 * or no answer to a ping within the timeout) is replaced by a fresh one; calls in flight on the dead one
 * reject with an EngineRestarted error, and `onRestart(reason)` says what happened.
 */
import { type Remote, wrap } from 'comlink';
import type { EngineApi } from '../../workers/protocol';
import { EngineRestarted } from '../errors';

export interface Engine {
  /** Always the current worker's API (a restart swaps it underneath). */
  readonly api: Remote<EngineApi>;
  stop(): void;
  /** Replaces the worker now (e.g. after a lost device), as a detected death does. */
  restart(reason: string): void;
}

export interface EngineOptions {
  onRestart?: (reason: string) => void;
  /** Ping period, ms (0 disables the watchdog). Default 5000. */
  pingIntervalMs?: number;
  /** A ping unanswered this long means the worker is dead. Default 60000: a CPU-backend step can hold the worker's thread for a while. */
  pingTimeoutMs?: number;
}

export function startEngine(opts: EngineOptions = {}): Engine {
  let worker!: Worker;
  let remote!: Remote<EngineApi>;
  let died!: Promise<never>;
  let kill!: (e: Error) => void;
  let stopped = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  let lastPong = Date.now();

  const spawn = () => {
    worker = new Worker(new URL('../../workers/engine.worker.ts', import.meta.url), { type: 'module', name: 'engine' });
    remote = wrap<EngineApi>(worker);
    died = new Promise<never>((_, reject) => (kill = reject));
    died.catch(() => {}); // only calls in flight observe it
    worker.addEventListener('error', (e) =>
      restart(`the engine worker crashed (${e.message || 'error event'}); it was restarted, and loaded systems must be loaded again`),
    );
    lastPong = Date.now();
  };

  const restart = (reason: string) => {
    if (stopped) return;
    kill(new EngineRestarted(reason));
    worker.terminate();
    spawn();
    opts.onRestart?.(reason);
  };

  spawn();
  const every = opts.pingIntervalMs ?? 5000;
  const limit = opts.pingTimeoutMs ?? 60_000;
  if (every > 0) {
    let inFlight = false;
    timer = setInterval(() => {
      if (Date.now() - lastPong > limit) {
        restart(`the engine worker did not answer for ${Math.round(limit / 1000)} s; it was restarted`);
        return;
      }
      if (inFlight) return;
      inFlight = true;
      const w = worker;
      remote.ping().then(() => { if (w === worker) lastPong = Date.now(); }, () => {}).finally(() => (inFlight = false));
    }, every);
  }

  // calls go to the current worker and reject if it dies before they settle
  const api = new Proxy({} as Remote<EngineApi>, {
    get(_t, name) {
      if (name === 'then' || typeof name === 'symbol') return undefined;
      return (...args: unknown[]) => {
        const fn = (remote as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[name];
        return Promise.race([fn(...args), died]);
      };
    },
  });

  return {
    get api() {
      return api;
    },
    stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      worker.terminate();
    },
    restart,
  };
}
