/**
 * The training loop on the tiny models (CPU): losses fall on synthetic data, a stopped run resumes to
 * exactly (bitwise) the weights and optimizer state of an uninterrupted one, file order is kept with
 * shuffle off, and gradient accumulation equals one big batch.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { loadCheckpoint, saveCheckpoint } from '../../src/train/checkpoint';
import type { TrainJob } from '../../src/train/jobs';
import { initialState, trainLoop, wholeBatch, type LoopOptions, type StepEvent } from '../../src/train/loop';
import { memoryStore } from '../../src/train/file-store';
import { arithmeticRows, innerJob, outerJob } from './fixtures';

const be = new CpuBackend('f32');
const base: LoopOptions = {
  maxSteps: 4,
  batchSize: 2,
  gradAccumSteps: 1,
  lr: 1e-2,
  scheduler: 'cosine',
  warmupSteps: 1,
  seed: 11,
  shuffle: true,
  saveSteps: 0,
};

async function run(
  job: TrainJob,
  opts: LoopOptions,
  extra: { stopAfter?: number; store?: ReturnType<typeof memoryStore>; resume?: boolean } = {},
) {
  const events: StepEvent[] = [];
  const ctl = new AbortController();
  let state = initialState(job.size, opts);
  if (extra.resume) {
    const r = await loadCheckpoint(extra.store!, 'ckpt', job.links);
    job.optimizer.t = r.optimizerT;
    state = r.state;
  }
  const final = await trainLoop(
    job.size,
    opts,
    {
      optimizer: job.optimizer,
      runBatch: (i, s, shard) => job.runBatch(i, s, shard),
      signal: ctl.signal,
      onStep: (e) => {
        events.push(e);
        if (extra.stopAfter === e.step) ctl.abort();
      },
      save: async (s) => {
        if (extra.store)
          await saveCheckpoint(extra.store, 'ckpt', {
            kind: job.kind,
            links: job.links,
            optimizerT: job.optimizer.t,
            state: s,
            args: {},
            manifests: {},
          });
      },
    },
    state,
  );
  return { events, final };
}

async function snapshot(job: TrainJob) {
  const out: Record<string, number[]> = {};
  for (const [k, l] of job.links)
    for (const part of ['data', 'm', 'v'] as const)
      for (const [n, v] of await l.params.export(part)) out[`${k}.${n}.${part}`] = Array.from(v);
  return out;
}

describe('training loop (CPU)', () => {
  it('inner loss falls by half within 40 steps on arithmetic rows', async () => {
    const { job, dispose } = await innerJob(be, arithmeticRows(16));
    try {
      const { events } = await run(job, { ...base, maxSteps: 40, lr: 2e-2, warmupSteps: 2 });
      const first = events[0].loss;
      const last = events.slice(-5).reduce((a, e) => a + e.loss, 0) / 5;
      expect(first).toBeGreaterThan(0.5);
      expect(last).toBeLessThan(0.5 * first);
    } finally {
      dispose();
    }
  });

  it('outer loss (answer cross-entropy) falls by 10% within 12 steps', async () => {
    const { job, dispose } = await outerJob(be, arithmeticRows(8));
    try {
      const { events } = await run(job, { ...base, maxSteps: 12, lr: 2e-2, warmupSteps: 1 });
      const first = (events[0].loss + events[1].loss) / 2;
      const last = (events[10].loss + events[11].loss) / 2;
      expect(last).toBeLessThan(0.9 * first);
    } finally {
      dispose();
    }
  });

  for (const kind of ['inner', 'outer'] as const) {
    it(`${kind}: stop after 2 steps and resume for 2 equals 4 uninterrupted steps, bitwise`, async () => {
      const make = () => (kind === 'inner' ? innerJob(be, arithmeticRows(6)) : outerJob(be, arithmeticRows(4)));
      const a = await make();
      const straight = await run(a.job, base);
      const want = await snapshot(a.job);
      a.dispose();

      const store = memoryStore();
      const b = await make();
      const first = await run(b.job, base, { stopAfter: 2, store });
      expect(first.final.stopped).toBe(true);
      expect(first.final.step).toBe(2);
      b.dispose();
      const c = await make();
      const second = await run(c.job, base, { store, resume: true });
      expect(second.events.map((e) => e.step)).toEqual([3, 4]);
      expect(second.events.map((e) => e.batches)).toEqual(straight.events.slice(2).map((e) => e.batches));
      expect(second.events.map((e) => e.loss)).toEqual(straight.events.slice(2).map((e) => e.loss));
      expect(await snapshot(c.job)).toEqual(want);
      c.dispose();
    });
  }

  it('shuffle off trains in file order; epochs drop the remainder', async () => {
    const { job, dispose } = await innerJob(be, arithmeticRows(5));
    try {
      const { events } = await run(job, { ...base, shuffle: false, maxSteps: 4, lr: 0 });
      expect(events.map((e) => e.batches)).toEqual([[[0, 1]], [[2, 3]], [[0, 1]], [[2, 3]]]);
      expect(events.map((e) => e.epoch)).toEqual([0, 0, 1, 1]);
    } finally {
      dispose();
    }
  });

  it('gradient accumulation: two micro-batches at scale 1/2 give the mean of their own batch gradients', async () => {
    const rows = arithmeticRows(4);
    const grads = async (batches: number[][], scale: number) => {
      const { job, link, dispose } = await innerJob(be, rows);
      try {
        job.optimizer.zeroGrad();
        for (const b of batches) await job.runBatch(b, scale, wholeBatch(b));
        return new Map([...(await link.params.export('grad'))].map(([k, v]) => [k, Array.from(v)]));
      } finally {
        dispose();
      }
    };
    const [g1, g2, acc] = [await grads([[0, 1]], 1), await grads([[2, 3]], 1), await grads([[0, 1], [2, 3]], 0.5)];
    let peak = 0;
    let err = 0;
    for (const [k, v] of acc) {
      v.forEach((x, i) => {
        const want = (g1.get(k)![i] + g2.get(k)![i]) / 2;
        peak = Math.max(peak, Math.abs(want));
        err = Math.max(err, Math.abs(x - want));
      });
    }
    expect(peak).toBeGreaterThan(0);
    expect(err / peak).toBeLessThan(1e-6);
  });
});
