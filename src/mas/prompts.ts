/**
 * Role prompts as data (docs/method.md §5). Every template is a plain string so a user can swap in other text
 * (upstream's exact prompts included) through `loadPromptSet`; what must not change is where the slot
 * strings sit, because latents are spliced in at those points of the rendered chat (docs/method.md §4.2).
 *
 * Placeholders, filled in one pass (text substituted in is never scanned again):
 *   {question}          the question as given
 *   {task_context}      math `The question is:\nQuestion:\n<q>\n`; choice the same with
 *                       `Choose the correct option (A/B/C/D).` appended when the question lacks it;
 *                       code `<interface line>\nThe programming problem is:\n<q>\n`
 *   {final_instruction} how to give the answer (boxed value, boxed letter, or one fenced python block)
 *   {interface_line}    code only: the function line or the stdin/stdout line; empty for math/choice
 *   {round}             the 1-based round number
 * A `{name}` right after a letter or backslash (as in `\boxed{x}`) is literal text, not a placeholder.
 *
 * Template keys are `${shape}.${role}.${kind}`, optionally suffixed `.${task}`; the suffixed variant is
 * looked up first. The defaults carry `.code` variants for the chain roles ("coding team" wording, 3–6
 * step plans, no code from planner and critic).
 */
import { InvalidArgument, PromptSlotMissing, RmasError } from '../errors';
import { SLOTS } from './slots';

export type TaskKind = 'math' | 'choice' | 'code';
export type StyleShape = 'chain' | 'hie' | 'distill' | 'deliberation';
export type PromptKind = 'first' | 'feedback';

export interface PromptVars {
  question: string;
  task: TaskKind;
  /** 1-based round number (used by feedback prompts: "This is round 2."). */
  round: number;
  /**
   * code tasks: `function` → "Implement and return the function `fnName` only." ; `complete` → stdin/stdout program line.
   * Default 'complete' unless fnName given.
   */
  codeType?: 'function' | 'complete';
  fnName?: string;
}

/** A full prompt set: system prompts per shape and user-prompt templates by key. */
export interface PromptSet {
  system: Record<StyleShape, string>;
  /** key `${shape}.${role}.${kind}` optionally suffixed `.${task}` for a task-specific variant (looked up first). */
  templates: Record<string, string>;
}

export const SHAPES: readonly StyleShape[] = ['chain', 'hie', 'distill', 'deliberation'];
export const TASKS: readonly TaskKind[] = ['math', 'choice', 'code'];
export const PLACEHOLDERS: readonly string[] = ['question', 'task_context', 'final_instruction', 'interface_line', 'round'];

/** Roles and kinds per shape, and the slot strings each (shape, role, kind) template must contain, in order of appearance. */
export const PROMPT_SLOTS: Record<string, readonly string[]> = {
  'chain.planner.first': [],
  'chain.planner.feedback': [SLOTS.feedback],
  'chain.critic.first': [SLOTS.planner],
  'chain.solver.first': [SLOTS.refined],
  'hie.math.first': [],
  'hie.math.feedback': [SLOTS.hieFeedback],
  'hie.code.first': [],
  'hie.code.feedback': [SLOTS.hieFeedback],
  'hie.science.first': [],
  'hie.science.feedback': [SLOTS.hieFeedback],
  'hie.summarizer.first': [SLOTS.hieMath, SLOTS.hieCode, SLOTS.hieScience],
  'distill.expert.first': [],
  'distill.expert.feedback': [SLOTS.distillFeedback],
  'distill.learner.first': [SLOTS.distillExpert],
  'deliberation.reflector.first': [],
  'deliberation.reflector.feedback': [SLOTS.deliberationFeedback],
  'deliberation.toolcaller.first': [SLOTS.deliberationReflector],
};

const CHOOSE_SENTENCE = 'Choose the correct option (A/B/C/D).';

// ---- default templates (our wording; structure, labels and slots per docs/method.md §5) ----

