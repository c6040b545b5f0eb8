/**
 * The tiny distillation system as `npm run tiny:eval` measures it (scripts/tiny-system/eval.ts): its task's
 * splits and scoring, the learner alone as the baseline, and the table's configs (the ablations included).
 */
import { type PriceRow, priceSplit } from '../../src/eval/tiny-prices.ts';
import { scoreAnswer } from '../../src/eval/tiny-task.ts';
import type { TinyEvalTarget } from '../tiny-system/eval.ts';
import { distillPrompt } from './agents.ts';
import { TINY_DISTILLATION_DIR } from '../tiny-system/paths.ts';

export const DISTILLATION_TARGET: TinyEvalTarget<PriceRow> = {
  style: 'tiny_distillation',
  dir: TINY_DISTILLATION_DIR,
  rows: priceSplit,
  score: scoreAnswer,
  alone: { role: 'learner', label: 'learner alone', prompt: (tok, row) => distillPrompt(tok, 'learner', 'first', row.question, '') },
  configs: ['alone', 'text1', 'text3', 'latent1', 'latent2', 'latent3', 'shuffled1', 'zeroed1'],
};
