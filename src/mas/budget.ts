/**
 * The one rule for how many new tokens an answer may take when the caller names none: `rmas ask`, `rmas run` and
 * the tab's ask and evaluate all read it, so that the page answers what the runner answers for the same inputs.
 */
import type { TaskKind } from './prompts';
import type { StyleSpec } from './styles';

/** The embedded tiny systems answer in a few tokens; more would only let an untrained tail ramble. */
export const TINY_MAX_NEW_TOKENS = 64;

/**
 * What is being answered: a benchmark by upstream's dataset key (null: a file of no benchmark, which upstream's
 * run.py reads as its default math500), or one question by its task (run_custom.py's questions).
 */
export type BudgetOf = { dataset: string | null } | { task: TaskKind };

/**
 * Upstream's infer_max_new_tokens (docs/method.md §7.1): math500 1000 for sequential_light, else 2000; aime25/26
 * 8192 for sequential_light, else 16000; every other benchmark 4000. One question counts as its task's benchmark
 * would: math as math500, choice (GPQA, MedQA) and code (MBPP+) 4000. The embedded tiny systems: TINY_MAX_NEW_TOKENS.
 */
export function defaultMaxNewTokens(style: Pick<StyleSpec, 'name' | 'embedded'>, of: BudgetOf): number {
  if (style.embedded) return TINY_MAX_NEW_TOKENS;
  const dataset = 'task' in of ? (of.task === 'math' ? 'math500' : of.task) : (of.dataset ?? 'math500');
  const light = style.name === 'sequential_light';
  if (dataset === 'math500') return light ? 1000 : 2000;
  if (dataset === 'aime25' || dataset === 'aime26') return light ? 8192 : 16000;
  return 4000;
}
