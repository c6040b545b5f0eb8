/**
 * The recursion system's prompt set (a `--prompts` file over the defaults, as the distillation system's): the
 * distill roles' templates cut to the question, the slot under its label line and a one-line instruction.
 */
import { loadPromptSet, type PromptSet } from '../../src/mas/prompts.ts';
import { SLOTS } from '../../src/mas/slots.ts';

/** The prompt file's content, as written to the system folder's prompts.json. */
export const HOPS_PROMPT_FILE = {
  system: { distill: 'You are a helpful assistant.' },
  templates: {
    'distill.expert.first': 'Question: {question}\nGive your clue.',
    'distill.expert.feedback': `Question: {question}\nLearner:\n${SLOTS.distillFeedback}\nGive your clue.`,
    'distill.learner.first': `Question: {question}\nExpert:\n${SLOTS.distillExpert}\nGive the answer.`,
  },
} as const;

export const HOPS_PROMPTS: PromptSet = loadPromptSet(JSON.parse(JSON.stringify(HOPS_PROMPT_FILE)) as Record<string, unknown>);
