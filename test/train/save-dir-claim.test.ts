/**
 * Whose a --save_dir is (issue 39, items 6 and 7; src/runner/save-dir.ts, src/train/loop.ts). A folder with an earlier
 * run's checkpoints is refused without --resume, continued with it, started over with --overwrite_output_dir (the earlier
 * checkpoints deleted, so that --resume continues the new run); other files need --overwrite_output_dir and stay; a
 * model folder and the root are never written. The links are checked before every save: a learning rate that overflows
 * them stops the run with NonFiniteLoss before the save, and every checkpoint it names is finite. train-inner in this
 * process on the tiny Qwen3, CPU, 1 to 3 steps.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readLinkFile } from '../../src/mas/upstream';
import type { TrainArgs } from '../../src/runner/train-args';
import { arithmeticRows } from './fixtures';
import { trainInProcess as train } from '../util/rmas';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-save-claim-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const rowsFile = join(tmp, 'rows.jsonl');
writeFileSync(rowsFile, arithmeticRows(6).map((r) => JSON.stringify(r)).join('\n'));

const args = (save: string, extra: TrainArgs = {}): TrainArgs => ({
  model_name_or_path: 'models/tiny/qwen3-tiny', mas_design: 'sequential', mas_role: 'planner', dataset_name: rowsFile, save_dir: save,
  max_steps: '2', save_steps: '1', batch_size: '2', adapter_lr: '1e-2', warmup_steps: '1', seed: '3', ...extra,
});
const trainArgs = (dir: string) => JSON.parse(readFileSync(join(dir, 'train_args.json'), 'utf8')) as Record<string, unknown>;

describe('a used --save_dir', () => {
  it('is refused without --resume, naming its checkpoints and both flags; nothing in it changes', async () => {
    const save = join(tmp, 'used');
    expect((await train('inner', args(save))).error).toBeNull();
    const before = readFileSync(join(save, 'adapter.safetensors'));
    const r = await train('inner', args(save, { seed: '4' }));
    expect(r.error?.name).toBe('OutputDirNotEmpty');
    expect(r.error?.message).toBe(`--save_dir ${save} holds the checkpoints of an earlier run (checkpoint-1, step 2 at its top). Pass ` +
      `--resume ${save} to continue that run, or --overwrite_output_dir to start over (its checkpoints are deleted first), or give a new ` +
      'folder (nothing was written)');
    expect(r.err).not.toContain('loading rows');
    expect(readFileSync(join(save, 'adapter.safetensors')).equals(before)).toBe(true);
    expect(trainArgs(save).seed).toBe('3');
  });

  it('--resume of it (or of one of its checkpoints) continues it; --overwrite_output_dir starts over, and --resume then continues ' +
    'the new run', async () => {
    const save = join(tmp, 'again');
    expect((await train('inner', args(save))).error).toBeNull();
    const cont = await train('inner', args(save, { resume: join(save, 'checkpoint-1'), max_steps: '3' }));
    expect(cont.error).toBeNull();
    expect(cont.err).toContain('at step 1');
    expect(readdirSync(save).filter((n) => n.startsWith('checkpoint-')).sort()).toEqual(['checkpoint-1', 'checkpoint-2']);
    const over = await train('inner', args(save, { overwrite_output_dir: true, max_steps: '1', seed: '4' }));
    expect(over.error).toBeNull();
    expect(over.err).toContain(`--overwrite_output_dir: deleted the earlier run's checkpoint-1, checkpoint-2, adapter.safetensors, `);
    // only the new run is left: its one step at the top, no checkpoint-N of the earlier run
    expect(readdirSync(save).filter((n) => n.startsWith('checkpoint-'))).toEqual([]);
    expect(trainArgs(save).seed).toBe('4');
    const resumed = await train('inner', args(save, { resume: save, max_steps: '2', seed: '4' }));
    expect(resumed.error).toBeNull();
    expect(resumed.err).toContain(`resuming from ${save} at step 1`);
  });

  it('holding other files: refused, or written beside them with --overwrite_output_dir', async () => {
    const save = join(tmp, 'notes');
    cpSync(rowsFile, join(save, 'my-notes.jsonl'));
    const r = await train('inner', args(save));
    expect(r.error?.name).toBe('OutputDirNotEmpty');
    expect(r.error?.message).toContain(`--save_dir ${save} is not empty (it holds my-notes.jsonl) and holds no checkpoint of this run`);
    expect(r.error?.message).toContain('--overwrite_output_dir');
    expect((await train('inner', args(save, { overwrite_output_dir: true }))).error).toBeNull();
    expect(readFileSync(join(save, 'my-notes.jsonl')).equals(readFileSync(rowsFile))).toBe(true);
    expect((await readLinkFile(join(save, 'adapter.safetensors'))).size).toBeGreaterThan(0);
  });

  it('a model folder is never written, with or without --overwrite_output_dir; nor is the root', async () => {
    const model = join(tmp, 'model');
    cpSync('models/tiny/qwen3-tiny', model, { recursive: true });
    const files = readdirSync(model).sort();
    const weights = readFileSync(join(model, 'model.safetensors'));
    for (const extra of [{}, { overwrite_output_dir: true }, { resume: model }] as TrainArgs[]) {
      const r = await train('inner', args(model, extra));
      expect(r.error?.name, JSON.stringify(extra)).toBe('OutputDirNotEmpty');
      expect(r.error?.message).toMatch(new RegExp(`^--save_dir ${model} holds a model \\(config\\.json, model\\.safetensors, .*\\) ` +
        'that no ' +
        'training run of rmas wrote; it is never written into'));
    }
    expect(readdirSync(model).sort()).toEqual(files);
    expect(readFileSync(join(model, 'model.safetensors')).equals(weights)).toBe(true);
    const root = await train('inner', args('/', { overwrite_output_dir: true }));
    expect(root.error?.message).toBe("--save_dir / is the file system's root; a training run writes only into a folder of its own " +
      '(e.g. out/NAME): give one (nothing was written)');
    expect(existsSync('/.lock')).toBe(false);
  });
});

describe('non-finite links are never saved', () => {
  it('--adapter_lr 1e308 --max_steps 2: NonFiniteLoss at the final save, which is not made', async () => {
    const save = join(tmp, 'overflow');
    const r = await train('inner', args(save, { adapter_lr: '1e308', save_steps: '0' }));
    expect(r.error?.name).toBe('NonFiniteLoss');
    expect(r.error?.message).toMatch(/^step 2: after its update the links hold (\d+) of \1 values non-finite \(the first, -?Infinity in /);
    expect(r.error?.message).toContain('the final save was not made. Lower --adapter_lr (now 1e+308) or check the data; nothing ' +
      'non-finite was saved, and no checkpoint was saved yet');
    expect(existsSync(join(save, 'adapter.safetensors'))).toBe(false);
  });

  it('with --save_steps 1 the checkpoint the message names is finite, and the overflowed step has none', async () => {
    const save = join(tmp, 'overflow-steps');
    const r = await train('inner', args(save, { adapter_lr: '1e308', max_steps: '3' }));
    expect(r.error?.name).toBe('NonFiniteLoss');
    expect(r.error?.message).toContain(`the save of step 2 was not made. Lower --adapter_lr (now 1e+308) or check the data; nothing ` +
      `non-finite was saved, the last checkpoint is ${join(save, 'checkpoint-1')}`);
    // readLinkFile refuses any non-finite value
    expect((await readLinkFile(join(save, 'checkpoint-1', 'adapter.safetensors'))).size).toBeGreaterThan(0);
    expect(readdirSync(save).filter((n) => n.startsWith('checkpoint-'))).toEqual(['checkpoint-1']);
  });
});
