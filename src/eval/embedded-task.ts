/**
 * The task of each embedded tiny system, by style: its splits as plain rows (question, the upstream role columns
 * its style trains on, the gold answer value) and its scoring. The page's offline split, the Evaluate panel and
 * the tiny eval read a system's task through this, so they follow whichever embedded system the page ships.
 */
import { priceSplit } from './tiny-prices';
import { scoreAnswer, taskSplit } from './tiny-task';

export type EmbeddedStyle = 'tiny_sequential' | 'tiny_distillation';
export type EmbeddedSplit = 'train' | 'validation' | 'test';

export interface EmbeddedTask {
  /** A split's rows: `question`, the style's role columns, `answer_value`. */
  split(name: EmbeddedSplit): { question: string; answer_value: number; [column: string]: string | number }[];
  /** True when the last \boxed{} of `text` is the row's answer. */
  score(text: string, row: { answer_value: number }): boolean;
  /** The upstream columns a training row of this style carries. */
  columns: readonly string[];
}

const TASKS: Readonly<Record<EmbeddedStyle, EmbeddedTask>> = {
  tiny_sequential: {
    split: (name) => taskSplit(name).map((r) => ({ ...r })),
    score: scoreAnswer,
    columns: ['question', 'plan', 'refined_plan', 'answer'],
  },
  tiny_distillation: {
    split: (name) => priceSplit(name).map((r) => ({ ...r })),
    score: scoreAnswer,
    columns: ['question', 'distill_expert', 'distill_learner', 'answer'],
  },
};

/** The task of an embedded style; null for the released ones, whose tasks are benchmarks. */
export function embeddedTask(style: string): EmbeddedTask | null {
  return Object.hasOwn(TASKS, style) ? TASKS[style as EmbeddedStyle] : null;
}
