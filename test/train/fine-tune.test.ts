/**
 * The Train view's one-click fine-tune (issue 37, part 1) on the CPU backend in Node: the request the view builds for
 * the offline system (an outer-loop run from the shipped outer links at 3 rounds, src/ui/train.ts TINY_OUTER_*),
 * through the tab's trainer (workers/trainer.ts), raises the held-out score it reports on the 200 validation
 * questions. test/train/fine-tune-runner.test.ts checks that `rmas train-outer` writes the same links.
 *
 * Slow (about a minute on 2 cores): not in test/util/fast-set.ts's QUICK_TEST, so `npm test` runs it, not test:fast.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { memoryStore } from '../../src/train/file-store';
import { TINY_OUTER_HP } from '../../src/ui/train';
import type { TrainEvent } from '../../workers/protocol';
import { BEST_DIR, trainRun, type TrainDeps } from '../../workers/trainer';
import { diskFetch, oneClick, spec } from './one-click';

const store = memoryStore();
const deps: TrainDeps = { storeFor: async () => store, backend: async () => ({ backend: new CpuBackend('f32') }), fetch: diskFetch };

describe('the one-click fine-tune of the offline system (cpu)', () => {
  it('raises the held-out score it shows, and keeps its best step as a checkpoint', async () => {
    const events: TrainEvent[] = [];
    const run = { id: 'run-one-click', stop: new AbortController().signal, paused: false, wake: null, store: null };
    // the view's request, scored at its start and its end only (every 40 steps: the same links, fewer questions asked)
    const req = oneClick();
    req.heldOut!.every = TINY_OUTER_HP.maxSteps;
    const result = await trainRun(req, run, async (e) => void events.push(e), deps);
    expect(result).toMatchObject({ steps: TINY_OUTER_HP.maxSteps, stopped: false });

    const held = events.flatMap((e) => (e.type === 'heldOut' ? [e] : []));
    expect(held.map((e) => e.step)).toEqual([0, 40]);
    // before: the shipped system at 3 rounds, as `rmas run --num_recursive_rounds 3` scores it (models/tiny/README.md)
    expect(held[0]).toMatchObject({ step: 0, correct: 191, total: 200, best: true });
    // after: 4 more right (MARGIN, 2 points); measured 195/200, as rmas train-outer's held-out score at step 40
    const MARGIN = 4;
    expect(held[1]!.correct).toBeGreaterThanOrEqual(held[0]!.correct + MARGIN);
    const done = events.at(-1) as Extract<TrainEvent, { type: 'done' }>;
    expect(done).toMatchObject({ type: 'done', steps: 40, best: { step: 40, correct: held[1]!.correct, total: 200 } });
    // the best step's links are a checkpoint of their own, recording its score, the same links as the last step's here
    const bestArgs = JSON.parse(new TextDecoder().decode(await store.read(`${BEST_DIR}/train_args.json`))) as Record<string, unknown>;
    expect(bestArgs.held_out_best).toEqual(done.best);
    for (const key of Object.keys(spec.outer)) {
      expect(Buffer.from(await store.read(`${BEST_DIR}/${key}.safetensors`)).equals(Buffer.from(await store.read(`${key}.safetensors`))))
        .toBe(true);
    }
  }, 240_000);
});
