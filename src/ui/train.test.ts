// Train view helpers: uploads parsed by extension, usable rows per role, the preview table, speed and time.
import { describe, expect, it } from 'vitest';
import { priceSplit } from '../eval/tiny-prices';
import { duration, parseUpload, preview, stepsPerSec, tinyTestRows, tinyTrainRows, usableRows } from './train';

const row = (i: number, extra: Record<string, unknown> = {}) => ({
  question: `q${i}`,
  plan: `p${i}`,
  refined_plan: `r${i}`,
  answer: `a${i}`,
  ...extra,
});

describe('train helpers', () => {
  it('parses JSONL by extension and JSON with or without a field', () => {
    expect(parseUpload('{"a":1}\n\n{"a":2}\n', 'd.jsonl')).toEqual([{ a: 1 }, { a: 2 }]);
    expect(parseUpload('[{"a":1}]', 'd.json')).toEqual([{ a: 1 }]);
    expect(parseUpload('{"data":[{"a":3}]}', 'd.json', 'data')).toEqual([{ a: 3 }]);
    expect(() => parseUpload('{"data":[{"a":3}]}', 'd.json')).toThrow(/its array fields: data/);
  });

  it('counts rows that give the role an example', () => {
    const rows = [row(1), row(2, { plan: '' }), row(3, { refined_plan: undefined }), { question: 'only' }];
    expect(usableRows(rows, 'sequential_light', 'planner')).toBe(2);
    expect(usableRows(rows, 'sequential_light', '')).toBe(1); // every role of the style
    expect(usableRows(rows, 'nope', 'planner')).toBe(0);
    // 'tiny' is the offline system's style, tiny_distillation: an expert and a learner, no planner
    const distill = [
      { question: 'q', distill_expert: '4 coins per glim.', distill_learner: '\\boxed{12}' },
      { question: 'q', distill_expert: '4 coins per glim.' }, // the learner's target is missing
      { question: 'q', distill_learner: '\\boxed{12}' }, // and here the expert's message its slot holds
    ];
    expect(['expert', 'learner', ''].map((role) => usableRows(distill, 'tiny', role))).toEqual([2, 1, 1]);
    expect(usableRows(rows, 'tiny', 'planner')).toBe(0);
  });

  it("gives the offline system's own task: its test split to evaluate, its training split to train every role", () => {
    const test = priceSplit('test');
    expect(tinyTestRows(2)).toEqual(test.slice(0, 2).map((r) => ({ question: r.question, answer: String(r.answer_value) })));
    expect(tinyTestRows()).toHaveLength(200);
    const train = tinyTrainRows();
    const first = priceSplit('train')[0]!;
    expect(train).toHaveLength(1000);
    // the upstream columns of a distillation row, and only those
    expect(train[0]).toEqual({
      question: first.question,
      distill_expert: first.distill_expert,
      distill_learner: first.distill_learner,
      answer: first.answer,
    });
    expect([usableRows(train, 'tiny', 'expert'), usableRows(train, 'tiny', 'learner')]).toEqual([1000, 1000]);
  });

  it('previews the first rows with short cells', () => {
    const p = preview([row(1, { long: 'x'.repeat(100), n: [1, 2] }), ...Array.from({ length: 9 }, (_, i) => row(i + 2))], 5, 10);
    expect(p.columns).toEqual(['question', 'plan', 'refined_plan', 'answer', 'long', 'n']);
    expect(p.cells.length).toBe(5);
    expect(p.cells[0]).toEqual(['q1', 'p1', 'r1', 'a1', 'xxxxxxxxx…', '[1,2]']);
    expect(p.cells[1]![4]).toBe('');
  });

  it('measures steps/s over the last steps and formats durations', () => {
    expect(stepsPerSec([0])).toBeNaN();
    expect(stepsPerSec([0, 500, 1000, 1500])).toBe(2);
    expect(stepsPerSec([0, 10_000, 10_500, 11_000], 2)).toBe(2); // only the last two intervals
    expect([duration(12.4), duration(185), duration(3720), duration(NaN)]).toEqual(['12 s', '3 min 05 s', '1 h 02 min', '—']);
  });
});
