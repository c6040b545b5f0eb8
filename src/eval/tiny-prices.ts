/**
 * The price-list task of the embedded style tiny_distillation: a task that needs two agents. The question
 * names an item of an invented shop and a quantity; the answer is what the items cost. Only the expert
 * knows the price list (it is trained on it); only the learner, who answers, does the multiplication, and it
 * is trained with prices drawn at random in its expert slot, so it cannot learn the list itself. Alone, the
 * learner can only guess a price (one in eight is right); with the expert's message it can answer.
 *
 *   question         Ann buys 3 glims. How many coins does she pay?
 *   distill_expert   4 coins per glim.            (the expert's note, price first)
 *   answer           \boxed{12}                   (the learner's answer; distill_learner is the same text)
 *
 * Upstream's distillation columns (docs/method.md §3.5) plus `answer_value`, `item`, `quantity`, `price` and
 * `task_family: 'math'`. Every price is 2..9 and each appears for exactly two items, so a guess is right one
 * time in eight whatever the guesser prefers. Generation is a pure function of the seed (src/util/rng.ts);
 * answers score as the sequential task's do (scoreAnswer in tiny-task.ts: the last boxed integer).
 */
import { Rng } from '../util/rng';
import { PEOPLE } from './tiny-task';

export interface PriceRow {
  question: string;
  distill_expert: string;
  distill_learner: string;
  answer: string;
  answer_value: number;
  item: string;
  quantity: number;
  price: number;
  task_family: 'math';
}

/** The shop's items (singular; the plural adds "s"): invented words, so no agent knows them from elsewhere. */
export const PRICE_ITEMS = [
  'glim', 'zorp', 'brin', 'quon', 'dalp', 'mirn', 'pesk', 'vunt',
  'sarb', 'kelt', 'frim', 'yarp', 'wesk', 'nolb', 'criv', 'tamb',
] as const;

/** Prices are 2..9 coins; each is the price of exactly two items. */
export const PRICE_RANGE = [2, 9] as const;
/** Quantities a question asks for. */
export const QUANTITY_RANGE = [2, 9] as const;

/** The price list, a pure function of the list seed: item → coins. */
export function priceList(seed = 20_261_204): ReadonlyMap<string, number> {
  const prices: number[] = [];
  for (let p = PRICE_RANGE[0]; p <= PRICE_RANGE[1]; p++) prices.push(p, p);
  const rng = new Rng(seed);
  for (let i = prices.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [prices[i], prices[j]] = [prices[j]!, prices[i]!];
  }
  return new Map(PRICE_ITEMS.map((item, i) => [item, prices[i]!]));
}

/** Two phrasings of the question. */
const TEMPLATES: readonly ((who: string, pronoun: string, q: number, items: string) => string)[] = [
  (who, pronoun, q, items) => `${who} buys ${q} ${items}. How many coins does ${pronoun} pay?`,
  (who, pronoun, q, items) => `${who} orders ${q} ${items}. What does ${pronoun} pay in coins?`,
];

/** The expert's note for an item: the price first, so it is the first thing the expert's reply holds. */
export const expertNote = (item: string, price: number) => `${price} coins per ${item}.`;
/** The learner's answer for a quantity at a price. */
export const learnerAnswer = (quantity: number, price: number) => `\\boxed{${quantity * price}}`;

/** The row of one question (any price: the learner's training rows draw theirs at random). */
export function priceRow(template: number, person: number, item: string, quantity: number, price: number): PriceRow {
  const p = PEOPLE[person]!;
  const question = TEMPLATES[template]!(p.name, p.pronoun.toLowerCase(), quantity, `${item}s`);
  const answer = learnerAnswer(quantity, price);
  return {
    question,
    distill_expert: expertNote(item, price),
    distill_learner: answer,
    answer,
    answer_value: quantity * price,
    item,
    quantity,
    price,
    task_family: 'math',
  };
}

/** Every distinct question, with the price list's prices, in a fixed order. */
export function allPriceRows(list: ReadonlyMap<string, number> = priceList()): PriceRow[] {
  const rows: PriceRow[] = [];
  for (let t = 0; t < TEMPLATES.length; t++)
    for (let person = 0; person < PEOPLE.length; person++)
      for (const item of PRICE_ITEMS)
        for (let q = QUANTITY_RANGE[0]; q <= QUANTITY_RANGE[1]; q++) rows.push(priceRow(t, person, item, q, list.get(item)!));
  return rows;
}

export type PriceSplitName = 'train' | 'validation' | 'test';

/** Split sizes: disjoint questions drawn from the 1,536 there are. */
export const PRICE_SPLITS: Readonly<Record<PriceSplitName, number>> = { test: 200, validation: 200, train: 1000 };
const SPLIT_SEED = 20_261_205;

/** The rows of one split: one fixed shuffle of every question, cut test | validation | train. */
export function priceSplit(name: PriceSplitName): PriceRow[] {
  if (!Object.hasOwn(PRICE_SPLITS, name)) throw new RangeError(`unknown split '${String(name)}'; use train, validation or test`);
  const rows = allPriceRows();
  const rng = new Rng(SPLIT_SEED);
  for (let i = rows.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [rows[i], rows[j]] = [rows[j]!, rows[i]!];
  }
  const order: PriceSplitName[] = ['test', 'validation', 'train'];
  const start = order.slice(0, order.indexOf(name)).reduce((s, n) => s + PRICE_SPLITS[n], 0);
  return rows.slice(start, start + PRICE_SPLITS[name]);
}

/** The JSONL text of some rows, one object per line, upstream's columns first. */
export function priceJsonl(rows: readonly PriceRow[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}
