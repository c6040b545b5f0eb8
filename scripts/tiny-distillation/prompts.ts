/**
 * The tiny distillation system's prompt set (a `--prompts` file over the defaults, docs/method.md §5 shape):
 * the distill roles' templates cut to a question line, the slot under its label line and a one-line
 * instruction, so that the tiny agents' chats stay short. The system prompt stays upstream's.
 */
import { loadPromptSet, type PromptSet } from '../../src/mas/prompts.ts';
import { SLOTS } from '../../src/mas/slots.ts';

/** The prompt file's content (system + templates), as written to the system folder's prompts.json. */
export const DISTILL_PROMPT_FILE = {
  system: { distill: 'You are a helpful assistant.' },
  templates: {
    'distill.expert.first': 'Question: {question}\nGive the price.',
    'distill.expert.feedback': `Question: {question}\nLearner:\n${SLOTS.distillFeedback}\nGive the price.`,
    'distill.learner.first': `Question: {question}\nExpert:\n${SLOTS.distillExpert}\nGive the answer.`,
  },
} as const;

/** The prompt set, validated and laid over the defaults. */
export const DISTILL_PROMPTS: PromptSet = loadPromptSet(JSON.parse(JSON.stringify(DISTILL_PROMPT_FILE)) as Record<string, unknown>);
