/** The page's handle on the engine worker, which owns the GPU device. */
import { type Remote, wrap } from 'comlink';
import type { EngineApi } from '../../workers/protocol';

export interface Engine {
  api: Remote<EngineApi>;
  stop(): void;
}

export function startEngine(): Engine {
  const worker = new Worker(new URL('../../workers/engine.worker.ts', import.meta.url), { type: 'module', name: 'engine' });
  return { api: wrap<EngineApi>(worker), stop: () => worker.terminate() };
}
