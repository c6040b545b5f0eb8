// The page's offline system: its style read from the manifest the worker loads, its task, Ask's default question,
// and the donor question of the "messages shuffled" ablation.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { priceSplit } from '../eval/tiny-prices';
import {
  DEFAULT_ROW, OFFLINE_STYLE, TINY, answersRight, defaultQuestion, donorQuestion, expectedAnswer, offlineTask, offlineTestQuestions,
  registryStyle,
} from './offline';
import { rolesOf, styleLabel } from './system';
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