const STEP_FORM = 'as numbered steps (Step 1: ..., Step 2: ..., ..., Step n: ...)';

const chainTemplates = (coding: boolean): Record<string, string> => {
  const team = coding ? 'multi-agent coding team' : 'multi-agent team';
  const planAsk = coding
    ? `Write a plan of 3 to 6 steps, ${STEP_FORM}. Do not write code.`
    : `Write the plan ${STEP_FORM}.`;
  return {
    'chain.planner.first':
      `You are the planner in a ${team}. Work out how the problem should be approached; leave the solving to others.\n\n` +
      `{task_context}\n${planAsk}`,
    'chain.planner.feedback':
      `You are the planner in a ${team} that iterates over several rounds. This is round {round}.\n\n` +
      `{task_context}\nFeedback signal from the previous solver round:${SLOTS.feedback}\n\n` +
      'Let the feedback nudge the plan where it helps, but when it disagrees with the question, the question wins. ' +
      (coding ? planAsk : `Keep the plan short, ${STEP_FORM}.`),
    'chain.critic.first':
      `You are the critic in a ${team}. Check the planner's plan against the ${coding ? 'problem' : 'question'} and improve it.\n\n` +
      `{task_context}\nThis is what the planner proposed:\nInitial Plan:\n${SLOTS.planner}\n\n` +
      `Correct mistakes and fill gaps, then reply with the improved plan only, ${STEP_FORM}.` +
      (coding ? ' Keep it to 3 to 6 steps. Do not write code.' : ''),
    'chain.solver.first':
      `You are the solver in a ${team}. Follow the refined plan to ${coding ? 'write the program' : 'answer the question'}.\n\n` +
      `This is the plan after review:\nRefined Plan:\n${SLOTS.refined}\n\n{task_context}\n{final_instruction}`,
  };
};

const EXPERT_FOCUS = {
  math: 'mathematical reasoning and exact calculation',
  code: 'algorithms, programming and computation',
  science: 'scientific knowledge and domain facts',
} as const;

function hieTemplates(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [role, focus] of Object.entries(EXPERT_FOCUS)) {
    const head = `You are the ${role} expert in a multi-agent team; your strength is ${focus}.`;
    out[`hie.${role}.first`] =
      `${head}\n\n{task_context}\nThink it through from your field's point of view, step by step, and give a concise answer.`;
    out[`hie.${role}.feedback`] =
      `${head} This is round {round}.\n\n{task_context}\n` +
      `Feedback signal from the previous summarizer round:${SLOTS.hieFeedback}\n\n` +
      'Take the feedback into account and give a short, updated answer.';
  }
  out['hie.summarizer.first'] =
    'You are the summarizer in a multi-agent team. A math expert, a code expert and a science expert have each studied the question.\n\n' +
    `Math expert information:\n${SLOTS.hieMath}\n\n` +
    `Code expert information:\n${SLOTS.hieCode}\n\n` +
    `Science expert information:\n${SLOTS.hieScience}\n\n` +
    '---\nBuild on what the experts found and reason step by step.\n\n{task_context}\n{final_instruction}';
  return out;
}

const DISTILL_EXPERT_HEAD = 'You are the expert in a two-agent team: you plan, and a learner carries the plan out.';
const DELIB_REFLECTOR_HEAD =
  'You are the reflector in a deliberation-style multi-agent team. Tools exist for the team, but your part is to think ' +
  'the problem over and point out what needs checking.';

