/**
 * The task of each embedded tiny system, by style: its splits as plain rows (question, the upstream role columns
 * its style trains on, the gold answer value) and its scoring. The page's offline split, the Evaluate panel and
 * the tiny eval read a system's task through this, so they follow whichever embedded system the page shows.
 */
import { HOP_KINDS, hopCeiling, hopSplit, kindOf, scoreHops } from './tiny-hops';
import { priceSplit } from './tiny-prices';
import { scoreAnswer, taskSplit } from './tiny-task';

export type EmbeddedStyle = 'tiny_sequential' | 'tiny_distillation' | 'tiny_recursion';
export type EmbeddedSplit = 'train' | 'validation' | 'test';

/** A row of an embedded task: `question`, the style's role columns, the gold `answer_value` (a number, or a word). */
export interface EmbeddedRow {
  question: string;
  answer_value: number | string;
  [column: string]: string | number;
}

/** What a token read from a latent message is in the task: the hop that gives a value of its kind (tiny-hops.ts). */
export interface HopReading {
  /** The value's kind (colour, shape, number, animal, tree; the item is hop 0). */
  kind: string;
  /** The hop that yields it (1 = the expert's first lookup). */
  hop: number;
}

export interface EmbeddedTask {
  /** A split's rows: `question`, the style's role columns, `answer_value`. */
  split(name: EmbeddedSplit): EmbeddedRow[];
  /** True when the last \boxed{} of `text` is the row's answer. */
  score(text: string, row: Pick<EmbeddedRow, 'answer_value'>): boolean;
  /** The upstream columns a training row of this style carries. */
  columns: readonly string[];
  /** The most a system of `rounds` rounds can answer of `rows` (a task whose questions need several rounds); absent: 1. */
  ceiling?(rows: readonly EmbeddedRow[], rounds: number): number;
  /** The hop a token stands for (a latent message's lens reading); null for a token that is no value of the task. */
  hopOf?(token: string): HopReading | null;
}

const TASKS: Readonly<Record<EmbeddedStyle, EmbeddedTask>> = {
  tiny_sequential: {
    split: (name) => taskSplit(name).map((r) => ({ ...r })),
    score: (text, row) => typeof row.answer_value === 'number' && scoreAnswer(text, { answer_value: row.answer_value }),
    columns: ['question', 'plan', 'refined_plan', 'answer'],
  },
  tiny_distillation: {
    split: (name) => priceSplit(name).map((r) => ({ ...r })),
    score: (text, row) => typeof row.answer_value === 'number' && scoreAnswer(text, { answer_value: row.answer_value }),
    columns: ['question', 'distill_expert', 'distill_learner', 'answer'],
  },
  tiny_recursion: {
    // the hop count rides along (the ceiling's); the chain and the item stay in tiny-hops.ts's rows
    split: (name) =>
      hopSplit(name).map((r) => ({
        question: r.question, distill_expert: r.distill_expert, distill_learner: r.distill_learner, answer: r.answer,
        answer_value: r.answer_value, hops: r.hops,
      })),
    score: (text, row) => scoreHops(text, { answer_value: String(row.answer_value) }),
    columns: ['question', 'distill_expert', 'distill_learner', 'answer'],
    ceiling: (rows, rounds) => hopCeiling(rows.map((r) => ({ hops: Number(r.hops) })), rounds),
    hopOf: (token) => {
      // a value as the lens shows it: alone, or with the brace it shares a token with (`{red`), spaces around
      const kind = kindOf(token.trim().replace(/^[{(\\"'`]+|[})"'`.,]+$/g, ''));
      return kind ? { kind, hop: HOP_KINDS.indexOf(kind) } : null;
    },
  },
};

/** The task of an embedded style; null for the released ones, whose tasks are benchmarks. */
export function embeddedTask(style: string): EmbeddedTask | null {
  return Object.hasOwn(TASKS, style) ? TASKS[style as EmbeddedStyle] : null;
}
