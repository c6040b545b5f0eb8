/**
 * Prompts: every stage renders with exactly its slots in order, task context and final instructions per
 * task, the round line, user prompt files (override, validation) and task detection.
 */
import { describe, expect, it } from 'vitest';
import { InvalidArgument, PromptSlotMissing } from '../errors';
import {
  DEFAULT_PROMPTS,
  PROMPT_SLOTS,
  type PromptKind,
  type StyleShape,
  type TaskKind,
  detectTask,
  loadPromptSet,
  systemPrompt,
  userPrompt,
} from './prompts';
import { ALL_SLOTS, SLOTS } from './slots';

const CHOOSE = 'Choose the correct option (A/B/C/D).';
const Q = 'How many positive divisors does 36 have?';
const split = (key: string) => key.split('.') as [StyleShape, string, PromptKind];
const count = (s: string, sub: string) => s.split(sub).length - 1;
/** Slot strings in order of appearance. */
const slotsIn = (s: string) => s.match(/<<[A-Z0-9_]+_SLOT>>/g) ?? [];
const FINAL_ROLES = new Set(['chain.solver.first', 'hie.summarizer.first', 'distill.learner.first', 'deliberation.toolcaller.first']);

describe('userPrompt renders every stage', () => {
  it('covers the 17 stages of docs/method.md §4.4', () => {
    expect(Object.keys(PROMPT_SLOTS)).toHaveLength(17);
    expect(new Set(Object.values(PROMPT_SLOTS).flat())).toEqual(new Set(ALL_SLOTS));
  });

  for (const key of Object.keys(PROMPT_SLOTS)) {
    for (const task of ['math', 'choice', 'code'] as TaskKind[]) {
      it(`${key} (${task})`, () => {
        const [shape, role, kind] = split(key);
        const round = kind === 'feedback' ? 3 : 1;
        const text = userPrompt(shape, role, kind, { question: Q, task, round, fnName: task === 'code' ? 'num_divisors' : undefined });
        expect(slotsIn(text)).toEqual([...PROMPT_SLOTS[key]!]);
        expect(count(text, Q)).toBe(1);
        expect(text).not.toMatch(/\{(question|task_context|final_instruction|interface_line|round)\}/);
        if (kind === 'feedback') expect(text).toContain('This is round 3.');
        else expect(text).not.toContain('This is round');
        if (task === 'code') {
          expect(text).toContain('Implement and return the function `num_divisors` only.\nThe programming problem is:\n' + Q + '\n');
        } else {
          expect(text).toContain(`The question is:\nQuestion:\n${Q}\n`);
        }
        expect(count(text, CHOOSE)).toBe(task === 'choice' ? 1 : 0);
        const isFinal = FINAL_ROLES.has(key);
        expect(text.includes('\\boxed{}')).toBe(isFinal && task !== 'code');
        expect(text.includes('```python')).toBe(isFinal && task === 'code');
        if (key.startsWith('chain.') && task === 'code') expect(text).toContain('multi-agent coding team');
        if ((key.startsWith('chain.planner') || key.startsWith('chain.critic')) && task === 'code') {
          expect(text).toContain('Do not write code.');
          expect(text).toContain('3 to 6 steps');
        }
      });
    }
  }
});

