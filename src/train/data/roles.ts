/**
 * Which columns of a training row feed which role (docs/method.md §6.1 table, §3.5): the assistant target of the
 * role and, for the inner loop, the real texts that stand in its slots.
 */
import { InvalidArgument } from '../../errors.ts';
import type { StyleShape, TaskKind } from '../../mas/prompts.ts';
import type { Row } from './rows.ts';

/** Roles that train per shape (our role names; upstream's chain 'refiner' is our 'critic'). */
export const TRAIN_ROLES: Record<StyleShape, readonly string[]> = {
  chain: ['planner', 'critic', 'solver'],
  hie: ['math', 'code', 'science', 'summarizer'],
  distill: ['expert', 'learner'],
  deliberation: ['reflector', 'toolcaller'],
};

/** Upstream role names accepted as aliases. */
const ALIASES: Partial<Record<StyleShape, Record<string, string>>> = { chain: { refiner: 'critic' } };

/** Our name of `role` in `shape` (maps the alias 'refiner' → 'critic'); InvalidArgument for a role the shape does not train. */
export function canonicalRole(shape: StyleShape, role: string): string {
  const roles = TRAIN_ROLES[shape];
  if (!roles) throw new InvalidArgument(`unknown style shape '${shape}'; known: ${Object.keys(TRAIN_ROLES).join(', ')}`);
  const name = ALIASES[shape]?.[role] ?? role;
  if (!roles.includes(name)) throw new InvalidArgument(`shape '${shape}' has no trainable role '${role}'; its roles: ${roles.join(', ')}`);
  return name;
}

/** One text and its fallbacks, tried in order. */
type Field = readonly string[];

interface RoleColumns {
  target: Field;
  /** One field list per slot of the role's first-round prompt, in prompt order. */
  slots: readonly Field[];
}

const DISTILL_EXPERT: Field = ['distill_expert', 'refined_plan', 'expert_plan'];
const HIE = { math: ['hie_math_expert'], code: ['hie_code_expert'], science: ['hie_science_expert'] } as const;

const COLUMNS: Record<string, RoleColumns> = {
  'chain.planner': { target: ['plan'], slots: [] },
  'chain.critic': { target: ['refined_plan'], slots: [['plan']] },
  'chain.solver': { target: ['answer'], slots: [['refined_plan']] },
  'hie.math': { target: HIE.math, slots: [] },
  'hie.code': { target: HIE.code, slots: [] },
  'hie.science': { target: HIE.science, slots: [] },
  'hie.summarizer': { target: ['answer', 'hie_summarizer', 'summary'], slots: [HIE.math, HIE.code, HIE.science] },
  'distill.expert': { target: DISTILL_EXPERT, slots: [] },
  'distill.learner': { target: ['distill_learner', 'answer', 'learner_answer'], slots: [DISTILL_EXPERT] },
  'deliberation.reflector': { target: ['deliberation_reflector'], slots: [] },
  'deliberation.toolcaller': { target: ['deliberation_toolcaller', 'answer'], slots: [['deliberation_reflector']] },
};

/** A cell as text: strings as they are, finite numbers printed; anything else (null, objects) counts as missing. */
function cellText(row: Row, field: string): string | undefined {
  const v = row[field];
  if (typeof v === 'string') return v.trim() === '' ? undefined : v;
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  return undefined;
}

function firstText(row: Row, fields: Field): string | undefined {
  for (const f of fields) {
    const t = cellText(row, f);
    if (t !== undefined) return t;
  }
  return undefined;
}

/** The skip reason for a missing text: `missing:<field>` with its fallbacks joined by '|'. */
const missing = (fields: Field) => `missing:${fields.join('|')}`;

/**
 * The gold text of `role` in round `round` (1-based) from the row's `round_targets` column (ours: `{ "<role>": [text
 * of round 1, round 2, …] }`), for tasks whose agents write something else in each round (a multi-hop chain: the
 * learner's round-1 lookup, then its round-2 one, …); undefined when the row has none for that role and round, and
 * the role's usual column applies. A `round_targets` that is not an object of string arrays is an InvalidArgument.
 */
function roundTarget(row: Row, role: string, round: number): string | undefined {
  const all = row.round_targets;
  if (all === undefined || all === null) return undefined;
  if (typeof all !== 'object' || Array.isArray(all))
    throw new InvalidArgument(`round_targets must be an object of role → array of texts per round, got ${JSON.stringify(all).slice(0, 80)}`);
  const texts = (all as Record<string, unknown>)[role];
  if (texts === undefined) return undefined;
  if (!Array.isArray(texts) || texts.some((t) => typeof t !== 'string'))
    throw new InvalidArgument(`round_targets.${role} must be an array of texts, one per round; got ${JSON.stringify(texts).slice(0, 80)}`);
  const t = texts[round - 1] as string | undefined;
  return t !== undefined && t.trim() !== '' ? t : undefined;
}

/**
 * The texts one training example of `role` needs: the assistant target, the texts that fill its slots in
 * the inner loop, and the question. `{ skip }` names the first missing or empty field (with fallbacks).
 */
export function roleExample(
  shape: StyleShape,
  role: string,
  row: Row,
  round?: number,
): { target: string; slotTexts: string[]; question: string } | { skip: string } {
  const name = canonicalRole(shape, role);
  const cols = COLUMNS[`${shape}.${name}`]!;
  const question = cellText(row, 'question');
  if (question === undefined) return { skip: missing(['question']) };
  const target = (round !== undefined ? roundTarget(row, name, round) : undefined) ?? firstText(row, cols.target);
  if (target === undefined) return { skip: missing(cols.target) };
  const slotTexts: string[] = [];
  for (const fields of cols.slots) {
    const t = firstText(row, fields);
    if (t === undefined) return { skip: missing(fields) };
    slotTexts.push(t);
  }
  return { target, slotTexts, question };
}

const TASK_ALIASES: Record<string, TaskKind> = {
  math: 'math',
  mathematics: 'math',
  code: 'code',
  coding: 'code',
  programming: 'code',
  choice: 'choice',
  mcq: 'choice',
  multiple_choice: 'choice',
  'multiple-choice': 'choice',
};

/**
 * The task of a row: its task_family column mapped to a TaskKind (math, code, choice and their common
 * spellings), else `fallback` (upstream --mas_task), which also applies to values we do not recognise.
 * `codeType`/`fnName` come from the `type` (complete | function) and `fn_name` columns when present.
 */
export function rowTask(row: Row, fallback: TaskKind): { task: TaskKind; codeType?: 'function' | 'complete'; fnName?: string } {
  const family = typeof row.task_family === 'string' ? row.task_family.trim().toLowerCase() : '';
  const task = TASK_ALIASES[family] ?? fallback;
  const out: { task: TaskKind; codeType?: 'function' | 'complete'; fnName?: string } = { task };
  const type = typeof row.type === 'string' ? row.type.trim().toLowerCase() : '';
  if (type === 'function' || type === 'complete') out.codeType = type;
  const fn = cellText(row, 'fn_name');
  if (fn !== undefined) out.fnName = fn.trim();
  return out;
}
