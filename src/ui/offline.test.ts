// The page's offline system: its style read from the manifest the worker loads, its task, Ask's default question,
// and the donor question of the "messages shuffled" ablation.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HOP_VALUES, hopCeiling, hopSplit } from '../eval/tiny-hops';
import { priceSplit } from '../eval/tiny-prices';
import {
  DEFAULT_ROW, DEFAULT_ROWS, OFFLINE_STYLE, TINY, TINY_RECURSION, answersRight, defaultQuestion, donorQuestion, expectedAnswer, isOffline,
  offlineEvalPath, offlineManifest, offlineTask, offlineTestQuestions, registryStyle,
} from './offline';
import { STYLE_CHOICES, rolesOf, styleLabel } from './system';
import { tinyTestRows } from './train';
import { stageRoles } from './timeline';

const test = priceSplit('test').map((r) => r.question);

describe('the offline system', () => {
  it("is the manifest's style, named once", () => {
    const manifest = JSON.parse(readFileSync('models/tiny-system.json', 'utf8')) as { style: string; roles: Record<string, unknown> };
    expect(OFFLINE_STYLE).toBe(manifest.style);
    expect(OFFLINE_STYLE).toBe('tiny_distillation');
    expect([registryStyle(TINY), registryStyle('mixture')]).toEqual(['tiny_distillation', 'mixture']);
    expect(styleLabel(TINY)).toBe('tiny distillation (offline)');
    // its timeline's columns are its agents in stage order, the roles the manifest lists
    expect(stageRoles(TINY)).toEqual(['expert', 'learner']);
    expect(stageRoles(TINY)).toEqual(Object.keys(manifest.roles));
    expect(rolesOf(TINY, { style: OFFLINE_STYLE, roles: manifest.roles as never })).toEqual(['expert', 'learner']);
  });

  it("asks its own task's test split, opening with a question it answers right", () => {
    expect(offlineTestQuestions()).toEqual(test);
    expect(defaultQuestion()).toBe(test[DEFAULT_ROW]);
    const row = offlineTask().split('test')[DEFAULT_ROW]!;
    expect(offlineTask().score(`So it is \\boxed{${row.answer_value}}.`, row)).toBe(true);
    // as `npm run tiny:eval` recorded it: latent mode, 1 to 3 rounds, greedy, the style's latent steps; the
    // learner alone, without the expert's message, gets it wrong
    const evalFile = JSON.parse(readFileSync('models/tiny/distillation/eval.json', 'utf8')) as {
      results: { config: string; answers: string[]; ok: boolean[] }[];
    };
    const ok = (config: string) => evalFile.results.find((r) => r.config === config)!.ok[DEFAULT_ROW];
    expect(['latent1', 'latent2', 'latent3', 'alone'].map(ok)).toEqual([true, true, true, false]);
    const latent1 = evalFile.results.find((r) => r.config === 'latent1')!;
    expect(offlineTask().score(latent1.answers[DEFAULT_ROW]!, row)).toBe(true);
  });

  it("knows the right answer to its task's questions, and the expert's note behind it", () => {
    const first = expectedAnswer(TINY, ` ${defaultQuestion()}\n`)!;
    expect(first).toEqual({ value: 32, note: '8 coins per sarb.', style: TINY }); // "Sam orders 4 sarbs."
    expect([answersRight('So \\boxed{32}.', first), answersRight('\\boxed{20}', first), answersRight('32', first)]).toEqual([
      true, false, false,
    ]);
    // every split's rows, one of validation and one of train
    for (const split of ['validation', 'train'] as const) {
      const row = priceSplit(split)[7]!;
      expect(expectedAnswer(TINY, row.question)).toEqual({ value: row.answer_value, note: row.distill_expert, style: TINY });
    }
    expect(expectedAnswer(TINY, 'What is 2 + 2?')).toBeNull();
    expect(expectedAnswer('sequential_light', defaultQuestion())).toBeNull();
  });

  it('shuffles messages with the next question of the test split', () => {
    expect(donorQuestion(TINY, test[0]!)).toBe(test[1]);
    expect(donorQuestion(TINY, ` ${test[5]!}\n`)).toBe(test[6]);
    expect(donorQuestion(TINY, test[199]!)).toBe(test[0]); // wraps round
    // a question of no row: row 0's successor
    expect(donorQuestion(TINY, 'What is 2 + 2?')).toBe(test[1]);
    // a released style: the offline default question, or the next one when that is the question
    expect(donorQuestion('sequential_light', 'What is 2 + 2?')).toBe(test[DEFAULT_ROW]);
    expect(donorQuestion('sequential_light', test[DEFAULT_ROW]!)).toBe(test[DEFAULT_ROW + 1]);
  });
});