const otherTemplates: Record<string, string> = {
  'distill.expert.first':
    `${DISTILL_EXPERT_HEAD}\n\n{task_context}\n` +
    `Write a short plan the learner can execute directly, ${STEP_FORM}. Do not state the final answer.`,
  'distill.expert.feedback':
    `${DISTILL_EXPERT_HEAD} This is round {round}.\n\n{task_context}\n` +
    `Feedback signal from the previous learner round:${SLOTS.distillFeedback}\n\n` +
    `Use the feedback to revise the plan, ${STEP_FORM}. Do not state the final answer.`,
  'distill.learner.first':
    'You are the learner in a two-agent team, and you carry out the expert\'s plan.\n\n' +
    `Expert plan:\n${SLOTS.distillExpert}\n\n` +
    'Let the plan guide you, but the constraints of the task come first.\n---\n{task_context}\n{final_instruction}',
  'deliberation.reflector.first':
    `${DELIB_REFLECTOR_HEAD}\n\n{task_context}\nReason about the problem step by step and note what the tool caller should verify.`,
  'deliberation.reflector.feedback':
    `${DELIB_REFLECTOR_HEAD} This is round {round}.\n\n{task_context}\n` +
    `Toolcaller feedback signal from the previous round:${SLOTS.deliberationFeedback}\n\n` +
    'Reconsider the problem in light of the feedback and note what still needs verifying.',
  'deliberation.toolcaller.first':
    'You are the tool caller in a deliberation-style multi-agent team.\n\n' +
    `Reflector signal:${SLOTS.deliberationReflector}\n\n` +
    'Treat the reflector\'s signal as a suggestion; the task itself decides.\n---\n{task_context}\n{final_instruction}',
};

const chainCode = chainTemplates(true);

export const DEFAULT_PROMPTS: PromptSet = {
  system: {
    chain: 'You are a helpful assistant.',
    hie: 'You are a helpful assistant.',
    distill: 'You are a helpful assistant.',
    deliberation:
      'You are a helpful assistant who solves problems step by step and may use two tools. ' +
      'To look something up on Wikipedia, write <search> your query </search>. ' +
      'To run Python, write <python> your code </python>. ' +
      'Each tool call is answered with its output inside <result> ... </result>. ' +
      'When you are done, put the final answer inside \\boxed{}.',
  },
  templates: {
    ...chainTemplates(false),
    ...Object.fromEntries(Object.entries(chainCode).map(([k, v]) => [`${k}.code`, v])),
    ...hieTemplates(),
    ...otherTemplates,
  },
};

// ---- validation ----

const SLOT_LIKE = /<<[A-Z0-9_]+_SLOT>>/g;
const PLACEHOLDER = /(?<![A-Za-z\\])\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** Throws PromptSlotMissing unless `template` holds exactly the slots `key` needs, each once, in order. */
function checkSlots(key: string, template: string): void {
  const base = baseKey(key);
  const want: readonly string[] = PROMPT_SLOTS[base] ?? [];
  const found: string[] = template.match(SLOT_LIKE) ?? [];
  for (const s of want) {
    if (!found.includes(s)) {
      throw new PromptSlotMissing(`prompt template '${key}' lacks the slot ${s}; add it where that agent's latents belong`);
    }
  }
  for (const s of found) {
    if (!want.includes(s)) {
      const need = want.length ? want.join(', ') : 'none';
      throw new PromptSlotMissing(
        `prompt template '${key}' holds the slot ${s}, which its stage does not fill (it takes: ${need}); remove it`,
      );
    }
  }
  if (found.length !== want.length || found.some((s, i) => s !== want[i])) {
    throw new PromptSlotMissing(
      `prompt template '${key}' must hold its slots once each in the order ${want.join(', ')}; found ${found.join(', ')}`,
    );
  }
}

function checkPlaceholders(key: string, template: string): void {
  for (const m of template.matchAll(PLACEHOLDER)) {
    if (!PLACEHOLDERS.includes(m[1]!)) {
      throw new InvalidArgument(
        `prompt template '${key}' uses the unknown placeholder {${m[1]}}; known: ${PLACEHOLDERS.map((p) => `{${p}}`).join(', ')}`,
      );
    }
  }
}

