/**
 * rmas train-outer's held-out flags and train-inner's warning, in process on the CPU (issue 37, part 1):
 * --validation_file scores the system before the first step, every --eval_steps steps and after the last, prints each
 * score, and keeps the best step's checkpoint in save_dir/best with its score; --init_outer style starts from the
 * style's own outer links (lr 0: the links come back as shipped); misused flags are usage errors before anything
 * loads; train-inner says that the outer links were fitted to the link it replaces.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors';
import { priceJsonl, priceSplit } from '../../src/eval/tiny-prices';
import { readLinkFile } from '../../src/mas/upstream';
import { BEST_DIR, INNER_HANDOFF_WARNING } from '../../src/runner/train-cmd';
import type { TrainArgs } from '../../src/runner/train-args';
import { trainInProcess as train } from '../util/rmas';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-held-out-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const data = join(tmp, 'train.jsonl');
writeFileSync(data, priceJsonl(priceSplit('train').slice(0, 8)));
const validation = join(tmp, 'validation.jsonl');
writeFileSync(validation, priceJsonl(priceSplit('validation')));

const outerArgs = (save: string, extra: TrainArgs = {}): TrainArgs => ({
  style: 'tiny_distillation', dataset_name: data, save_dir: save, init_outer: 'style', max_steps: '2', batch_size: '2',
  num_recursive_rounds: '1', max_latent_tokens: '4', outer_latents: 'rollout', loss_until_eos: '1', save_steps: '0', ...extra,
});

describe('rmas train-outer --validation_file', () => {
  it('prints each held-out score and keeps the best step in save_dir/best; --init_outer style is the shipped links', async () => {
    const save = join(tmp, 'outer');
    const r = await train('outer', outerArgs(save, {
      validation_file: validation, max_eval_samples: '6', eval_steps: '1', latent_length: '4', outer_lr: '0',
    }));
    expect(r.error).toBeNull();
    // lr 0: the shipped system's score at every step (its first 6 validation questions right at 1 round), the first kept
    const lines = r.err.split('\n').filter((l) => l.startsWith('held-out'));
    expect(lines).toEqual([
      `held-out: 6 questions of ${validation}, 1 round, 4 latent steps, every 1 steps`,
      'held-out step 0: 6/6 (100.0%) (best so far)', 'held-out step 1: 6/6 (100.0%)', 'held-out step 2: 6/6 (100.0%)',
    ]);
    expect(r.err).toContain(`best held-out score: 6/6 (100.0%) at step 0; its links are in ${join(save, BEST_DIR)}`);
    expect(JSON.parse(r.out).held_out_best).toEqual({ step: 0, correct: 6, total: 6, dir: join(save, BEST_DIR) });
    const args = JSON.parse(readFileSync(join(save, BEST_DIR, 'train_args.json'), 'utf8')) as Record<string, unknown>;
    expect(args.held_out_best).toEqual({ step: 0, correct: 6, total: 6 });
    for (const key of ['outer_el', 'outer_le']) {
      const shipped = await readLinkFile(`models/tiny/distillation/outer/${key}.pt`);
      const saved = await readLinkFile(join(save, BEST_DIR, `${key}.safetensors`));
      for (const [name, t] of shipped) expect(Array.from(saved.get(name)!.data), `${key} ${name}`).toEqual(Array.from(t.data));
    }
  }, 120_000);

  it('a run resumed into the same save_dir goes on from the best it had', async () => {
    const save = join(tmp, 'outer-resumed');
    const flags = { validation_file: validation, max_eval_samples: '6', eval_steps: '1', outer_lr: '0' };
    expect((await train('outer', outerArgs(save, flags))).error).toBeNull();
    const r = await train('outer', outerArgs(save, { ...flags, resume: save, max_steps: '3' }));
    expect(r.error).toBeNull();
    expect(r.err.split('\n').filter((l) => l.startsWith('held-out step'))).toEqual([
      'held-out step 2: 6/6 (100.0%)', 'held-out step 3: 6/6 (100.0%)',
    ]);
    expect(JSON.parse(r.out).held_out_best).toEqual({ step: 0, correct: 6, total: 6, dir: join(save, BEST_DIR) });
  }, 120_000);

  it('refuses its flags without a validation file, and on train-inner', async () => {
    const r = await train('outer', outerArgs(join(tmp, 'x'), { eval_steps: '5' }));
    expect(r.error).toBeInstanceOf(UsageError);
    expect(r.error!.message).toBe('--eval_steps sets the held-out evaluation, which needs --validation_file FILE.jsonl');
    const inner = await train('inner', {
      style: 'tiny_distillation', role: 'learner', dataset_name: data, save_dir: join(tmp, 'y'), validation_file: validation,
      max_steps: '1',
    });
    expect(inner.error).toBeInstanceOf(UsageError);
    expect(inner.error!.message).toMatch(/^--validation_file: the held-out questions need the whole system; train-outer scores them/);
    // the warning comes first, before anything loads
    expect(inner.err.split('\n')[0]).toBe(INNER_HANDOFF_WARNING);
  }, 60_000);
});