describe('exact renders', () => {
  it('chain solver, math', () => {
    expect(userPrompt('chain', 'solver', 'first', { question: Q, task: 'math', round: 1 })).toBe(
      'You are the solver in a multi-agent team. Follow the refined plan to answer the question.\n\n' +
        'This is the plan after review:\nRefined Plan:\n<<LATENT_REFINED_SLOT>>\n\n' +
        'The question is:\nQuestion:\nHow many positive divisors does 36 have?\n\n' +
        'Solve the question with the information above and write the final answer inside \\boxed{}, for example \\boxed{1}.',
    );
  });

  it('chain planner feedback, round 3', () => {
    expect(userPrompt('chain', 'planner', 'feedback', { question: Q, task: 'math', round: 3 })).toBe(
      'You are the planner in a multi-agent team that iterates over several rounds. This is round 3.\n\n' +
        'The question is:\nQuestion:\nHow many positive divisors does 36 have?\n\n' +
        'Feedback signal from the previous solver round:<<LATENT_FEEDBACK_SLOT>>\n\n' +
        'Let the feedback nudge the plan where it helps, but when it disagrees with the question, the question wins. ' +
        'Keep the plan short, as numbered steps (Step 1: ..., Step 2: ..., ..., Step n: ...).',
    );
  });

  it('label lines sit right before their slots', () => {
    const v = { question: Q, task: 'math' as const, round: 2 };
    expect(userPrompt('chain', 'critic', 'first', v)).toContain('\nInitial Plan:\n<<LATENT_PLANNER_SLOT>>\n');
    expect(userPrompt('distill', 'learner', 'first', v)).toContain('\nExpert plan:\n<<DISTILL_EXPERT_SLOT>>\n');
    expect(userPrompt('deliberation', 'toolcaller', 'first', v)).toContain('\nReflector signal:<<DELIBERATION_REFLECTOR_SLOT>>\n');
    expect(userPrompt('deliberation', 'reflector', 'feedback', v)).toContain(
      '\nToolcaller feedback signal from the previous round:<<DELIBERATION_FEEDBACK_SLOT>>\n',
    );
    expect(userPrompt('hie', 'science', 'feedback', v)).toContain(
      'You are the science expert in a multi-agent team; your strength is scientific knowledge and domain facts. This is round 2.',
    );
    expect(userPrompt('hie', 'summarizer', 'first', v)).toContain('<<HIE_SCIENCE_EXPERT_SLOT>>\n\n---\n');
  });

  it('choice: the choose sentence is appended once, only when absent', () => {
    const opts = 'Which is prime?\nA. 4\nB. 6\nC. 7\nD. 9';
    const ctx = (q: string) => userPrompt('distill', 'expert', 'first', { question: q, task: 'choice', round: 1 });
    expect(ctx(opts)).toContain(`Question:\n${opts}\n\n${CHOOSE}\n`);
    const already = `${opts}\n\n${CHOOSE}`;
    expect(ctx(already)).toContain(`Question:\n${already}\n`);
    expect(count(ctx(already), CHOOSE)).toBe(1);
    expect(userPrompt('chain', 'solver', 'first', { question: opts, task: 'choice', round: 1 })).toContain(
      'Final Choice: write only the letter of the option inside \\boxed{}, for example \\boxed{A}.',
    );
  });

  it('code interface lines', () => {
    const v = { question: 'Sum two ints.', task: 'code' as const, round: 1 };
    const fn = userPrompt('chain', 'planner', 'first', { ...v, fnName: 'add_two' });
    expect(fn).toContain('\n\nImplement and return the function `add_two` only.\nThe programming problem is:\nSum two ints.\n');
    const prog = userPrompt('chain', 'planner', 'first', v);
    expect(prog).toContain('\n\nWrite a complete program that reads from stdin and prints to stdout.\nThe programming problem is:\n');
    expect(userPrompt('chain', 'planner', 'first', { ...v, fnName: 'f', codeType: 'complete' })).toContain('reads from stdin');
    expect(() => userPrompt('chain', 'planner', 'first', { ...v, codeType: 'function' })).toThrow(InvalidArgument);
    expect(userPrompt('hie', 'summarizer', 'first', v)).toMatch(
      /\nGive your solution as one fenced Python code block \(```python \.\.\. ```\) and nothing else\.$/,
    );
  });

  it('placeholders are filled in one pass', () => {
    const q = 'Is {round} or {question} literal here?';
    const text = userPrompt('chain', 'planner', 'feedback', { question: q, task: 'math', round: 2 });
    expect(text).toContain(`Question:\n${q}\n`);
    expect(count(text, '{round}')).toBe(1);
  });

  it('system prompts', () => {
    for (const s of ['chain', 'hie', 'distill'] as StyleShape[]) expect(systemPrompt(s)).toBe('You are a helpful assistant.');
    const d = systemPrompt('deliberation');
    for (const part of ['<search> your query </search>', '<python> your code </python>', '<result> ... </result>', '\\boxed{}']) {
      expect(d).toContain(part);
    }
    expect(() => systemPrompt('mixture' as StyleShape)).toThrow(InvalidArgument);
  });
});

