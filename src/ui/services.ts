/**
 * What the views need from the world (engine worker, checkpoint registry, model cache, browser storage),
 * behind one small interface so that component tests can hand them fakes. `realServices` wires the
 * real ones; the store modules load lazily so that the page still starts when one of them fails.
 */
import { type Remote } from 'comlink';
import type { EngineApi } from '../../workers/protocol';
import { FAULTS, startEngine } from './engine';

export type EngineRemote = Remote<EngineApi>;

// the registry's own types (type-only: the module itself loads lazily, below)
export type { CheckpointInfo, CheckpointMeta, CheckpointRegistry } from '../store/checkpoint-registry';
import type { CheckpointRegistry } from '../store/checkpoint-registry';

export interface CachedModel {
  url: string;
  /** Bytes stored (all of them when complete). */
  bytes: number;
  complete?: boolean;
}

export interface ModelCache {
  list(): Promise<CachedModel[]>;
  remove(url: string): Promise<void>;
  usage(): Promise<{ usage: number; quota: number; persisted?: boolean }>;
  persist(): Promise<boolean>;
}

/** The engine worker as the views see it: the current remote (it changes when the engine restarts). */
export interface EngineHandle {
  api(): EngineRemote;
  restart(): void;
  stop(): void;
}

export interface Services {
  engine: EngineHandle;
  checkpoints(): Promise<CheckpointRegistry>;
  models(): Promise<ModelCache>;
}

/** The engine handle over the real worker; a restart (asked for, or after the worker or its device was lost) calls `onRestart`. */
export function realEngine(onRestart?: (reason: string, fault: string) => void): EngineHandle {
  const engine = startEngine({ onRestart });
  return {
    api: () => engine.api,
    restart: () => engine.restart(FAULTS.requested),
    stop: () => engine.stop(),
  };
}

// import.meta.glob resolves at build time, so a store module that is missing or broken fails only the
// view that needs it (with its error shown there), not the whole page.
const storeModules = import.meta.glob('../store/{checkpoint-registry,models}.ts');

async function loadStore<T>(name: 'checkpoint-registry' | 'models'): Promise<T> {
  const load = storeModules[`../store/${name}.ts`];
  if (!load) throw Object.assign(new Error(`this build has no src/store/${name}.ts; rebuild the app`), { name: 'MissingModule' });
  return (await load()) as T;
}

export function realServices(onRestart?: (reason: string, fault: string) => void): Services {
  return {
    engine: realEngine(onRestart),
    // typed by the store modules themselves, so that a change of their signatures fails the type check here
    checkpoints: async (): Promise<CheckpointRegistry> =>
      (await loadStore<typeof import('../store/checkpoint-registry')>('checkpoint-registry')).checkpoints(),
    models: async (): Promise<ModelCache> => (await loadStore<typeof import('../store/models')>('models')).modelCache(),
  };
}

// ------------------------------------------------------------------------------------- small helpers

/** 1536 → "1.5 KiB"; binary units, three significant figures. */
export function formatBytes(b: number): string {
  if (!Number.isFinite(b) || b < 0) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) {
    b /= 1024;
    i++;
  }
  return i === 0 ? `${b} B` : `${b >= 100 ? b.toFixed(0) : b.toPrecision(3)} ${units[i]}`;
}

/** An error as the user sees it: its name and message. */
export function errorParts(e: unknown): { name: string; message: string } {
  if (e instanceof Error || (typeof e === 'object' && e !== null && 'message' in e)) {
    const err = e as { name?: string; message: string };
    return { name: err.name || 'Error', message: String(err.message) };
  }
  return { name: 'Error', message: String(e) };
}

/** Starts a browser download of `bytes` as `fileName` through a Blob URL. */
export function downloadBytes(bytes: Uint8Array, fileName: string, type = 'application/zip'): void {
  const url = URL.createObjectURL(new Blob([bytes as BlobPart], { type }));
  const a = Object.assign(document.createElement('a'), { href: url, download: fileName });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
