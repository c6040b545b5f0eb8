/**
 * The tiny system's prompt set (a `--prompts` file over the defaults, docs/method.md §5 shape): the chain roles'
 * templates cut down to a question line, the slot under its label line, and a one-line instruction, so
 * that the tiny agents' sequences stay around a hundred tokens. The system prompt stays upstream's.
 * Slots sit where the default templates put them (after the label line, inside the user turn).
 */
import { loadPromptSet, type PromptSet } from '../../src/mas/prompts.ts';
import { SLOTS } from '../../src/mas/slots.ts';

/** The prompt file's content (system + templates), as written to the system folder's prompts.json. */
export const TINY_PROMPT_FILE = {
  system: { chain: 'You are a helpful assistant.' },
  templates: {
    'chain.planner.first': 'Question: {question}\nWrite the plan.',
    'chain.planner.feedback': `Question: {question}\nFeedback:\n${SLOTS.feedback}\nWrite the plan.`,
    'chain.critic.first': `Question: {question}\nPlan:\n${SLOTS.planner}\nWork out each step.`,
    'chain.solver.first': `Question: {question}\nRefined plan:\n${SLOTS.refined}\nGive the answer.`,
  },
} as const;

/** The tiny prompt set, validated and laid over the defaults. */
export const TINY_PROMPTS: PromptSet = loadPromptSet(JSON.parse(JSON.stringify(TINY_PROMPT_FILE)) as Record<string, unknown>);
