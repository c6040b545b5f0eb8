/**
 * The Evaluate panel's comparison: one system asked the same questions in several configurations (the final agent
 * alone, text-MAS, RecursiveMAS, its messages shuffled or zeroed, over 1–3 rounds), as `npm run tiny:eval` builds
 * the README's table of the embedded tiny systems. Each configuration is one evaluation (EngineApi.evaluate); its row
 * grows question by question. Seconds per question are wall time: the time since the configuration's questions
 * began (after its system was ready) over the questions answered, so questions asked at once share it.
 */
import type { EvalRecordView, EvalRequest } from '../../workers/protocol';
import { STYLES, type StyleName } from '../mas/styles';
import { median } from '../util/stats';
import { registryStyle } from './offline';

export type CompareKind = 'alone' | 'text' | 'latent' | 'shuffled' | 'zeroed';

export interface CompareConfig {
  kind: CompareKind;
  /** Rounds (1 for the agent alone). */
  rounds: number;
}

/** The configurations of the README's table, in its order (`npm run tiny:eval`'s configs for tiny_distillation). */
export const README_CONFIGS: readonly CompareConfig[] = [
  { kind: 'alone', rounds: 1 },
  { kind: 'text', rounds: 1 },
  { kind: 'text', rounds: 3 },
  { kind: 'latent', rounds: 1 },
  { kind: 'latent', rounds: 2 },
  { kind: 'latent', rounds: 3 },
  { kind: 'shuffled', rounds: 1 },
  { kind: 'zeroed', rounds: 1 },
];

/** Every configuration the panel offers: the agent alone, then each kind over 1–3 rounds. */
export const ALL_CONFIGS: readonly CompareConfig[] = [
  { kind: 'alone', rounds: 1 },
  ...(['text', 'latent', 'shuffled', 'zeroed'] as const).flatMap((kind) => [1, 2, 3].map((rounds) => ({ kind, rounds }))),
];

/** A configuration's key, as tiny:eval names it: alone, text1, latent2, shuffled1, … */
export const configKey = (c: CompareConfig): string => (c.kind === 'alone' ? 'alone' : `${c.kind}${c.rounds}`);

/** The role that answers in a style chosen by the pickers ('tiny': the learner); 'final agent' for a style unknown here. */
export function finalRoleOf(style: string): string {
  const name = registryStyle(style);
  return Object.hasOwn(STYLES, name) ? STYLES[name as StyleName].decoder : 'final agent';
}

/** The table's label of a configuration (`npm run tiny:eval`'s words); `alone` names the final agent ('learner'). */
export function configLabel(c: CompareConfig, finalRole: string): string {
  if (c.kind === 'alone') return `${finalRole} alone`;
  const rounds = `${c.rounds} round${c.rounds === 1 ? '' : 's'}`;
  if (c.kind === 'text') return `text-MAS, ${rounds}`;
  if (c.kind === 'latent') return `RecursiveMAS, ${rounds}`;
  return `RecursiveMAS, ${rounds}, messages ${c.kind}`;
}

/** What an evaluation request carries for a configuration, beside the system, the questions and the sampling. */
export function configRequest(c: CompareConfig): Pick<EvalRequest, 'mode' | 'rounds' | 'alone' | 'messages'> {
  if (c.kind === 'alone') return { mode: 'text', rounds: 1, alone: true };
  if (c.kind === 'text' || c.kind === 'latent') return { mode: c.kind, rounds: c.rounds };
  return { mode: 'latent', rounds: c.rounds, messages: c.kind };
}

/** One configuration's row, as it grows. */
export interface CompareRow {
  key: string;
  label: string;
  config: CompareConfig;
  /** waiting its turn, loading (the system, before its first question), asking, done, stopped or failed. */
  state: 'waiting' | 'loading' | 'asking' | 'done' | 'stopped' | 'failed';
  /** Questions answered so far, of `total` (0 until the first answer says how many). */
  done: number;
  total: number;
  right: number;
  /** Generated tokens, summed over the questions answered. */
  tokens: number;
  /** Wall seconds since the configuration's questions began, at the last answer. */
  wallSeconds: number;
  /** Each answered question's wall seconds (from the previous answer, or from the start for the first). */
  questionSeconds: number[];
  /** The records as they came. */
  records: EvalRecordView[];
  error: string | null;
}

export const newRow = (config: CompareConfig, finalRole: string): CompareRow => ({
  key: configKey(config), label: configLabel(config, finalRole), config, state: 'waiting',
  done: 0, total: 0, right: 0, tokens: 0, wallSeconds: 0, questionSeconds: [], records: [], error: null,
});

/** `row` with one more question answered, `seconds` of wall time after its questions began. */
export function addRecord(row: CompareRow, record: EvalRecordView, total: number, seconds: number): void {
  row.records.push(record);
  row.done++;
  row.total = total;
  if (record.correct) row.right++;
  row.tokens += record.tokens;
  row.questionSeconds.push(seconds - row.wallSeconds);
  row.wallSeconds = seconds;
}