describe('the second offline system (tiny recursion, the multi-hop task)', () => {
  const hops = hopSplit('test');

  it('is offered after the first, from its own manifest, with its own task', () => {
    const manifest = JSON.parse(readFileSync(offlineManifest(TINY_RECURSION), 'utf8')) as { style: string; roles: Record<string, unknown> };
    expect([offlineManifest(TINY), offlineManifest(TINY_RECURSION)]).toEqual(['models/tiny-system.json', 'models/tiny-recursion.json']);
    expect(manifest.style).toBe(registryStyle(TINY_RECURSION));
    expect(STYLE_CHOICES.slice(0, 3)).toEqual([TINY, TINY_RECURSION, 'sequential_light']);
    expect([isOffline(TINY), isOffline(TINY_RECURSION), isOffline('distillation')]).toEqual([true, true, false]);
    expect(styleLabel(TINY_RECURSION)).toBe('tiny recursion (offline)');
    expect(stageRoles(TINY_RECURSION)).toEqual(Object.keys(manifest.roles));
    expect([offlineEvalPath(TINY), offlineEvalPath(TINY_RECURSION), offlineEvalPath('mixture')]).toEqual([
      'models/tiny/distillation/eval.json', 'models/tiny/recursion/eval.json', null,
    ]);
    expect(() => offlineManifest('mixture')).toThrow(/not one of the page's offline systems/);
  });

  it('asks its test split, opening with a 5-hop question; words as answers, scored by the task', () => {
    expect(offlineTestQuestions(TINY_RECURSION)).toEqual(hops.map((r) => r.question));
    const row = hops[DEFAULT_ROWS[TINY_RECURSION]!]!;
    expect([defaultQuestion(TINY_RECURSION), row.hops, row.answer_value]).toEqual([row.question, 5, row.chain[5]]);
    const want = expectedAnswer(TINY_RECURSION, row.question)!;
    expect(want).toEqual({ value: row.answer_value, note: row.distill_expert, style: TINY_RECURSION });
    const verdicts = [`\\boxed{${row.answer_value}}`, `\\boxed{${row.chain[4]}}`, row.answer_value].map((t) => answersRight(t, want));
    expect(verdicts).toEqual([true, false, false]);
    // a question of the other system's task is not this one's
    expect(expectedAnswer(TINY_RECURSION, defaultQuestion())).toBeNull();
    expect(donorQuestion(TINY_RECURSION, row.question)).toBe(hops[DEFAULT_ROWS[TINY_RECURSION]! + 1]!.question);
    expect(tinyTestRows(2, TINY_RECURSION)).toEqual(hops.slice(0, 2).map((r) => ({ question: r.question, answer: r.answer_value })));
  });

  it('has a ceiling per round count and reads a lens token as the hop it supplies', () => {
    const task = offlineTask(TINY_RECURSION);
    const rows = task.split('test');
    expect([1, 2, 3].map((r) => task.ceiling!(rows, r))).toEqual([1, 2, 3].map((r) => hopCeiling(hops, r)));
    expect([1, 2, 3].map((r) => task.ceiling!(rows, r))).toEqual([1 / 3, 2 / 3, 1]);
    const [colour, shape, number, animal, tree] = (['colour', 'shape', 'number', 'animal', 'tree'] as const).map((k) => HOP_VALUES[k][0]!);
    expect([colour, ` ${shape}`, `{${number}`, animal, `${tree}}`, 'criv', '\\boxed{', '<|im_end|>'].map((t) => task.hopOf!(t))).toEqual([
      { kind: 'colour', hop: 1 }, { kind: 'shape', hop: 2 }, { kind: 'number', hop: 3 }, { kind: 'animal', hop: 4 },
      { kind: 'tree', hop: 5 }, { kind: 'item', hop: 0 }, null, null,
    ]);
    expect(offlineTask(TINY).ceiling).toBeUndefined();
  });
});