/** `shape.role.kind` of a template key (drops a `.task` suffix); throws InvalidArgument for an unknown key. */
function baseKey(key: string): string {
  const parts = key.split('.');
  const base = parts.slice(0, 3).join('.');
  const ok = base in PROMPT_SLOTS && (parts.length === 3 || (parts.length === 4 && TASKS.includes(parts[3] as TaskKind)));
  if (!ok) {
    throw new InvalidArgument(
      `unknown prompt template key '${key}'; use shape.role.kind with an optional .math/.choice/.code suffix, where shape.role.kind is one of: ${Object.keys(PROMPT_SLOTS).join(', ')}`,
    );
  }
  return base;
}

// ---- rendering ----

export function systemPrompt(shape: StyleShape, set: PromptSet = DEFAULT_PROMPTS): string {
  if (!SHAPES.includes(shape)) throw new InvalidArgument(`unknown style shape '${shape}'; known: ${SHAPES.join(', ')}`);
  return set.system[shape];
}

function interfaceLine(vars: PromptVars): string {
  const type = vars.codeType ?? (vars.fnName ? 'function' : 'complete');
  if (type === 'complete') return 'Write a complete program that reads from stdin and prints to stdout.';
  if (!vars.fnName) throw new InvalidArgument("codeType 'function' needs fnName, the name of the function to implement");
  return `Implement and return the function \`${vars.fnName}\` only.`;
}

/** The values of every placeholder for these vars. */
function placeholderValues(vars: PromptVars): Record<string, string> {
  const q = vars.question;
  let taskContext: string;
  let finalInstruction: string;
  let iface = '';
  if (vars.task === 'code') {
    iface = interfaceLine(vars);
    taskContext = `${iface}\nThe programming problem is:\n${q}\n`;
    finalInstruction = 'Give your solution as one fenced Python code block (```python ... ```) and nothing else.';
  } else if (vars.task === 'choice') {
    const body = q.includes(CHOOSE_SENTENCE) ? q : `${q.trimEnd()}\n\n${CHOOSE_SENTENCE}`;
    taskContext = `The question is:\nQuestion:\n${body}\n`;
    finalInstruction =
      'Work out the answer from the information above.\nFinal Choice: write only the letter of the option inside \\boxed{}, for example \\boxed{A}.';
  } else {
    taskContext = `The question is:\nQuestion:\n${q}\n`;
    finalInstruction = 'Solve the question with the information above and write the final answer inside \\boxed{}, for example \\boxed{1}.';
  }
  return {
    question: q,
    task_context: taskContext,
    final_instruction: finalInstruction,
    interface_line: iface,
    round: String(vars.round),
  };
}

/**
 * The user message for a stage, slot strings included, placeholders filled. Throws PromptSlotMissing (from ../errors) naming the
 * key and the missing slot if the template lacks a slot PROMPT_SLOTS requires, InvalidArgument for an unknown role/kind.
 */
export function userPrompt(
  shape: StyleShape,
  role: string,
  kind: PromptKind,
  vars: PromptVars,
  set: PromptSet = DEFAULT_PROMPTS,
): string {
  const key = `${shape}.${role}.${kind}`;
  if (!(key in PROMPT_SLOTS)) {
    const mine = Object.keys(PROMPT_SLOTS).filter((k) => k.startsWith(`${shape}.`));
    const hint = mine.length ? `stages of '${shape}': ${mine.join(', ')}` : `known shapes: ${SHAPES.join(', ')}`;
    throw new InvalidArgument(`no prompt for role '${role}' kind '${kind}' in shape '${shape}'; ${hint}`);
  }
  if (!TASKS.includes(vars.task)) throw new InvalidArgument(`unknown task '${vars.task}'; known: ${TASKS.join(', ')}`);
  if (!Number.isInteger(vars.round) || vars.round < 1) {
    throw new InvalidArgument(`round must be a 1-based integer, got ${vars.round}`);
  }
  if (kind === 'feedback' && vars.round < 2) {
    throw new InvalidArgument(`a feedback prompt belongs to round 2 or later, got round ${vars.round}; use kind 'first' in round 1`);
  }
  if (typeof vars.question !== 'string' || vars.question.trim() === '') throw new InvalidArgument('the question is empty');
  const stray = vars.question.match(SLOT_LIKE);
  if (stray) {
    throw new InvalidArgument(`the question contains the slot string ${stray[0]}, which would be mistaken for a latent slot; remove it`);
  }
  const taskKey = `${key}.${vars.task}`;
  const usedKey = taskKey in set.templates ? taskKey : key;
  const template = set.templates[usedKey];
  if (template === undefined)
    throw new InvalidArgument(`the prompt set has no template '${key}'; load it over the defaults with loadPromptSet`);
  checkSlots(usedKey, template);
  checkPlaceholders(usedKey, template);
  const values = placeholderValues(vars);
  return template.replace(PLACEHOLDER, (_m, name: string) => values[name]!);
}