describe('userPrompt errors', () => {
  const v = { question: Q, task: 'math' as const, round: 2 };
  it('unknown role or kind', () => {
    expect(() => userPrompt('chain', 'judge', 'first', v)).toThrow(InvalidArgument);
    expect(() => userPrompt('chain', 'critic', 'feedback', v)).toThrow(/stages of 'chain'/);
    expect(() => userPrompt('hie', 'summarizer', 'feedback', v)).toThrow(InvalidArgument);
  });
  it('bad vars', () => {
    expect(() => userPrompt('chain', 'planner', 'feedback', { ...v, round: 1 })).toThrow(InvalidArgument);
    expect(() => userPrompt('chain', 'planner', 'first', { ...v, round: 0 })).toThrow(InvalidArgument);
    expect(() => userPrompt('chain', 'planner', 'first', { ...v, round: 1.5 })).toThrow(InvalidArgument);
    expect(() => userPrompt('chain', 'planner', 'first', { ...v, question: '  ' })).toThrow(InvalidArgument);
    expect(() => userPrompt('chain', 'planner', 'first', { ...v, question: `x ${SLOTS.planner}` })).toThrow(/slot string/);
    expect(() => userPrompt('chain', 'planner', 'first', { ...v, task: 'essay' as TaskKind })).toThrow(InvalidArgument);
  });
  it('a hand-built set missing a slot', () => {
    const set = { system: DEFAULT_PROMPTS.system, templates: { ...DEFAULT_PROMPTS.templates, 'chain.critic.first': 'Plan: {question}' } };
    expect(() => userPrompt('chain', 'critic', 'first', v, set)).toThrow(PromptSlotMissing);
    expect(() => userPrompt('chain', 'critic', 'first', v, set)).toThrow("'chain.critic.first' lacks the slot <<LATENT_PLANNER_SLOT>>");
  });
});

