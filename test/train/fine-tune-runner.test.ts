/**
 * The tab and the runner train alike (issue 37, part 1): the Train view's one-click request through the tab's trainer
 * (workers/trainer.ts), with held-out questions asked between its steps, and `rmas train-outer` with the same settings
 * and rows, without them, write the same link bytes: both set up the run through src/train/setup.ts, and the
 * questions change nothing in the training. 10 steps of the one-click run's 40 keep it short (about 20 s on 2 cores).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { memoryStore } from '../../src/train/file-store';
import { TINY_OUTER_HP, TINY_OUTER_LOSS, tinyTrainRows } from '../../src/ui/train';
import type { TrainEvent } from '../../workers/protocol';
import { trainRun } from '../../workers/trainer';
import { trainInProcess } from '../util/rmas';
import { diskFetch, oneClick, spec } from './one-click';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-fine-tune-runner-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const STEPS = 10;

describe('the one-click fine-tune through the tab and through rmas train-outer (cpu)', () => {
  it('writes the same link bytes', async () => {
    const store = memoryStore();
    const req = oneClick();
    req.options.maxSteps = STEPS;
    req.heldOut = { ...req.heldOut!, rows: req.heldOut!.rows.slice(0, 6), every: 3 };
    const events: TrainEvent[] = [];
    const run = { id: 'run-same-bytes', stop: new AbortController().signal, paused: false, wake: null, store: null };
    await trainRun(req, run, async (e) => void events.push(e), {
      storeFor: async () => store, backend: async () => ({ backend: new CpuBackend('f32') }), fetch: diskFetch,
    });
    expect(events.filter((e) => e.type === 'heldOut').map((e) => (e as { step: number }).step)).toEqual([0, 3, 6, 9, 10]);

    const data = join(tmp, 'train.jsonl');
    writeFileSync(data, tinyTrainRows().map((r) => JSON.stringify(r)).join('\n'));
    const save = join(tmp, 'outer');
    const o = TINY_OUTER_HP;
    const r = await trainInProcess('outer', {
      style: 'tiny_distillation', dataset_name: data, save_dir: save, init_outer: 'style', backend: 'cpu', max_steps: String(STEPS),
      batch_size: String(o.batchSize), outer_lr: String(o.lr), warmup_steps: String(o.warmupSteps), lr_scheduler_type: o.scheduler,
      save_steps: '0', num_recursive_rounds: String(o.rounds), max_latent_tokens: String(o.maxLatentTokens),
      outer_latents: TINY_OUTER_LOSS.latents, supervise_final_only: TINY_OUTER_LOSS.superviseFinalOnly ? '1' : '0',
      non_last_loss_weight: String(TINY_OUTER_LOSS.nonLastLossWeight), loss_until_eos: TINY_OUTER_LOSS.untilEos ? '1' : '0',
    });
    expect(r.error).toBeNull();
    for (const key of Object.keys(spec.outer)) {
      for (const ext of ['safetensors', 'pt']) {
        const tab = Buffer.from(await store.read(`${key}.${ext}`));
        expect(Buffer.from(readFileSync(join(save, `${key}.${ext}`))).equals(tab), `${key}.${ext}`).toBe(true);
      }
      // the links moved: a run that trained nothing would pass the comparison above too
      expect(Buffer.from(readFileSync(join(save, `${key}.pt`))).equals(Buffer.from(readFileSync(spec.outer[key]!)))).toBe(false);
    }
  }, 120_000);
});
