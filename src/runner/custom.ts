/**
 * What `rmas ask` takes over from upstream's run_custom.py (docs/method.md §10): questions files and the `reasoning`
 * task. A questions file is read as run_custom.py reads it: `.json` an array of strings or of objects, or
 * `{"questions": [...]}`, or one object; `.jsonl`/`.ndjson` one string or object per line (a line that is
 * not JSON is a question as written); any other file plain text, one question per line, or one per block
 * when blank lines split it into several blocks. An object's question is its first non-empty field of
 * question, query, prompt, text, input; `fn_name` names a code question's function.
 *
 * `--task reasoning` is run_custom.py's open-ended task: math's context and links, the reasoning prompts
 * (plans and outlines rather than boxed answers; the final agent answers in natural language, in the format
 * the question asks for), no answer retry (run_custom.py drops --ans for it) and no score.
 */
import { InvalidArgument } from '../errors';
import { DEFAULT_PROMPTS, PROMPT_SLOTS, type PromptSet } from '../mas/prompts';
import { SLOTS } from '../mas/slots';

export interface CustomQuestion {
  question: string;
  /** Code questions: the function to implement. */
  fnName?: string;
}

const TEXT_FIELDS = ['question', 'query', 'prompt', 'text', 'input'];

function fromItem(item: unknown, where: string): CustomQuestion {
  if (typeof item === 'string') return { question: item.trim() };
  if (typeof item === 'object' && item !== null && !Array.isArray(item)) {
    const o = item as Record<string, unknown>;
    const field = TEXT_FIELDS.find((k) => o[k] !== undefined && o[k] !== null && String(o[k]).trim() !== '');
    if (!field) throw new InvalidArgument(`${where}: an object without a question (none of ${TEXT_FIELDS.join(', ')} is set)`);
    return { question: String(o[field]).trim(), ...(typeof o.fn_name === 'string' && o.fn_name ? { fnName: o.fn_name } : {}) };
  }
  throw new InvalidArgument(`${where}: ${JSON.stringify(item)} is neither a question string nor an object with one`);
}

/** The questions of a questions file's text (`path` gives the format by its extension and names it in errors). */
export function parseQuestionsFile(text: string, path: string): CustomQuestion[] {
  const ext = path.toLowerCase().slice(path.lastIndexOf('.'));
  let items: CustomQuestion[];
  if (ext === '.json') {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (e) {
      throw new InvalidArgument(`--questions_file ${path} is not valid JSON (${(e as Error).message})`);
    }
    if (typeof data === 'object' && data !== null && !Array.isArray(data) && 'questions' in data) {
      data = (data as { questions: unknown }).questions;
      if (!Array.isArray(data)) throw new InvalidArgument(`--questions_file ${path}: "questions" must be a list`);
    }
    items = (Array.isArray(data) ? data : [data]).map((x, i) => fromItem(x, `${path} item ${i + 1}`));
  } else if (ext === '.jsonl' || ext === '.ndjson') {
    items = [];
    text.split(/\r?\n/).forEach((raw, i) => {
      const line = raw.trim();
      if (!line) return;
      let v: unknown;
      try {
        v = JSON.parse(line);
      } catch {
        v = line;
      }
      items.push(fromItem(v, `${path} line ${i + 1}`));
    });
  } else {
    const blocks = text.replace(/\r\n/g, '\n').split('\n\n').map((b) => b.trim()).filter(Boolean);
    const parts = blocks.length > 1 ? blocks : text.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
    items = parts.map((q) => ({ question: q }));
  }
  return items.filter((q) => q.question !== '');
}

/** The final instruction of a reasoning question (upstream's reasoning variant of the final instruction). */
export const REASONING_FINAL_INSTRUCTION =
  'Answer the question carefully and directly, reasoning clearly in natural language. Follow any answer format the question asks for.';

/** Our wording of upstream's reasoning prompts for the chain roles (structure, labels and slots as its build_reasoning_*). */
const REASONING_CHAIN: Record<string, string> = {
  'chain.planner.first':
    'You are the planner in a multi-agent reasoning team. Work out the key concepts, assumptions and reasoning steps ' +
    'that a careful answer needs.\n\nQuestion:\n{question}\nGive a short plan or outline. Do not answer the question yet.',
  'chain.planner.feedback':
    'You are the planner in a multi-agent reasoning team that iterates over several rounds. This is round {round}.\n\n' +
    `Question:\n{question}\nFeedback signal from the previous solver round:${SLOTS.feedback}\n\n` +
    'Let the feedback guide the plan where it helps; the constraints of the question come first. ' +
    'Give a short, updated plan or outline. Do not answer the question yet.',
  'chain.critic.first':
    'You are the critic in a multi-agent reasoning team.\n\nThe question is:\nQuestion:\n{question}\n' +
    `This is what the planner proposed:\nInitial Plan:\n${SLOTS.planner}\n\n` +
    'Turn it into a clearer and stronger plan for the answer. Do not answer the question yet.',
  'chain.solver.first':
    'You are the solver in a multi-agent reasoning team. Let the refined plan guide you, but the question comes first.\n\n' +
    `Refined Plan:\n${SLOTS.refined}\n\nQuestion:\n{question}\n\n` +
    'Give a clear, careful answer in natural language, with equations, assumptions or caveats where they help. ' +
    'Follow any answer format the question asks for.',
};

const DELIBERATION_BOXED = /[^.]*\\boxed\{\}[^.]*\./;

/**
 * The prompt set of `--task reasoning`, laid over `base` (the style's prompts, or a --prompts file over the
 * defaults) as math-task variants (`key.math`, which the engine looks up first for the math task it runs):
 * a chain role whose template `base` keeps from the defaults gets the reasoning wording; every other
 * template keeps its wording with the reasoning instruction in place of {final_instruction}. Deliberation's
 * default system prompt asks for a final response in natural language instead of a boxed answer.
 */
export function reasoningPrompts(base: PromptSet): PromptSet {
  const templates = { ...base.templates };
  for (const key of Object.keys(PROMPT_SLOTS)) {
    const own = base.templates[`${key}.math`] ?? base.templates[key];
    if (own === undefined) continue;
    const fromDefaults = own === (DEFAULT_PROMPTS.templates[`${key}.math`] ?? DEFAULT_PROMPTS.templates[key]);
    templates[`${key}.math`] =
      fromDefaults && REASONING_CHAIN[key] ? REASONING_CHAIN[key] : own.split('{final_instruction}').join(REASONING_FINAL_INSTRUCTION);
  }
  const system = { ...base.system };
  if (system.deliberation === DEFAULT_PROMPTS.system.deliberation) {
    system.deliberation = system.deliberation.replace(
      DELIBERATION_BOXED,
      ' When you are done, give a clear final response in natural language.',
    );
  }
  return { system, templates };
}
