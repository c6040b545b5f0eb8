// The held-out score of a training run (held-out.ts): which steps are scored, the best step and its ties, the text the
// runner prints, and the hook trainLoop calls, with the states it is given.
import { describe, expect, it } from 'vitest';
import type { MasSystem } from '../mas/system';
import { initialState } from '../train/loop';
import { BestHeldOut, heldOutAccuracy, heldOutDue, heldOutHook, heldOutText } from './held-out';
import { InvalidArgument } from '../errors';

describe('held-out scores', () => {
  it('scores before the first step, every N steps and after the last', () => {
    const due = Array.from({ length: 26 }, (_, s) => s).filter((s) => heldOutDue(s, 10, 25));
    expect(due).toEqual([0, 10, 20, 25]);
    expect(Array.from({ length: 7 }, (_, s) => s).filter((s) => heldOutDue(s, 3, 6))).toEqual([0, 3, 6]);
  });

  it('keeps the step with the most right answers; a tie keeps the earlier step', () => {
    const b = new BestHeldOut();
    expect(b.offer({ step: 0, correct: 38, total: 40 })).toBe(true);
    expect(b.offer({ step: 10, correct: 37, total: 40 })).toBe(false);
    expect(b.offer({ step: 20, correct: 38, total: 40 })).toBe(false);
    expect(b.best).toEqual({ step: 0, correct: 38, total: 40 });
    expect(b.offer({ step: 30, correct: 40, total: 40 })).toBe(true);
    expect(b.offer({ step: 40, correct: 39, total: 40 })).toBe(false);
    expect(b.best).toEqual({ step: 30, correct: 40, total: 40 });
  });

  it('goes on from a best kept before a resume, and refuses scores over other questions', () => {
    const b = new BestHeldOut({ step: 20, correct: 39, total: 40 });
    expect(b.offer({ step: 20, correct: 38, total: 40 })).toBe(false);
    expect(() => b.offer({ step: 30, correct: 5, total: 5 })).toThrow(InvalidArgument);
  });

  it('says the score as questions right and percent', () => {
    const p = { step: 10, correct: 191, total: 200 };
    expect(heldOutAccuracy(p)).toBeCloseTo(0.955, 12);
    expect(heldOutText(p)).toBe('191/200 (95.5%)');
    expect(heldOutAccuracy({ step: 0, correct: 0, total: 0 })).toBe(0);
  });

  it('the hook scores nothing once the run is stopped, and checks its settings first', async () => {
    const rows = [{ question: 'Ann buys 3 glims. How many coins does she pay?', answer: '12' }];
    const sunk: number[] = [];
    const stop = new AbortController();
    stop.abort();
    // a stopped run's hook returns before it asks anything (the system here could answer nothing)
    const hook = await heldOutHook({} as MasSystem, { rows, every: 2, rounds: 1, latentSteps: 4 }, 5,
      async (p) => void sunk.push(p.step), new BestHeldOut(), stop.signal);
    expect([0, 1, 2, 4, 5].map((s) => hook.due(s))).toEqual([true, false, true, true, true]);
    await hook.run(initialState(1, { seed: 1, shuffle: false }));
    expect(sunk).toEqual([]);
    await expect(heldOutHook({} as MasSystem, { rows, every: 0, rounds: 1, latentSteps: 4 }, 5, async () => {}))
      .rejects.toThrow(InvalidArgument);
    await expect(heldOutHook({} as MasSystem, { rows: [], every: 1, rounds: 1, latentSteps: 4 }, 5, async () => {}))
      .rejects.toThrow('held-out evaluation: no validation rows; give some or turn it off');
  });
});
