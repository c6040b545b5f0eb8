/**
 * The one-click fine-tune's held-out questions on WebGPU (Dawn in Node; issue 37, part 1): the tab's trainer asks
 * them of the system with its outer links as they train, batched on the device, and scores them as the CPU backend
 * does. 2 steps, 8 questions: validation questions 28-35, of which the shipped system misses 31 at 3 rounds.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import type { Backend } from '../../src/tensor/backend';
import { memoryStore } from '../../src/train/file-store';
import type { TrainEvent } from '../../workers/protocol';
import { trainRun } from '../../workers/trainer';
import { gpuBackend } from '../util/gpu';
import { diskFetch, oneClick } from './one-click';

async function scores(backend: Backend) {
  const req = oneClick();
  req.options = { ...req.options, maxSteps: 2 };
  req.heldOut = { ...req.heldOut!, rows: req.heldOut!.rows.slice(28, 36), every: 1 };
  const events: TrainEvent[] = [];
  const store = memoryStore();
  const run = { id: 'run-gpu-held-out', stop: new AbortController().signal, paused: false, wake: null, store: null };
  const deps = { storeFor: async () => store, backend: async () => ({ backend }), fetch: diskFetch };
  await trainRun(req, run, async (e) => void events.push(e), deps);
  return events.flatMap((e) => (e.type === 'heldOut' ? [[e.step, e.correct, e.total]] : []));
}

describe('held-out questions during an outer run on WebGPU', () => {
  it('score as on the CPU backend', async () => {
    const gpu = await scores(await gpuBackend());
    expect(gpu[0]).toEqual([0, 7, 8]);
    expect(gpu.map((p) => p[0])).toEqual([0, 1, 2]);
    expect(gpu).toEqual(await scores(new CpuBackend('f32')));
  }, 300_000);
});
