/** The Train view's plain parts: dataset preview and usable count, speed, and the note an interrupted run leaves. */
import { STYLES, type StyleName } from '../mas/styles';
import type { TrainPoint } from './curves';
import { TRAIN_DEFAULTS } from '../train/defaults';
import { roleExample } from '../train/data/roles';
import { parseJsonlRows, parseJsonRows, type Row } from '../train/data/rows';
import { offlineTask, registryStyle } from './offline';

/** Rows of an uploaded file: JSONL by extension (or when the text is not one JSON document), else JSON (optionally under `field`). */
export function parseUpload(text: string, fileName: string, field?: string): Row[] {
  if (/\.jsonl$/i.test(fileName)) return parseJsonlRows(text, fileName);
  return parseJsonRows(text, fileName, field || undefined);
}

/** Rows that give a training example for `role` of `style` (a registry style, or 'tiny': the offline system's). */
export function usableRows(rows: readonly Row[], style: string, role: string): number {
  const spec = STYLES[registryStyle(style) as StyleName];
  if (!spec) return 0;
  const roles = role ? [role] : spec.roles.map((r) => r.key);
  return rows.filter((r) => roles.every((ro) => {
    try {
      return !('skip' in roleExample(spec.shape, ro, r));
    } catch {
      return false;
    }
  })).length;
}

/** Columns of the first `n` rows, in first-seen order, and their cells as short text. */
export function preview(rows: readonly Row[], n = 5, width = 80): { columns: string[]; cells: string[][] } {
  const head = rows.slice(0, n);
  const columns = [...new Set(head.flatMap((r) => Object.keys(r)))];
  const short = (v: unknown) => {
    const s = v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v);
    return s.length > width ? `${s.slice(0, width - 1)}…` : s;
  };
  return { columns, cells: head.map((r) => columns.map((c) => short(r[c]))) };
}

/** Steps per second over the last `window` step times (ms). */
export function stepsPerSec(times: readonly number[], window = 10): number {
  const t = times.slice(-window - 1);
  if (t.length < 2) return NaN;
  return ((t.length - 1) * 1000) / (t[t.length - 1]! - t[0]!);
}

/** '1 h 02 min', '3 min 05 s', '12 s'. */
export function duration(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return '—';
  const s = Math.round(sec);
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${s} s`;
}

/** What an active run writes to localStorage, so that a reload can offer to go on from its last checkpoint. */
export interface ActiveRun {
  name: string;
  style: string;
  loop: 'inner' | 'outer';
  role?: string;
  maxSteps: number;
  startedAt: number;
  step?: number;
  checkpointId?: string;
  /** The worker's run id: its checkpoints (with trainer state and AdamW moments) stay in IndexedDB, so the run can resume exactly. */
  runId?: string;
  /** Where its rows came from (TINY_SOURCE: the built-in split, which a reload has again; else a file to give again). */
  source?: string;
  /** The loss curve so far, so that a resume after a reload draws the run whole up to the checkpoint it goes on from. */
  points?: TrainPoint[];
  /** The view's settings it was started with (steps, batch, save every, …, held-out questions), shown again when it resumes. */
  settings?: Record<string, number | string | boolean>;
}

/** The interrupted run can resume exactly (it reached a checkpoint the worker keeps under its run id). */
export const canResume = (r: ActiveRun): boolean => !!r.runId && !!r.step && r.step < r.maxSteps;

const KEY = 'rmas.train.active';

export const activeRun = {
  read(): ActiveRun | null {
    try {
      const v = JSON.parse(localStorage.getItem(KEY) ?? 'null') as ActiveRun | null;
      return v && typeof v.name === 'string' ? v : null;
    } catch {
      return null;
    }
  },
  write(r: ActiveRun): void {
    localStorage.setItem(KEY, JSON.stringify(r));
  },
  clear(): void {
    localStorage.removeItem(KEY);
  },
};

/**
 * An offline system's test split (default: the first view's) as benchmark rows (question and answer), read as plain
 * math; the first `n` when given.
 */
export function tinyTestRows(n?: number, style?: string): { question: string; answer: string }[] {
  return offlineTask(style).split('test').slice(0, n).map((r) => ({ question: r.question, answer: String(r.answer_value) }));
}

/** Where the Train view says its rows come from when they are the offline system's training split. */
export const TINY_SOURCE = 'tiny task, training split (offline)';

/** The offline system's training split as training rows: its style's upstream columns, so every role finds its target. */
export function tinyTrainRows(style?: string): Row[] {
  const { columns, split } = offlineTask(style);
  return split('train').map((r) => Object.fromEntries(columns.map((c) => [c, r[c]])));
}

/**
 * Hyperparameters the Train view starts with. The tiny system's: a fine-tune of one of its links that finishes
 * in seconds (40 steps of 4 on the CPU backend: 9 s in Node on two busy cores) with a loss that visibly falls
 * (tiny_distillation's learner, from its shipped link on the training split: 0.39 over the first 5 steps, 0.20
 * over the last 10; its expert 0.41, then 0.24). Others: upstream's learning rate and batch, a short run.
 */
export const TINY_HP = { lr: 2e-3, batchSize: 4, maxSteps: 40, warmupSteps: 5, saveSteps: 20 } as const;

/**
 * The Train view's one-click run on the offline system (issue 37): an outer-loop fine-tune from the system's own outer
 * links at a setting where the shipped system loses accuracy, trained on the latents inference sends, scored up to
 * the learner's end-of-turn token, with held-out questions every few steps. models/tiny/README.md ("Fine-tunes that
 * help") has the figures measured with these settings through `rmas train-outer`, and test/train/fine-tune.test.ts
 * checks that they raise the held-out score.
 */
export const TINY_OUTER_HP = {
  lr: 1e-4, batchSize: 4, maxSteps: 40, warmupSteps: 4, saveSteps: 20, rounds: 3, maxLatentTokens: 4, scheduler: 'constant_with_warmup',
} as const;
export const TINY_OUTER_LOSS = { latents: 'rollout', superviseFinalOnly: false, nonLastLossWeight: 1, untilEos: true } as const;
/** Validation questions scored during the one-click run, how often, and the latent steps they are asked with. */
export const TINY_HELD_OUT = { questions: 200, every: 20, latentSteps: 4 } as const;

/** The offline task's validation split as held-out rows (question and answer), the first `n`. */
export function tinyValidationRows(n: number, style?: string): { question: string; answer: string }[] {
  return offlineTask(style).split('validation').slice(0, n).map((r) => ({ question: r.question, answer: String(r.answer_value) }));
}
export const UPSTREAM_HP = {
  lr: TRAIN_DEFAULTS.lr, batchSize: TRAIN_DEFAULTS.batchSize, maxSteps: 20, warmupSteps: TRAIN_DEFAULTS.warmupSteps, saveSteps: 10,
} as const;

/** A checkpoint a Train run saved, which the view offers to compare, ask with and export. */
export interface Trained {
  id: string;
  name: string;
  loop: 'inner' | 'outer';
  /** The role whose inner link was trained (inner loop). */
  role?: string;
  /** The rounds and latent steps it was trained and scored at (outer loop), which "compare before / after" uses. */
  rounds?: number;
  latentSteps?: number;
}
