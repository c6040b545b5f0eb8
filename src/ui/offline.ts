/**
 * The page's offline system: the embedded style OFFLINE_STYLE (src/mas/styles.ts; the worker loads its files from
 * models/tiny-system.json, which offline.test.ts checks names the same style), its task's splits and scoring
 * (src/eval/embedded-task.ts), the question Ask opens with, the donor question of the "messages shuffled"
 * ablation, and the right answer to a question of the task.
 */
import { embeddedTask, type EmbeddedTask } from '../eval/embedded-task';
import { OFFLINE_STYLE } from '../mas/styles';

/** The style pickers' value for the offline system (the URL's style=tiny). */
export const TINY = 'tiny';
export { OFFLINE_STYLE };

/** A style choice of the pickers as a registry style: TINY is OFFLINE_STYLE. */
export const registryStyle = (style: string): string => (style === TINY ? OFFLINE_STYLE : style);

/** The offline system's task: its splits as rows and its scoring. */
export function offlineTask(): EmbeddedTask {
  const task = embeddedTask(OFFLINE_STYLE);
  // a manifest naming a released style would leave the page without its offline questions: say so at once
  if (!task) throw new Error(`the offline style ${OFFLINE_STYLE} is not an embedded style`);
  return task;
}

let testQuestions: readonly string[] | null = null;

/** The questions of the offline task's test split, in order (made once: each split is a pure function). */
export function offlineTestQuestions(): readonly string[] {
  testQuestions ??= offlineTask().split('test').map((r) => r.question);
  return testQuestions;
}

/**
 * The test row Ask opens with: row 0, which the system answers right in latent mode with 1, 2 and 3 rounds,
 * greedy (models/tiny/distillation/eval.json, configs latent1–3: `\boxed{32}`), and the learner alone does not
 * (`\boxed{20}`: it cannot know the price). src/ui/offline.test.ts checks this against the recorded eval, so
 * that a rebuilt system which answers it otherwise is noticed (then pick another row here).
 */
export const DEFAULT_ROW = 0;

/** The question Ask opens with: DEFAULT_ROW of the offline task's test split. */
export const defaultQuestion = (): string => offlineTestQuestions()[DEFAULT_ROW]!;

/**
 * The question whose latent messages a "messages shuffled" ask sends in place of `question`'s own, as `npm run
 * tiny:eval`'s shuffled configs pair them: for the offline system, the test split's next row after the question's
 * (wrapping round), or row 1 (row 0's successor) when the question is not in the split; for a released style,
 * the offline default question (the row after it when that is the question asked), a question of another task.
 */
export function donorQuestion(style: string, question: string): string {
  const qs = offlineTestQuestions();
  const q = question.trim();
  if (style !== TINY) return qs[q === defaultQuestion() ? DEFAULT_ROW + 1 : DEFAULT_ROW]!;
  const i = qs.indexOf(q);
  return qs[(i < 0 ? 1 : i + 1) % qs.length]!;
}

/** The right answer to a question of the offline task, and the expert's note behind it where the task has one. */
export interface ExpectedAnswer {
  value: number;
  /** What only the expert knows ("8 coins per sarb."), or null. */
  note: string | null;
}

let byQuestion: ReadonlyMap<string, ExpectedAnswer> | null = null;

/**
 * What the offline system should answer to `question` (any split of its task, whitespace trimmed); null for another
 * question or a released style, whose answers the page cannot know.
 */
export function expectedAnswer(style: string, question: string): ExpectedAnswer | null {
  if (style !== TINY) return null;
  byQuestion ??= new Map((['test', 'validation', 'train'] as const).flatMap((split) => offlineTask().split(split)).map((r) => [
    r.question,
    { value: r.answer_value, note: typeof r.distill_expert === 'string' ? r.distill_expert : null },
  ]));
  return byQuestion.get(question.trim()) ?? null;
}

/** Whether `text`'s last \boxed{} is the expected answer (the offline task's scoring). */
export const answersRight = (text: string, expected: ExpectedAnswer): boolean =>
  offlineTask().score(text, { answer_value: expected.value });