// ---- user prompt files ----

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parse a user prompt file (JSON `{ "system"?: {...}, "templates"?: {...} }`) over the defaults; validates that every
 * template given holds exactly its required slots (PromptSlotMissing otherwise, saying which key and slot) and only known
 * placeholders. `file` (a path or URL) starts every error's message, so that it names the file.
 */
export function loadPromptSet(json: string | Record<string, unknown>, file?: string): PromptSet {
  try {
    return parsePromptSet(json);
  } catch (e) {
    if (file === undefined || !(e instanceof RmasError)) throw e;
    const Named = e.constructor as new (message: string) => RmasError;
    throw new Named(`${file}: ${e.message}`);
  }
}

function parsePromptSet(json: string | Record<string, unknown>): PromptSet {
  let obj: unknown = json;
  if (typeof json === 'string') {
    try {
      obj = JSON.parse(json);
    } catch (e) {
      throw new InvalidArgument(`prompt file is not valid JSON (${(e as Error).message}); fix the syntax and load it again`);
    }
  }
  if (!isRecord(obj)) throw new InvalidArgument('prompt file must be a JSON object with optional "system" and "templates" objects');
  for (const k of Object.keys(obj)) {
    if (k !== 'system' && k !== 'templates') {
      throw new InvalidArgument(`prompt file has an unknown field '${k}'; only "system" and "templates" are read`);
    }
  }
  const out: PromptSet = { system: { ...DEFAULT_PROMPTS.system }, templates: { ...DEFAULT_PROMPTS.templates } };
  if (obj.system !== undefined) {
    if (!isRecord(obj.system)) throw new InvalidArgument('"system" must be an object mapping shape names to strings');
    for (const [shape, text] of Object.entries(obj.system)) {
      if (!SHAPES.includes(shape as StyleShape)) {
        throw new InvalidArgument(`"system" names the unknown shape '${shape}'; known: ${SHAPES.join(', ')}`);
      }
      if (typeof text !== 'string') throw new InvalidArgument(`system prompt for '${shape}' must be a string`);
      const slot = text.match(SLOT_LIKE);
      if (slot) throw new PromptSlotMissing(`system prompt for '${shape}' holds the slot ${slot[0]}; slots belong in user templates only`);
      out.system[shape as StyleShape] = text;
    }
  }
  if (obj.templates !== undefined) {
    if (!isRecord(obj.templates)) throw new InvalidArgument('"templates" must be an object mapping template keys to strings');
    for (const [key, text] of Object.entries(obj.templates)) {
      baseKey(key);
      if (typeof text !== 'string') throw new InvalidArgument(`template '${key}' must be a string`);
      checkSlots(key, text);
      checkPlaceholders(key, text);
      out.templates[key] = text;
    }
  }
  return out;
}

/** The task a free-form question implies: 'choice' when it has lettered option lines (regex ^\s*[A-D]\s*[.):-]\s+ per line, multiline), else 'math'. */
export function detectTask(question: string): TaskKind {
  return /^\s*[A-D]\s*[.):-]\s+/m.test(question) ? 'choice' : 'math';
}
