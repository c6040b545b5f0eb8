/**
 * What the Train view's inner loop shows on the offline system (issue 37, part 1): an inner fine-tune of the expert's
 * link (TINY_HP, from the shipped link) through the tab's trainer, its held-out questions asked of the whole system with
 * the link as it trains (the other agent and the outer links frozen), at one round. The loss falls while the held-out
 * score falls too (the outer links were fitted to the link it replaces, which the view warns of), and the best step
 * it keeps is the link it started from.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { memoryStore } from '../../src/train/file-store';
import { TRAIN_DEFAULTS } from '../../src/train/defaults';
import { TINY_HP, tinyTrainRows, tinyValidationRows } from '../../src/ui/train';
import type { TrainEvent, TrainRequest } from '../../workers/protocol';
import { trainRun } from '../../workers/trainer';
import { ROOT, diskFetch, spec } from './one-click';

const bytes = (path: string) => new Uint8Array(readFileSync(path));

describe('an inner fine-tune of the offline system, scored on held-out questions (cpu)', () => {
  it('shows the held-out score fall while the loss falls, and keeps the starting link as its best', async () => {
    const req: TrainRequest = {
      kind: 'inner', backend: 'cpu', rows: tinyTrainRows(), style: 'tiny_distillation', prompts: ROOT + spec.prompts,
      model: ROOT + spec.roles.expert!.model, role: 'expert', initLinks: { adapter: bytes(spec.roles.expert!.innerLink) },
      agents: Object.fromEntries(Object.entries(spec.roles).map(([r, f]) => [r, { model: ROOT + f.model, innerLink: bytes(f.innerLink) }])),
      heldOut: {
        rows: tinyValidationRows(20), every: 20, latentSteps: 4, rounds: 1,
        outerLinks: Object.fromEntries(Object.entries(spec.outer).map(([k, f]) => [k, bytes(f)])),
      },
      options: { ...TINY_HP, scheduler: TRAIN_DEFAULTS.scheduler, seed: TRAIN_DEFAULTS.seed },
    };
    const events: TrainEvent[] = [];
    const store = memoryStore();
    const run = { id: 'run-inner-held-out', stop: new AbortController().signal, paused: false, wake: null, store: null };
    await trainRun(req, run, async (e) => void events.push(e), {
      storeFor: async () => store, backend: async () => ({ backend: new CpuBackend('f32') }), fetch: diskFetch,
    });
    const held = events.flatMap((e) => (e.type === 'heldOut' ? [{ step: e.step, correct: e.correct }] : []));
    const losses = events.flatMap((e) => (e.type === 'step' ? [e.loss] : []));
    const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
    // measured: the mean loss of the first 5 steps 0.254, of the last 5 0.121; the first 20 validation questions
    // 20/20 right before, 14/20 after 20 steps and after 40
    expect(mean(losses.slice(0, 5))).toBeCloseTo(0.254, 2);
    expect(mean(losses.slice(-5))).toBeCloseTo(0.121, 2);
    expect(held).toEqual([{ step: 0, correct: 20 }, { step: 20, correct: 14 }, { step: 40, correct: 14 }]);
    expect((events.at(-1) as Extract<TrainEvent, { type: 'done' }>).best).toEqual({ step: 0, correct: 20, total: 20 });
  }, 120_000);
});
