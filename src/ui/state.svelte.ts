/** Page-wide state the views share: the engine's health, the per-role checkpoint choice of Ask, Ask's history. */
import { FAULTS } from './engine';
import { errorParts } from './services';

export interface Problem {
  name: string;
  message: string;
}

export const engineHealth = $state({ lost: null as Problem | null, restarts: 0 });

/** Names of errors that mean the engine (worker or GPU device) is gone: replaced already (EngineRestarted), or to reload. */
const FATAL = new Set(['DeviceLost', 'EngineRestarted']);

/**
 * The engine replaced its worker (src/ui/engine.ts onRestart): flagged page-wide, so that every view shows what
 * happened. A reload the user asked for is not news.
 */
export function noteRestart(reason: string, fault: string) {
  if (fault === FAULTS.requested) return;
  engineHealth.restarts++;
  engineHealth.lost = { name: 'EngineRestarted', message: reason };
}

/** The error as a Problem; a lost device or dead worker is also flagged page-wide. */
export function problem(e: unknown): Problem {
  const p = errorParts(e);
  if (FATAL.has(p.name)) engineHealth.lost = p;
  return p;
}

/** Ask's checkpoint choice: per role 'released' or a checkpoint id; 'outer' likewise for the outer links. */
export const askChoice = $state({ byRole: {} as Record<string, string> });

/** One question asked in the Ask view and what each mode answered (or why it did not). */
export interface AskedQuestion {
  /** When it was asked, in ms since the epoch. */
  at: number;
  question: string;
  /** The style as Ask's picker names it. */
  style: string;
  /** Rounds, latent steps, sampling and device, in words. */
  setup: string;
  /** The message ablation it was asked with, in words ('messages from: …', 'messages zeroed'); absent for none. */
  ablation?: string;
  answers: { mode: 'latent' | 'text'; answer: string; text: string; error: string | null }[];
}

/**
 * The page's questions and answers in Ask, oldest first, as upstream's demo chat keeps them: in memory for the
 * page's life (a reload or Clear empties it; never stored).
 */
export const askHistory = $state({ entries: [] as AskedQuestion[] });

const PREFS_KEY = 'rmas.prefs';

/** Backend choice for asking: 'auto' (WebGPU where there is an adapter) or 'cpu' (the tiny system without WebGPU). */
export const prefs = $state({ backend: storedBackend() });

/** Chooses the device the views run on ('cpu', or 'auto': WebGPU where there is an adapter) and keeps the choice. */
export function chooseBackend(backend: 'auto' | 'cpu'): void {
  prefs.backend = backend;
  savePrefs();
}

/** The backend choice survives a reload (localStorage); call after changing prefs.backend. */
export function savePrefs() {
  try {
    localStorage.setItem(PREFS_KEY, JSON.stringify({ backend: prefs.backend }));
  } catch {
    // storage disabled (private mode): the choice lasts for this page only
  }
}

function storedBackend(): 'auto' | 'cpu' {
  try {
    const v = (JSON.parse(localStorage.getItem(PREFS_KEY) ?? '{}') as { backend?: unknown }).backend;
    return v === 'cpu' ? 'cpu' : 'auto';
  } catch {
    return 'auto';
  }
}
