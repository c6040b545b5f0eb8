/**
 * Resume on WebGPU (Dawn in Node): 2 steps, stop, resume for 2 equals 4 uninterrupted steps. The issue
 * allows a tolerance on the GPU (reductions may order differently between runs); measured: identical
 * bytes on lavapipe, bound 1e-6 of each tensor's peak.
 */
import { describe, expect, it } from 'vitest';
import { loadCheckpoint, saveCheckpoint } from '../../src/train/checkpoint';
import type { TrainJob } from '../../src/train/jobs';
import { initialState, trainLoop, type LoopOptions } from '../../src/train/loop';
import { memoryStore } from '../../src/train/file-store';
import { gpuBackend } from '../util/gpu';
import { arithmeticRows, innerJob, outerJob } from './fixtures';

const opts: LoopOptions = {
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

async function run(job: TrainJob, store: ReturnType<typeof memoryStore> | null, stopAfter?: number, resume = false) {
  const ctl = new AbortController();
  let state = initialState(job.size, opts);
  if (resume) {
    const r = await loadCheckpoint(store!, 'ckpt', job.links);
    job.optimizer.t = r.optimizerT;
    state = r.state;
  }
  return trainLoop(
    job.size,
    opts,
    {
      optimizer: job.optimizer,
      runBatch: (i, s, shard) => job.runBatch(i, s, shard),
      signal: ctl.signal,
      onStep: (e) => void (e.step === stopAfter && ctl.abort()),
      save: async (s) =>
        void (
          store &&
          (await saveCheckpoint(store, 'ckpt', {
            kind: job.kind,
            links: job.links,
            optimizerT: job.optimizer.t,
            state: s,
            args: {},
            manifests: {},
          }))
        ),
    },
    state,
  );
}

async function weights(job: TrainJob) {
  const out = new Map<string, Float32Array>();
  for (const [k, l] of job.links)
    for (const part of ['data', 'm', 'v'] as const) for (const [n, v] of await l.params.export(part)) out.set(`${k}.${n}.${part}`, v);
  return out;
}

describe('resume on WebGPU', () => {
  for (const kind of ['inner', 'outer'] as const) {
    it(`${kind}: 2 + 2 steps equal 4 steps`, async () => {
      const be = await gpuBackend();
      const make = () => (kind === 'inner' ? innerJob(be, arithmeticRows(6)) : outerJob(be, arithmeticRows(4)));
      const a = await make();
      await run(a.job, null);
      const want = await weights(a.job);
      a.dispose();
      const store = memoryStore();
      const b = await make();
      expect((await run(b.job, store, 2)).step).toBe(2);
      b.dispose();
      const c = await make();
      await run(c.job, store, undefined, true);
      const got = await weights(c.job);
      c.dispose();
      for (const [k, w] of want) {
        const g = got.get(k)!;
        let peak = 0;
        let err = 0;
        w.forEach((x, i) => { peak = Math.max(peak, Math.abs(x)); err = Math.max(err, Math.abs(g[i] - x)); });
        expect(err / (peak || 1), k).toBeLessThanOrEqual(1e-6);
      }
    });
  }
});
