// trainLoop's held-out hook (LoopHooks.heldOut): called with the starting state before the first step and after each
// step it names, before that step's periodic save; not again when a run resumes at its end; and a stop skips it.
import { describe, expect, it } from 'vitest';
import type { AdamW } from '../autograd/ops/optim';
import type { TrainerState } from './checkpoint';
import { initialState, trainLoop, type LoopOptions } from './loop';

const OPTS: LoopOptions = {
  maxSteps: 7, batchSize: 2, gradAccumSteps: 1, lr: 1e-3, scheduler: 'constant', warmupSteps: 0, seed: 3, shuffle: true, saveSteps: 3,
};

/** An optimizer that only counts its steps (the loop's figures do not need real gradients). */
const countingOptimizer = (): AdamW => {
  // no parameters: the check of the links before each save has nothing to read
  const o = { t: 0, params: [], zeroGrad() {}, checkedStep: async () => (o.t++, 0.5) };
  return o as unknown as AdamW;
};

async function run(state: TrainerState, opts = OPTS, stopAfter?: number) {
  const log: string[] = [];
  const ctl = new AbortController();
  await trainLoop(10, opts, {
    optimizer: countingOptimizer(),
    runBatch: async (idx) => ({ loss: 1, tokens: idx.length, valid: idx.length, skipped: {} }),
    heldOut: { due: (s) => s % 3 === 0 || s === opts.maxSteps, run: async (st) => void log.push(`held-out ${st.step}`) },
    onStep: (e) => {
      log.push(`step ${e.step}`);
      if (e.step === stopAfter) ctl.abort();
    },
    save: async (st, final) => void log.push(`${final ? 'final' : 'save'} ${st.step}`),
    signal: ctl.signal,
  }, state);
  return log;
}

describe('trainLoop: held-out hook', () => {
  it('runs before the first step and after each step it names, before that step\'s save', async () => {
    expect(await run(initialState(10, OPTS))).toEqual([
      'held-out 0', 'step 1', 'step 2', 'step 3', 'held-out 3', 'save 3', 'step 4', 'step 5', 'step 6', 'held-out 6', 'save 6',
      'step 7', 'held-out 7', 'final 7',
    ]);
  });

  it('scores the state a resumed run starts from; a run at its end or stopped scores nothing more', async () => {
    const at4 = { ...initialState(10, OPTS), step: 4 };
    expect((await run(at4)).slice(0, 2)).toEqual(['held-out 4', 'step 5']);
    expect(await run({ ...initialState(10, OPTS), step: 7 })).toEqual(['final 7']);
    expect(await run(initialState(10, OPTS), OPTS, 2)).toEqual(['held-out 0', 'step 1', 'step 2', 'final 2']);
  });
});
