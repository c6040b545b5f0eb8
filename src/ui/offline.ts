/**
 * The page's offline systems: embedded styles whose files the page ships (src/mas/styles.ts EmbeddedSpec.manifest:
 * models/tiny-system.json for OFFLINE_STYLE, the first view; models/tiny-recursion.json for the second), each with
 * its task's splits and scoring (src/eval/embedded-task.ts), the question Ask opens with, the donor question of the
 * "messages shuffled" ablation, and the right answer to a question of the task. The pickers name OFFLINE_STYLE
 * 'tiny' (the URL's style=tiny) and the others by their style.
 */
import { embeddedTask, type EmbeddedRow, type EmbeddedTask } from '../eval/embedded-task';
import { OFFLINE_STYLE, STYLES, type StyleName } from '../mas/styles';

/** The style pickers' value for the first offline system (the URL's style=tiny). */
export const TINY = 'tiny';
/** The pickers' value of the second offline system, the multi-hop one whose accuracy rises with rounds (issue 40). */
export const TINY_RECURSION = 'tiny_recursion';
export { OFFLINE_STYLE };

/** The offline systems as the pickers offer them, the first view first. */
export const OFFLINE_CHOICES: readonly string[] = [TINY, TINY_RECURSION];

/** A style choice of the pickers as a registry style: TINY is OFFLINE_STYLE. */
export const registryStyle = (style: string): string => (style === TINY ? OFFLINE_STYLE : style);

/** Whether a picker value is one of the page's offline systems. */
export const isOffline = (style: string): boolean => OFFLINE_CHOICES.includes(style);

/** The page manifest of an offline system's files (models/tiny-system.json for TINY), relative to the app root. */
export function offlineManifest(style: string): string {
  const m = STYLES[registryStyle(style) as StyleName]?.embedded?.manifest;
  if (!isOffline(style) || !m) throw new Error(`${style} is not one of the page's offline systems (${OFFLINE_CHOICES.join(', ')})`);
  return m;
}

/** The recorded evaluation of an offline system (its eval.json), relative to the app root; null when it has none. */
export function offlineEvalPath(style: string): string | null {
  const e = STYLES[registryStyle(style) as StyleName]?.embedded;
  return isOffline(style) && e?.eval ? `${e.root}/${e.eval}` : null;
}

/** An offline system's task: its splits as rows and its scoring (default: the first view's). */
export function offlineTask(style = TINY): EmbeddedTask {
  const task = embeddedTask(registryStyle(style));
  // a manifest naming a released style would leave the page without its offline questions: say so at once
  if (!task) throw new Error(`the offline style ${registryStyle(style)} is not an embedded style`);
  return task;
}

const testRows = new Map<string, readonly EmbeddedRow[]>();

/** The rows of an offline system's test split, in order (made once: each split is a pure function). */
export function offlineTestRows(style = TINY): readonly EmbeddedRow[] {
  let rows = testRows.get(style);
  if (!rows) testRows.set(style, (rows = offlineTask(style).split('test')));
  return rows;
}

/** The questions of an offline system's test split, in order. */
export const offlineTestQuestions = (style = TINY): readonly string[] => offlineTestRows(style).map((r) => r.question);

/**
 * The test row Ask opens with, per offline system. TINY: row 0, which the system answers right in latent mode with
 * 1, 2 and 3 rounds, greedy (models/tiny/distillation/eval.json, configs latent1–3: `\boxed{32}`), and the learner
 * alone does not (`\boxed{20}`: it cannot know the price); src/ui/offline.test.ts checks this against the recorded
 * eval, so that a rebuilt system which answers it otherwise is noticed (then pick another row here). TINY_RECURSION:
 * its first 5-hop question (row 5, the tree of the criv), which needs all three rounds: each round's
 * hand-offs carry the next two hops.
 */
export const DEFAULT_ROWS: Readonly<Record<string, number>> = { [TINY]: 0, [TINY_RECURSION]: 5 };
export const DEFAULT_ROW = DEFAULT_ROWS[TINY]!;

/** The question Ask opens with for an offline system: its DEFAULT_ROWS row of the test split. */
export const defaultQuestion = (style = TINY): string => offlineTestQuestions(style)[DEFAULT_ROWS[style] ?? 0]!;

/**
 * The question whose latent messages a "messages shuffled" ask sends in place of `question`'s own, as `npm run
 * tiny:eval`'s shuffled configs pair them: for an offline system, its test split's next row after the question's
 * (wrapping round), or row 1 (row 0's successor) when the question is not in the split; for a released style,
 * the first offline default question (the row after it when that is the question asked), a question of another task.
 */
export function donorQuestion(style: string, question: string): string {
  const q = question.trim();
  if (!isOffline(style)) {
    const qs = offlineTestQuestions();
    return qs[q === defaultQuestion() ? DEFAULT_ROW + 1 : DEFAULT_ROW]!;
  }
  const qs = offlineTestQuestions(style);
  const i = qs.indexOf(q);
  return qs[(i < 0 ? 1 : i + 1) % qs.length]!;
}

/** The right answer to a question of an offline task, and the expert's note behind it where the task has one. */
export interface ExpectedAnswer {
  value: number | string;
  /** What only the expert knows ("8 coins per sarb."; the multi-hop task: its first note), or null. */
  note: string | null;
  /** The offline system whose task it is (its picker value). */
  style: string;
}

const byQuestion = new Map<string, ReadonlyMap<string, ExpectedAnswer>>();

/**
 * What an offline system should answer to `question` (any split of its task, whitespace trimmed); null for another
 * question or a released style, whose answers the page cannot know.
 */
export function expectedAnswer(style: string, question: string): ExpectedAnswer | null {
  if (!isOffline(style)) return null;
  let map = byQuestion.get(style);
  if (!map) {
    const rows = (['test', 'validation', 'train'] as const).flatMap((split) => offlineTask(style).split(split));
    map = new Map(rows.map((r) => [
      r.question,
      { value: r.answer_value, note: typeof r.distill_expert === 'string' ? r.distill_expert : null, style },
    ]));
    byQuestion.set(style, map);
  }
  return map.get(question.trim()) ?? null;
}

/** Whether `text`'s last \boxed{} is the expected answer (its offline task's scoring). */
export const answersRight = (text: string, expected: ExpectedAnswer): boolean =>
  offlineTask(expected.style).score(text, { answer_value: expected.value });
