/**
 * The tiny system's task family (issue 7, item 1), the task of the embedded style tiny_sequential: the page's
 * offline training rows and held-out questions come from it, and so do the tiny system's build
 * (scripts/tiny-system) and its evaluation. Short multi-step arithmetic word problems with an integer answer,
 * each with the role targets of a sequential system in upstream's columns (docs/method.md §3.5):
 * `question`, `plan` (planner), `refined_plan` (critic/refiner), `answer` (solver, ends in \boxed{N}),
 * plus `answer_value` for scoring and `task_family: 'math'`.
 *
 * The text is ASCII, compact and built from a few fixed templates with a small vocabulary, so that tiny
 * decoders with short context windows can learn it:
 *
 *   question      Tom has 7 apples. He buys 5 more. He gives away 3. How many apples does Tom have now?
 *   plan          Step 1: from 7, add 5.\nStep 2: subtract 3.
 *   refined_plan  Step 1: 7 + 5 = 12.\nStep 2: 12 - 3 = 9.
 *   answer        7 + 5 = 12, 12 - 3 = 9. The answer is \boxed{9}.
 *
 * Every value along the way (start, operands, intermediate results, answer) lies in 1..MAX_VALUE (30). Generation is
 * a pure function of the seed (mulberry32 from src/util/rng.ts). `npx tsx scripts/tiny-system/build.ts task --out DIR`
 * writes the splits as JSONL.
 */
import { lastBoxed } from '../mas/answer';
import { Rng } from '../util/rng';

export interface TaskRow {
  question: string;
  plan: string;
  refined_plan: string;
  answer: string;
  answer_value: number;
  task_family: 'math';
}

/** Kinds of step; `mul` multiplies by 2 ("doubles") or 3 ("triples"). */
type OpKind = 'add' | 'sub' | 'mul';
interface Op {
  kind: OpKind;
  n: number;
  verb: string;
}

/** The people of the tiny tasks' questions (tiny-prices.ts asks about them too). */
export const PEOPLE: readonly { name: string; pronoun: 'He' | 'She' }[] = [
  { name: 'Tom', pronoun: 'He' },
  { name: 'Sam', pronoun: 'He' },
  { name: 'Ben', pronoun: 'He' },
  { name: 'Ann', pronoun: 'She' },
  { name: 'Mia', pronoun: 'She' },
  { name: 'Eva', pronoun: 'She' },
];
const OBJECTS = ['apples', 'pens', 'cards', 'books', 'eggs', 'coins'] as const;
const ADD_VERBS = ['buys', 'finds', 'gets'] as const;
const SUB_VERBS = ['gives away', 'loses', 'sells'] as const;
const MUL_VERBS: Record<number, string> = { 2: 'doubles', 3: 'triples' };

/**
 * Largest value any number in a problem may take. The ranges are sized for agents of a few hundred
 * thousand weights trained for minutes on two CPU cores: one- and two-digit sums with small operands.
 */
export const MAX_VALUE = 30;
/** Largest starting amount and largest amount added or taken away. */
const MAX_START = 12;
const MAX_ADD = 9;
/** Multiplication only applies to amounts up to this, so products stay small. */
const MAX_MUL_BASE = 10;

/** A clause of the question for one step, without the pronoun. */
function clause(op: Op): string {
  if (op.kind === 'add') return `${op.verb} ${op.n} more`;
  if (op.kind === 'sub') return `${op.verb} ${op.n}`;
  return `${op.verb} them`;
}

/** The plan line of a step: names the operation in the order the equation uses, computes nothing. */
function planLine(op: Op, start: number, first: boolean): string {
  const verb = op.kind === 'add' ? `add ${op.n}` : op.kind === 'sub' ? `subtract ${op.n}` : `multiply by ${op.n}`;
  return first ? `from ${start}, ${verb}` : verb;
}

const SYMBOL: Record<OpKind, string> = { add: '+', sub: '-', mul: '*' };

function apply(kind: OpKind, a: number, n: number): number {
  return kind === 'add' ? a + n : kind === 'sub' ? a - n : a * n;
}

/**
 * Every equation a problem can contain ("7 + 5 = 12"), in a fixed order: each (value, kind, operand)
 * that drawOp can produce from a running value in 1..MAX_VALUE. The critic's arithmetic drills
 * (scripts/tiny-system/train-agents.ts) are drawn from these.
 */
export function arithmeticFacts(): string[] {
  const facts: string[] = [];
  for (let value = 1; value <= MAX_VALUE; value++) {
    for (let n = 1; n <= Math.min(MAX_ADD, MAX_VALUE - value); n++) facts.push(`${value} + ${n} = ${value + n}`);
    for (let n = 1; n <= Math.min(MAX_ADD, value - 1); n++) facts.push(`${value} - ${n} = ${value - n}`);
    if (value <= MAX_MUL_BASE) for (const n of [2, 3].filter((k) => value * k <= MAX_VALUE)) facts.push(`${value} * ${n} = ${value * n}`);
  }
  return facts;
}

