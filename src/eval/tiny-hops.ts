/**
 * The multi-hop task of the recursion system (issue 40): a task whose questions need as many rounds of a
 * distillation-style system (expert → learner, feedback learner → expert) as they have hops. Knowledge is split
 * between the two agents, and a question's answer is reached by lookups that alternate between them:
 *
 *   item ─expert─► colour ─learner─► shape ─expert─► number ─learner─► animal ─expert─► tree
 *
 * "Which colour goes with the glim?" needs one hop (the expert's first note); "which number …" three (the
 * learner's shape must reach the expert and come back: 2 rounds); "which tree …" five (3 rounds). In round r
 * the expert applies its lookup to what the learner fed back (in round 1 to the question's item), and the
 * learner applies its own to the expert's note; once a note holds the asked kind, both pass it on unchanged.
 * So a system of R rounds can answer the questions of at most 2R − 1 hops: the ceiling per round count.
 *
 * Every note and answer is one boxed value, three tokens (`\boxed`, `{red`, `}`), so a latent message of m = 3
 * steps carries a whole note, as the text baseline passes it: an agent trained on longer notes reads only their
 * first m tokens from a latent message, and its lookups then fail although its copies work.
 *
 *   question         Which number goes with the glim?
 *   distill_expert   \boxed{red}     (the expert's round-1 note)
 *   answer           \boxed{seven}   (distill_learner is the same text)
 *
 * Each agent is trained with the other's lookups drawn at random (scripts/tiny-recursion/agents.ts), so neither
 * can learn the other's half. Generation and splits are pure functions of their seeds (src/util/rng.ts).
 */
import { lastBoxed } from '../mas/answer';
import { Rng } from '../util/rng';
import { PEOPLE } from './tiny-task';
import { PRICE_ITEMS } from './tiny-prices';

/** The kinds of value along the chain, in hop order; the question asks for one of colour, number, tree. */
export const HOP_KINDS = ['item', 'colour', 'shape', 'number', 'animal', 'tree'] as const;
export type HopKind = (typeof HOP_KINDS)[number];
export type HopAgent = 'expert' | 'learner';

/** The asked kinds and their hop counts. */
export const HOP_TARGETS = { colour: 1, number: 3, tree: 5 } as const;
export type HopTarget = keyof typeof HOP_TARGETS;
export const TARGET_KINDS = Object.keys(HOP_TARGETS) as HopTarget[];

/** The values of each kind but the items (16 invented words, as tiny-prices.ts's); numbers in words, so every `{value` is one token. */
export const HOP_VALUES: Readonly<Record<Exclude<HopKind, 'item'>, readonly string[]>> = {
  colour: ['red', 'blue', 'green', 'pink', 'grey', 'gold', 'black', 'white'],
  shape: ['circle', 'square', 'star', 'ring', 'cube', 'cone', 'disc', 'arch'],
  number: ['two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'],
  animal: ['cat', 'dog', 'fox', 'owl', 'bee', 'cow', 'pig', 'elk'],
  tree: ['oak', 'elm', 'fir', 'ash', 'yew', 'ivy', 'fern', 'moss'],
};
export const HOP_ITEMS: readonly string[] = PRICE_ITEMS;

/** Hop k (1-based) maps HOP_KINDS[k−1] to HOP_KINDS[k]; odd hops are the expert's, even ones the learner's. */
export const hopAgent = (hop: number): HopAgent => (hop % 2 === 1 ? 'expert' : 'learner');

export type HopWorld = ReadonlyMap<HopKind, ReadonlyMap<string, string>>;

/**
 * The world, a pure function of its seed: for each kind but the last, value → the next kind's value. Items map
 * two to a colour; the other lookups are permutations of 8 values, so no kind's value gives away another's.
 */
