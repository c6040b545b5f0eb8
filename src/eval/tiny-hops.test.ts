// The multi-hop task of the recursion system (tiny-hops.ts): the world and splits are fixed by their seeds, the
// splits are disjoint and hold the three hop counts in equal parts, and the ceiling per round count is what the
// gold transcript answers: a question of h hops needs (h + 1) / 2 rounds.
import { describe, expect, it } from 'vitest';
import {
  allHopRows,
  goldTranscript,
  HOP_ITEMS,
  HOP_VALUES,
  hopCeiling,
  hopSplit,
  hopWorld,
  kindOf,
  scoreHops,
  type HopRow,
} from './tiny-hops';

const world = hopWorld();
const splits = { test: hopSplit('test'), validation: hopSplit('validation'), train: hopSplit('train') };
const finalAnswer = (row: HopRow, rounds: number) => goldTranscript(world, row, rounds).at(-1)!.target;

describe('tiny-hops task', () => {
  it('is a pure function of its seeds (reference rows)', () => {
    expect(hopSplit('test')).toEqual(splits.test);
    expect(splits.test.slice(0, 3).map((r) => [r.question, r.chain.join('>'), r.answer])).toEqual(REFERENCE_TEST_ROWS);
    expect([...world.get('item')!.entries()].slice(0, 4)).toEqual(REFERENCE_ITEM_COLOURS);
  });

  it('has disjoint splits of 192 / 96 / 576 questions, a third of each of 1, 3 and 5 hops', () => {
    expect(allHopRows()).toHaveLength(864);
    expect(Object.values(splits).map((s) => s.length)).toEqual([192, 96, 576]);
    const seen = new Set<string>();
    for (const [name, rows] of Object.entries(splits)) {
      for (const r of rows) {
        expect(seen.has(r.question), `${name}: ${r.question}`).toBe(false);
        seen.add(r.question);
      }
      for (const h of [1, 3, 5]) expect(rows.filter((r) => r.hops === h).length).toBe(rows.length / 3);
    }
  });

  it('builds a world of disjoint kinds: items two to a colour, the other lookups permutations', () => {
    const colours = [...world.get('item')!.values()];
    for (const c of HOP_VALUES.colour) expect(colours.filter((x) => x === c)).toHaveLength(2);
    for (const k of ['colour', 'shape', 'number', 'animal'] as const) expect(new Set(world.get(k)!.values()).size).toBe(8);
    const all = [...HOP_ITEMS, ...Object.values(HOP_VALUES).flat()];
    expect(new Set(all).size).toBe(all.length);
    expect(all.map(kindOf)).not.toContain(undefined);
  });

  it('has a ceiling per round count of the questions with at most 2R − 1 hops, which the gold transcript answers', () => {
    const rows = splits.test;
    expect([1, 2, 3].map((r) => hopCeiling(rows, r))).toEqual([1 / 3, 2 / 3, 1]);
    for (const rounds of [1, 2, 3]) {
      const answered = rows.filter((r) => scoreHops(finalAnswer(r, rounds), r)).length;
      expect(answered / rows.length).toBe(hopCeiling(rows, rounds));
      // the rows it cannot answer yet end on a value of another kind: no lucky hits
      for (const r of rows.filter((x) => x.hops > 2 * rounds - 1)) expect(scoreHops(finalAnswer(r, rounds), r)).toBe(false);
    }
  });

  it('alternates the lookups: the learner never sends the expert a value of its own kinds', () => {
    const row = splits.test.find((r) => r.hops === 5)!;
    const stages = goldTranscript(world, row, 3).map((s) => `${s.role}: ${s.slot} -> ${s.target}`);
    const [item, colour, shape, number, animal, tree] = row.chain;
    expect(item).toBe(row.item);
    const b = (v: string | undefined) => `\\boxed{${v}}`;
    expect(stages).toEqual([
      `expert:  -> ${b(colour)}`,
      `learner: ${b(colour)} -> ${b(shape)}`,
      `expert: ${b(shape)} -> ${b(number)}`,
      `learner: ${b(number)} -> ${b(animal)}`,
      `expert: ${b(animal)} -> ${b(tree)}`,
      `learner: ${b(tree)} -> ${b(tree)}`,
    ]);
  });

  it('scores the last boxed value', () => {
    const row = { answer_value: 'oak' };
    const texts = ['\\boxed{oak}', '\\boxed{elm} \\boxed{ oak }', 'oak', '\\boxed{elm}'];
    expect(texts.map((t) => scoreHops(t, row))).toEqual([true, true, false, false]);
  });
});

const REFERENCE_TEST_ROWS = [
  ['Mia asks: which number goes with the mirn?', 'mirn>white>cube>five', '\\boxed{five}'],
  ['Mia wants the number of the frim. Which is it?', 'frim>red>circle>four', '\\boxed{four}'],
  ['Tom wants the number of the kelt. Which is it?', 'kelt>blue>arch>eight', '\\boxed{eight}'],
];
const REFERENCE_ITEM_COLOURS = [['glim', 'grey'], ['zorp', 'black'], ['brin', 'black'], ['quon', 'white']];