/** One step drawn so that the running value stays in 1..MAX_VALUE (some kind always fits). */
function drawOp(rng: Rng, value: number): Op {
  const kinds: OpKind[] = [];
  if (value + 1 <= MAX_VALUE) kinds.push('add', 'add');
  if (value >= 2) kinds.push('sub', 'sub');
  if (value >= 1 && value <= MAX_MUL_BASE) kinds.push('mul');
  const kind = kinds[rng.int(kinds.length)]!;
  if (kind === 'add') {
    const n = 1 + rng.int(Math.min(MAX_ADD, MAX_VALUE - value));
    return { kind, n, verb: ADD_VERBS[rng.int(ADD_VERBS.length)]! };
  }
  if (kind === 'sub') {
    const n = 1 + rng.int(Math.min(MAX_ADD, value - 1)); // never down to 0: a zero answer would be over-represented
    return { kind, n, verb: SUB_VERBS[rng.int(SUB_VERBS.length)]! };
  }
  const choices = [2, 3].filter((k) => value * k <= MAX_VALUE);
  const n = choices[rng.int(choices.length)]!;
  return { kind, n, verb: MUL_VERBS[n]! };
}

/** One problem drawn from `rng`: 2 or 3 steps. */
function drawRow(rng: Rng): TaskRow {
  const person = PEOPLE[rng.int(PEOPLE.length)]!;
  const object = OBJECTS[rng.int(OBJECTS.length)]!;
  const start = 2 + rng.int(MAX_START - 1);
  const steps = 2 + rng.int(2);
  const sentences = [`${person.name} has ${start} ${object}.`];
  const plan: string[] = [];
  const refined: string[] = [];
  const equations: string[] = [];
  let value = start;
  for (let i = 0; i < steps; i++) {
    const op = drawOp(rng, value);
    const next = apply(op.kind, value, op.n);
    const eq = `${value} ${SYMBOL[op.kind]} ${op.n} = ${next}`;
    sentences.push(`${person.pronoun} ${clause(op)}.`);
    plan.push(`Step ${i + 1}: ${planLine(op, start, i === 0)}.`);
    refined.push(`Step ${i + 1}: ${eq}.`);
    equations.push(eq);
    value = next;
  }
  sentences.push(`How many ${object} does ${person.name} have now?`);
  return {
    question: sentences.join(' '),
    plan: plan.join('\n'),
    refined_plan: refined.join('\n'),
    answer: `${equations.join(', ')}. The answer is \\boxed{${value}}.`,
    answer_value: value,
    task_family: 'math',
  };
}

/** `n` rows with distinct questions, none of them in `exclude`; draws from one Rng seeded with `seed`. */
function generateExcluding(seed: number, n: number, exclude: ReadonlySet<string>): TaskRow[] {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`generateTask: n must be a non-negative integer, got ${n}`);
  const rng = new Rng(seed);
  const seen = new Set<string>();
  const rows: TaskRow[] = [];
  // The question space holds millions of problems, so a cap this generous only stops a runaway loop.
  for (let tries = 0; rows.length < n; tries++) {
    if (tries > 50 * n + 1000) throw new RangeError(`generateTask: could not find ${n} distinct questions; ask for fewer`);
    const row = drawRow(rng);
    if (seen.has(row.question) || exclude.has(row.question)) continue;
    seen.add(row.question);
    rows.push(row);
  }
  return rows;
}

/** `n` problems with distinct questions, a pure function of `seed`. */
export function generateTask(seed: number, n: number): TaskRow[] {
  return generateExcluding(seed, n, new Set());
}

export type SplitName = 'train' | 'validation' | 'test';

/** Fixed seeds and sizes of the three splits. */
export const TASK_SPLITS: Readonly<Record<SplitName, { seed: number; n: number }>> = {
  train: { seed: 20_251_001, n: 2000 },
  validation: { seed: 20_251_002, n: 200 },
  test: { seed: 20_251_003, n: 200 },
};

/**
 * The rows of one split. Splits share no question: test is `generateTask(test.seed, test.n)` as it is;
 * validation skips any question of test; train skips any question of validation or test (skipped draws
 * are replaced by further draws from the same stream). So the held-out splits never depend on the size
 * of train.
 */
export function taskSplit(name: SplitName): TaskRow[] {
  const spec = TASK_SPLITS[name];
  if (!spec) throw new RangeError(`unknown split '${String(name)}'; use train, validation or test`);
  const exclude = new Set<string>();
  const order: SplitName[] = ['test', 'validation', 'train'];
  for (const held of order.slice(0, order.indexOf(name))) {
    for (const r of taskSplit(held)) exclude.add(r.question);
  }
  return generateExcluding(spec.seed, spec.n, exclude);
}

/** True when the last \boxed{...} of `text` holds an integer equal to the row's answer_value. */
export function scoreAnswer(text: string, row: Pick<TaskRow, 'answer_value'>): boolean {
  const boxed = lastBoxed(text);
  if (boxed === null) return false;
  const t = boxed.trim();
  return /^-?\d+$/.test(t) && Number.parseInt(t, 10) === row.answer_value;
}

/** The JSONL text of some rows, one object per line, upstream columns first. */
export function toJsonl(rows: readonly TaskRow[]): string {
  return rows.map((r) => JSON.stringify({
    question: r.question, plan: r.plan, refined_plan: r.refined_plan, answer: r.answer,
    answer_value: r.answer_value, task_family: r.task_family,
  })).join('\n') + '\n';
}