export function hopWorld(seed = 20_261_240): HopWorld {
  const rng = new Rng(seed);
  const shuffled = (xs: readonly string[]) => {
    const a = [...xs];
    for (let i = a.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };
  const world = new Map<HopKind, Map<string, string>>();
  const colours = shuffled([...HOP_VALUES.colour, ...HOP_VALUES.colour]);
  world.set('item', new Map(HOP_ITEMS.map((item, i) => [item, colours[i]!])));
  for (let k = 1; k < HOP_KINDS.length - 1; k++) {
    const from = HOP_KINDS[k] as Exclude<HopKind, 'item'>;
    const to = shuffled(HOP_VALUES[HOP_KINDS[k + 1] as Exclude<HopKind, 'item'>]);
    world.set(from, new Map(HOP_VALUES[from].map((v, i) => [v, to[i]!])));
  }
  return world;
}

/** The kind of a value (the kinds' values are disjoint), or undefined. */
export function kindOf(value: string): HopKind | undefined {
  if (HOP_ITEMS.includes(value)) return 'item';
  return (Object.keys(HOP_VALUES) as Exclude<HopKind, 'item'>[]).find((k) => HOP_VALUES[k].includes(value));
}

/** Every note of either agent: the expert's notes, the learner's answers (its feedback in non-final rounds). */
export const hopAnswer = (value: string) => `\\boxed{${value}}`;

export interface HopRow {
  question: string;
  distill_expert: string;
  distill_learner: string;
  answer: string;
  /** The answer's value (a colour, number or tree). */
  answer_value: string;
  item: string;
  target: HopTarget;
  hops: number;
  /** The values along the chain from the item to the answer (hops + 1 of them). */
  chain: string[];
  task_family: 'math';
}

const TEMPLATES: readonly ((who: string, kind: string, item: string) => string)[] = [
  (who, kind, item) => `${who} asks: which ${kind} goes with the ${item}?`,
  (who, kind, item) => `${who} wants the ${kind} of the ${item}. Which is it?`,
  (who, kind, item) => `Which ${kind} does ${who} get for the ${item}?`,
];
export const HOP_TEMPLATE_COUNT = TEMPLATES.length;

/** The chain of values from `item` through `hops` lookups. */
export function hopChain(world: HopWorld, item: string, hops: number): string[] {
  const chain = [item];
  for (let k = 0; k < hops; k++) chain.push(world.get(HOP_KINDS[k]!)!.get(chain[k]!)!);
  return chain;
}

/** The question text of a template, person, asked kind and item. */
export const hopQuestion = (template: number, person: number, target: HopTarget, item: string) =>
  TEMPLATES[template]!(PEOPLE[person]!.name, target, item);

/** The row of one question. */
export function hopRow(world: HopWorld, template: number, person: number, target: HopTarget, item: string): HopRow {
  const hops = HOP_TARGETS[target];
  const chain = hopChain(world, item, hops);
  const answer = hopAnswer(chain[hops]!);
  return {
    question: hopQuestion(template, person, target, item),
    distill_expert: hopAnswer(chain[1]!),
    distill_learner: answer,
    answer,
    answer_value: chain[hops]!,
    item,
    target,
    hops,
    chain,
    task_family: 'math',
  };
}

/** Every distinct question (3 templates × 6 people × 3 asked kinds × 16 items = 864), in a fixed order. */
export function allHopRows(world: HopWorld = hopWorld()): HopRow[] {
  const rows: HopRow[] = [];
  for (let t = 0; t < TEMPLATES.length; t++)
    for (let p = 0; p < PEOPLE.length; p++)
      for (const target of TARGET_KINDS) for (const item of HOP_ITEMS) rows.push(hopRow(world, t, p, target, item));
  return rows;
}

export type HopSplitName = 'train' | 'validation' | 'test';
/** Rows per asked kind in each held-out split (the rest train): test 3 × 64, validation 3 × 32, train 3 × 192. */
export const HOP_SPLITS_PER_KIND: Readonly<Record<Exclude<HopSplitName, 'train'>, number>> = { test: 64, validation: 32 };
const SPLIT_SEED = 20_261_241;

/**
 * The rows of one split: each asked kind's 288 questions shuffled once and cut test | validation | train, then the
 * split's rows shuffled together, so every split holds the three hop counts in equal parts.
 */
export function hopSplit(name: HopSplitName): HopRow[] {
  if (!['train', 'validation', 'test'].includes(name))
    throw new RangeError(`unknown split '${String(name)}'; use train, validation or test`);
  const rng = new Rng(SPLIT_SEED);
  const shuffle = <T>(a: T[]) => {
    for (let i = a.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };
  const all = allHopRows();
  const { test, validation } = HOP_SPLITS_PER_KIND;
  const cut = { test: [0, test], validation: [test, test + validation], train: [test + validation, Infinity] }[name];
  const out: HopRow[] = [];
  for (const target of TARGET_KINDS) out.push(...shuffle(all.filter((r) => r.target === target)).slice(cut[0], cut[1]));
  return shuffle(out);
}

/** The most a system of `rounds` rounds can answer: the share of rows with at most 2·rounds − 1 hops. */
export function hopCeiling(rows: readonly Pick<HopRow, 'hops'>[], rounds: number): number {
  return rows.length ? rows.filter((r) => r.hops <= 2 * rounds - 1).length / rows.length : 0;
}

/** Right when the last boxed value of `text` is the row's answer value. */
export function scoreHops(text: string, row: Pick<HopRow, 'answer_value'>): boolean {
  return lastBoxed(text)?.trim() === row.answer_value;
}

/** The expert's note: round 1 (`fed` undefined) the item's colour; later its lookup on the learner's value, or the value passed on. */
export function expertReply(world: HopWorld, target: HopTarget, item: string, fed?: string): string {
  if (fed === undefined) return hopAnswer(world.get('item')!.get(item)!);
  const kind = kindOf(fed);
  if (kind === target) return hopAnswer(fed);
  if (kind === 'shape' || kind === 'animal') return hopAnswer(world.get(kind)!.get(fed)!);
  throw new RangeError(`the expert has no lookup for '${fed}' (asked ${target})`);
}

/** The learner's answer to a note holding `value`: the value when it is of the asked kind, else its lookup. */
export function learnerReply(world: HopWorld, target: HopTarget, value: string): string {
  const kind = kindOf(value);
  if (kind === target) return hopAnswer(value);
  if (kind === 'colour' || kind === 'number') return hopAnswer(world.get(kind)!.get(value)!);
  throw new RangeError(`the learner has no lookup for '${value}' (asked ${target})`);
}

const valueOf = (text: string) => text.slice('\\boxed{'.length, -1);

export interface HopStage {
  role: HopAgent;
  kind: 'first' | 'feedback';
  slot: string;
  target: string;
}

/** What text-MAS writes on a row over `rounds` rounds with every lookup right: each stage's prompt kind, slot and text. */
export function goldTranscript(world: HopWorld, row: HopRow, rounds: number): HopStage[] {
  const stages: HopStage[] = [];
  let fed: string | undefined;
  for (let r = 0; r < rounds; r++) {
    const note = expertReply(world, row.target, row.item, fed);
    stages.push({ role: 'expert', kind: r === 0 ? 'first' : 'feedback', slot: fed === undefined ? '' : hopAnswer(fed), target: note });
    const answer = learnerReply(world, row.target, valueOf(note));
    stages.push({ role: 'learner', kind: 'first', slot: note, target: answer });
    fed = valueOf(answer);
  }
  return stages;
}

/** The JSONL text of some rows. */
export function hopJsonl(rows: readonly HopRow[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}