describe('loadPromptSet', () => {
  it('overrides a template and a system prompt over the defaults', () => {
    const set = loadPromptSet(
      JSON.stringify({
        system: { chain: 'Be brief.' },
        templates: { 'chain.solver.first': 'Plan:\n<<LATENT_REFINED_SLOT>>\nQ: {question} (round {round}) e.g. \\boxed{x}' },
      }),
    );
    expect(systemPrompt('chain', set)).toBe('Be brief.');
    expect(systemPrompt('hie', set)).toBe('You are a helpful assistant.');
    expect(userPrompt('chain', 'solver', 'first', { question: '2+2?', task: 'math', round: 2 }, set)).toBe(
      'Plan:\n<<LATENT_REFINED_SLOT>>\nQ: 2+2? (round 2) e.g. \\boxed{x}',
    );
    // the default code variant still wins for code tasks
    expect(userPrompt('chain', 'solver', 'first', { question: '2+2?', task: 'code', round: 1 }, set)).toContain('coding team');
    expect(userPrompt('chain', 'critic', 'first', { question: '2+2?', task: 'math', round: 1 }, set)).toBe(
      userPrompt('chain', 'critic', 'first', { question: '2+2?', task: 'math', round: 1 }),
    );
    expect(DEFAULT_PROMPTS.system.chain).toBe('You are a helpful assistant.');
  });

  it('a task-suffixed template is used for that task only', () => {
    const set = loadPromptSet({ templates: { 'distill.expert.first.choice': 'Pick: {task_context}' } });
    expect(userPrompt('distill', 'expert', 'first', { question: 'Q?', task: 'choice', round: 1 }, set)).toBe(
      `Pick: The question is:\nQuestion:\nQ?\n\n${CHOOSE}\n`,
    );
    expect(userPrompt('distill', 'expert', 'first', { question: 'Q?', task: 'math', round: 1 }, set)).toMatch(/^You are the expert/);
  });

  it('rejects templates with missing, extra or misordered slots', () => {
    const load = (templates: Record<string, string>) => () => loadPromptSet({ templates });
    expect(load({ 'chain.planner.feedback': 'Round {round}: {question}' })).toThrow(PromptSlotMissing);
    expect(load({ 'chain.planner.feedback': 'Round {round}: {question}' })).toThrow(
      "prompt template 'chain.planner.feedback' lacks the slot <<LATENT_FEEDBACK_SLOT>>",
    );
    expect(load({ 'chain.planner.first.code': `{question} ${SLOTS.feedback}` })).toThrow(
      /'chain\.planner\.first\.code' holds the slot <<LATENT_FEEDBACK_SLOT>>/,
    );
    expect(load({ 'chain.critic.first': `${SLOTS.planner} ${SLOTS.planner}` })).toThrow(PromptSlotMissing);
    expect(load({ 'chain.critic.first': '<<LATENT_PLANER_SLOT>>' })).toThrow(PromptSlotMissing);
    expect(load({ 'hie.summarizer.first': `${SLOTS.hieCode}${SLOTS.hieMath}${SLOTS.hieScience}` })).toThrow(/in the order/);
  });

  it('rejects unknown placeholders, keys, fields and bad JSON', () => {
    expect(() => loadPromptSet({ templates: { 'chain.planner.first': 'Q: {query}' } })).toThrow(/unknown placeholder \{query\}/);
    expect(() => loadPromptSet({ templates: { 'chain.judge.first': 'x' } })).toThrow(InvalidArgument);
    expect(() => loadPromptSet({ templates: { 'chain.planner.first.essay': 'x' } })).toThrow(InvalidArgument);
    expect(() => loadPromptSet({ templates: { 'chain.planner.first': 3 } })).toThrow(InvalidArgument);
    expect(() => loadPromptSet({ system: { mixture: 'x' } })).toThrow(InvalidArgument);
    expect(() => loadPromptSet({ system: { chain: `x${SLOTS.planner}` } })).toThrow(PromptSlotMissing);
    expect(() => loadPromptSet({ prompts: {} })).toThrow(/unknown field 'prompts'/);
    expect(() => loadPromptSet('{"templates": ')).toThrow(InvalidArgument);
    expect(() => loadPromptSet('[]')).toThrow(InvalidArgument);
  });

  it('every default template passes its own validation', () => {
    const set = loadPromptSet({ system: DEFAULT_PROMPTS.system, templates: DEFAULT_PROMPTS.templates });
    expect(set).toEqual(DEFAULT_PROMPTS);
    expect(Object.keys(DEFAULT_PROMPTS.templates).filter((k) => k.endsWith('.code'))).toEqual([
      'chain.planner.first.code',
      'chain.planner.feedback.code',
      'chain.critic.first.code',
      'chain.solver.first.code',
    ]);
  });
});

describe('detectTask', () => {
  it.each([
    ['Which is prime?\nA. 4\nB. 6\nC. 7\nD. 9', 'choice'],
    ['Pick one:\n  (A) no', 'math'], // a parenthesised letter does not match ^\s*[A-D]
    ['Pick one:\n  B) yes\n  C) no', 'choice'],
    ['Options:\nC: red\nD - blue', 'choice'],
    ['Find x if 2x = 4.', 'math'],
    ['Point A.\nIs it a vertex?', 'math'], // no space after the punctuation on a non-initial letter
    ['E. not an option letter', 'math'],
    ['A.5 is a decimal', 'math'],
    ['A. first line option', 'choice'],
  ])('%j → %s', (q, want) => {
    expect(detectTask(q)).toBe(want);
  });
});
