/**
 * The page's handle on the engine worker, which owns the GPU device. A worker that dies (an 'error' event, or no
 * answer to a ping within the timeout) or whose GPU device is lost (its notice, or a call rejecting with
 * DeviceLost) is replaced by a fresh one; calls in flight on the old one reject with an EngineRestarted error
 * whose `fault` (faultOf) says what happened, and `onRestart(reason, fault)` tells the page.
 */
import { type Remote, wrap } from 'comlink';
import { type EngineApi, isDeviceLostNotice } from '../../workers/protocol';
import { EngineRestarted } from '../errors';

/** What replaced the worker, as a phrase the views put into their own sentences. */
export const FAULTS = {
  deviceLost: 'the GPU device was lost',
  crashed: 'the engine worker crashed',
  unresponsive: 'the engine worker stopped answering',
  requested: 'the engine was reloaded on request',
} as const;

/** The fault an EngineRestarted error of startEngine carries (a FAULTS phrase), or null for any other error. */
export function faultOf(e: unknown): string | null {
  if (!(e instanceof EngineRestarted)) return null;
  return (e as EngineRestarted & { fault?: string }).fault ?? e.message;
}

export interface Engine {
  /** Always the current worker's API (a restart swaps it underneath). */
  readonly api: Remote<EngineApi>;
  stop(): void;
  /** Replaces the worker now (e.g. on request), as a detected death does; `fault` defaults to the reason. */
  restart(reason: string, fault?: string): void;
}

export interface EngineOptions {
  onRestart?: (reason: string, fault: string) => void;
  /** Ping period, ms (0 disables the watchdog). Default 5000. */
  pingIntervalMs?: number;
  /** A ping unanswered this long means the worker is dead. Default 60000: a CPU-backend step can hold the worker's thread for a while. */
  pingTimeoutMs?: number;
}

/** One worker and what its calls race against. */
interface Generation {
  worker: Worker;
  remote: Remote<EngineApi>;
  died: Promise<never>;
  kill: (e: Error) => void;
}

export function startEngine(opts: EngineOptions = {}): Engine {
  let gen!: Generation;
  let stopped = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  let lastPong = Date.now();

  const spawn = () => {
    const worker = new Worker(new URL('../../workers/engine.worker.ts', import.meta.url), { type: 'module', name: 'engine' });
    let kill!: (e: Error) => void;
    const died = new Promise<never>((_, reject) => (kill = reject));
    died.catch(() => {}); // only calls in flight observe it
    const g: Generation = { worker, remote: wrap<EngineApi>(worker), died, kill };
    worker.addEventListener('error', (e) => {
      if (g === gen) restart(`${FAULTS.crashed} (${e.message || 'error event'}); a new one was started`, FAULTS.crashed);
    });
    // the worker says when its GPU device is lost: everything on it (loaded systems, a training run) is gone
    worker.addEventListener('message', (e: MessageEvent) => {
      if (g === gen && isDeviceLostNotice(e.data)) restart(deviceLostReason(e.data.detail), FAULTS.deviceLost);
    });
    gen = g;
    lastPong = Date.now();
  };

  const restart = (reason: string, fault = reason) => {
    if (stopped) return;
    gen.kill(Object.assign(new EngineRestarted(reason), { fault }));
    gen.worker.terminate();
    spawn();
    opts.onRestart?.(reason, fault);
  };

  spawn();
  const every = opts.pingIntervalMs ?? 5000;
  const limit = opts.pingTimeoutMs ?? 60_000;
  if (every > 0) {
    let inFlight = false;
    timer = setInterval(() => {
      if (Date.now() - lastPong > limit) {
        restart(`${FAULTS.unresponsive}: no answer for ${Math.round(limit / 1000)} s; a new one was started`, FAULTS.unresponsive);
        return;
      }
      if (inFlight) return;
      inFlight = true;
      const g = gen;
      g.remote.ping().then(() => { if (g === gen) lastPong = Date.now(); }, () => {}).finally(() => (inFlight = false));
    }, every);
  }

  // calls go to the current worker and reject if it dies before they settle
  const api = new Proxy({} as Remote<EngineApi>, {
    get(_t, name) {
      if (name === 'then' || typeof name === 'symbol') return undefined;
      return (...args: unknown[]) => {
        const g = gen;
        const fn = (g.remote as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>)[name];
        return Promise.race([fn(...args), g.died]).catch((e: unknown) => {
          // a lost device the worker's notice has not reported yet: replaced as the notice would have it
          if (g === gen && !stopped && (e as Error | null)?.name === 'DeviceLost') {
            restart(deviceLostReason(lossDetail((e as Error).message)), FAULTS.deviceLost);
            return g.died;
          }
          throw e;
        });
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
      gen.worker.terminate();
    },
    restart,
  };
}

const deviceLostReason = (detail: string) => `${FAULTS.deviceLost} (${detail}); a new engine worker was started`;

/** DeviceLost's 'the GPU device was lost (destroyed: Device was destroyed.). Everything …' → 'destroyed: Device was destroyed.' */
function lossDetail(message: string): string {
  const m = /\((.*?)\)\./.exec(message);
  return m ? m[1]! : message;
}