/**
 * A row's figures: accuracy (0–1) and generated tokens per question answered, and the median of its questions' wall
 * seconds (the configuration that runs first compiles the kernels in its first question: a mean would charge it
 * to that one); null before the first.
 */
export function rowFigures(row: CompareRow): { accuracy: number; tokens: number; seconds: number } | null {
  if (!row.done) return null;
  return { accuracy: row.right / row.done, tokens: row.tokens / row.done, seconds: median(row.questionSeconds) };
}

/** The rounds of the accuracy-by-rounds plot. */
export const PLOT_ROUNDS: readonly number[] = [1, 2, 3];

/** The plot's configurations: RecursiveMAS, then text-MAS, at each of PLOT_ROUNDS (tiny:eval's latent1–3, text1–3). */
export const ROUNDS_CONFIGS: readonly CompareConfig[] = (['latent', 'text'] as const).flatMap((kind) =>
  PLOT_ROUNDS.map((rounds) => ({ kind, rounds })),
);

/** What a system's eval.json (its tiny eval's --json) holds that the plot reads: per configuration, its answers scored. */
export interface RecordedEval {
  split: string;
  rows: number;
  latentSteps: number;
  backend?: string;
  results: { config: string; label: string; accuracy: number; tokens: number; seconds: number; ok: boolean[] }[];
}

/** One point of the plot: accuracy (0–1) at `rounds`, with generated tokens and seconds per question. */
export interface RoundsPoint {
  rounds: number;
  accuracy: number;
  right: number;
  questions: number;
  tokens: number;
  seconds: number;
}

export interface RoundsSeries {
  kind: 'latent' | 'text';
  /** live: asked in the tab now; recorded: eval.json's answers to the same questions. */
  source: 'live' | 'recorded';
  label: string;
  points: RoundsPoint[];
}

export interface RoundsPlotData {
  series: RoundsSeries[];
  /** The most a system of each round count can answer of the questions asked (a task with a ceiling), else empty. */
  ceiling: { rounds: number; value: number }[];
  /** Questions answered and to answer over the plot's live configurations (its progress bar). */
  done: number;
  total: number;
}

const KIND_LABEL = { latent: 'RecursiveMAS', text: 'text-MAS' } as const;

/**
 * The accuracy-by-rounds plot of a comparison: each live row of ROUNDS_CONFIGS as a point (as rowFigures has it); the
 * recorded eval's same configurations on the first `asked` questions of its split (the questions the live rows
 * ask), with its mean tokens and seconds per question over the split; and `ceiling(r)` per round count.
 */
export function roundsPlot(
  rows: readonly CompareRow[], recorded: RecordedEval | null, asked: number, ceiling: ((rounds: number) => number) | null,
): RoundsPlotData {
  const series: RoundsSeries[] = [];
  for (const kind of ['latent', 'text'] as const) {
    const live = PLOT_ROUNDS.flatMap((rounds) => {
      const row = rows.find((r) => r.config.kind === kind && r.config.rounds === rounds);
      const f = row && rowFigures(row);
      return row && f ? [{ rounds, ...f, right: row.right, questions: row.done }] : [];
    });
    if (live.length) series.push({ kind, source: 'live', label: KIND_LABEL[kind], points: live });
    if (!recorded || !rows.some((r) => r.config.kind === kind)) continue;
    const points = PLOT_ROUNDS.flatMap((rounds) => {
      const r = recorded.results.find((x) => x.config === `${kind}${rounds}`);
      if (!r) return [];
      const ok = r.ok.slice(0, asked);
      const right = ok.filter(Boolean).length;
      return ok.length ? [{ rounds, accuracy: right / ok.length, right, questions: ok.length, tokens: r.tokens, seconds: r.seconds }] : [];
    });
    if (points.length) series.push({ kind, source: 'recorded', label: `${KIND_LABEL[kind]}, recorded`, points });
  }
  const plotted = rows.filter((r) => ROUNDS_CONFIGS.some((c) => configKey(c) === r.key));
  return {
    series,
    ceiling: ceiling ? PLOT_ROUNDS.map((rounds) => ({ rounds, value: ceiling(rounds) })) : [],
    done: plotted.reduce((a, r) => a + r.done, 0),
    total: plotted.reduce((a, r) => a + (r.total || asked), 0),
  };
}

/** Whether a comparison has a curve to plot: one kind of ROUNDS_CONFIGS at two round counts or more. */
export const hasRounds = (rows: readonly CompareRow[]): boolean =>
  (['latent', 'text'] as const).some((k) => new Set(rows.filter((r) => r.config.kind === k).map((r) => r.config.rounds)).size > 1);

/** An offline system's recorded eval (`path`, relative to the app at `base`), or null where the build has none. */
export async function readRecordedEval(path: string, base: string, fetcher: typeof fetch = fetch): Promise<RecordedEval | null> {
  const res = await fetcher(new URL(path, base).href).catch(() => null);
  if (!res?.ok) return null;
  const j = (await res.json().catch(() => null)) as RecordedEval | null;
  return j && Array.isArray(j.results) ? j : null;
}
