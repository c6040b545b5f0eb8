/**
 * `rmas train-inner` (trainCmd in this process) under crashes: each store call of its saves (src/runner/train-cmd.ts's
 * nodeStore, counted by a wrapper) and each model file it places beside a checkpoint (before the hard link, and after
 * it but before the rename into place) is made to throw as if the process died there, one run per point. Then, as a
 * new process would: every checkpoint listCheckpoints finds holds exactly the uninterrupted run's bytes for its step,
 * the newest is the one before the interrupted save or that save itself, and the same command with `--resume
 * SAVE_DIR` (or, when nothing was saved, without it) ends with the uninterrupted run's save_dir, file for file and
 * byte for byte: the links, optimizer.safetensors, the placed model files, nothing partial left. By default the
 * points of the last save of a 2-step run; RMAS_FAULTS=full: every point of a 3-step run with --save_total_limit 1.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { QuotaExceeded } from '../../src/errors';
import type { TrainArgs } from '../../src/runner/train-args';
import { listCheckpoints } from '../../src/train/checkpoint';
import { type FileStore, inFolder, nodeStore, recoverCheckpoint } from '../../src/train/file-store';
import { arithmeticRows } from '../train/fixtures';
import { trainInProcess as train } from '../util/rmas';
import { Faults, InjectedCrash, storeTree, treeDiff } from './inject';

const hook = vi.hoisted(() => ({ faults: null as null | { tick(op: string, path: string): void } }));
vi.mock(import('../../src/train/file-store'), async (orig) => {
  const m = await orig();
  const { faultyStore } = await import('./inject');
  return { ...m, nodeStore: (root: string) => faultyStore(m.nodeStore(root), { tick: (op, p = op) => hook.faults?.tick(op, p) }) };
});
vi.mock(import('../../src/train/model-files'), async (orig) => {
  const m = await orig();
  const { linkSync } = await import('node:fs');
  const link = (from: string, to: string) => {
    hook.faults?.tick(`link ${to}`, to);
    linkSync(from, to);
    hook.faults?.tick(`placed ${to}`, to); // linked under its temporary name, not yet renamed into place
  };
  return { ...m, placeModelFiles: (source: string, dest: string) => m.placeModelFiles(source, dest, link) };
});

const FULL = process.env.RMAS_FAULTS === 'full';
const STEPS = FULL ? 3 : 2;
const tmp = mkdtempSync(join(tmpdir(), 'rmas-faults-runner-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const rowsFile = join(tmp, 'rows.jsonl');
writeFileSync(rowsFile, arithmeticRows(6).map((r) => JSON.stringify(r)).join('\n'));

const args = (save: string, extra: TrainArgs = {}): TrainArgs => ({
  model_name_or_path: 'models/tiny/qwen3-tiny', mas_design: 'sequential', mas_role: 'planner', dataset_name: rowsFile, save_dir: save,
  max_steps: String(STEPS), save_steps: '1', save_total_limit: '1', batch_size: '2', adapter_lr: '1e-2', warmup_steps: '1', seed: '3',
  logging_steps: '1', ...extra,
});

/** train_args.json records the command line: the save_dir, --resume and --save_total_limit differ between the runs compared. */
function normal(path: string, b: Uint8Array): Uint8Array {
  if (!path.endsWith('train_args.json')) return b;
  const a = JSON.parse(new TextDecoder().decode(b)) as Record<string, unknown>;
  for (const k of ['save_dir', 'resume', 'save_total_limit']) delete a[k];
  return new TextEncoder().encode(JSON.stringify(a));
}
const normalTree = (t: Map<string, Uint8Array>) => new Map([...t].map(([p, b]) => [p, normal(p, b)]));

/** The checkpoint in `dir`: the files its trainer_state.json names, normalised. */
async function checkpointFiles(store: FileStore, dir: string) {
  const st = JSON.parse(new TextDecoder().decode(await store.read(inFolder(dir, 'trainer_state.json')))) as { files: string[] };
  return new Map(await Promise.all(st.files.map(async (f) => [f, normal(f, await store.read(inFolder(dir, f)))] as const)));
}

describe('train-inner under crashes at each point of its saves', () => {
  const what = FULL ? 'every point of a 3-step run' : 'the last save of a 2-step run';
  it(`${what}: the resumed save_dir is the uninterrupted one`, async () => {
    // the uninterrupted run, and one that keeps every checkpoint folder: the bytes of each step
    const whole = join(tmp, 'whole');
    expect((await train('inner', args(whole))).error).toBeNull();
    const want = normalTree(await storeTree(nodeStore(whole)));
    const every = join(tmp, 'every');
    expect((await train('inner', args(every, { save_total_limit: '99' }))).error).toBeNull();
    const saved = new Map<number, Map<string, Uint8Array>>();
    for (const c of await listCheckpoints(nodeStore(every), '.')) saved.set(c.step, await checkpointFiles(nodeStore(every), c.dir));
    expect([...saved.keys()]).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));

    const faults = new Faults();
    // the points of the run, and where the last save starts (its first model file placed at the top)
    faults.arm(0);
    hook.faults = faults;
    expect((await train('inner', args(join(tmp, 'count')))).error).toBeNull();
    hook.faults = null;
    const ops = [...faults.ops];
    const first = FULL ? 0 : ops.findIndex((op) => op.startsWith(`link ${join(tmp, 'count')}/.`));
    const points = ops.length - first;
    // each save: its 5 model files placed (2 points each) and 15 store calls; the pruning of checkpoint-1 (full)
    expect(points).toBe(FULL ? 3 * 25 + 2 : 25);

    let n = 0;
    for (let k = first + 1; k <= ops.length; k++) {
      const dir = join(tmp, `k${k}`);
      faults.arm(k);
      hook.faults = faults;
      const r = await train('inner', args(dir));
      hook.faults = null;
      const where = `crash at ${k} (${faults.hit})`;
      expect(r.error, where).toBeInstanceOf(InjectedCrash);
      // the step whose save was interrupted: the last progress line printed
      const saving = Number([...r.err.matchAll(/step (\d+)\//g)].at(-1)![1]);
      const store = nodeStore(dir);
      const found = await listCheckpoints(store, '.');
      for (const c of found) {
        await recoverCheckpoint(store, c.dir);
        expect(treeDiff(await checkpointFiles(store, c.dir), saved.get(c.step)!), `${where}: ${c.dir || 'top'}`).toEqual([]);
      }
      const newest = found.at(-1)?.step ?? null;
      expect([saving - 1 || null, saving], `${where}: newest ${newest}`).toContain(newest);
      const again = await train('inner', args(dir, { resume: dir }));
      if (newest === null) {
        expect(again.error?.name, where).toBe('MissingCheckpoint');
        expect((await train('inner', args(dir))).error, where).toBeNull();
      } else {
        expect(again.error, where).toBeNull();
        expect(again.err).toContain(`at step ${newest}`);
      }
      expect(treeDiff(normalTree(await storeTree(nodeStore(dir))), want), `${where}: the resumed save_dir`).toEqual([]);
      rmSync(dir, { recursive: true, force: true });
      n++;
    }
    expect(n).toBe(points);
  });
});

describe('train-inner when the disk fills during a save', () => {
  it('a store write of the final save failing with ENOSPC: QuotaExceeded naming the save, the last checkpoint and --resume', async () => {
    const whole = join(tmp, 'full-whole');
    expect((await train('inner', args(whole, { save_total_limit: '99' }))).error).toBeNull();
    const want = normalTree(await storeTree(nodeStore(whole)));
    const dir = join(tmp, 'full');
    const faults = new Faults();
    faults.arm(0);
    hook.faults = faults;
    expect((await train('inner', args(join(tmp, 'full-count'), { save_total_limit: '99' }))).error).toBeNull();
    // the last step saves to the top of save_dir: its optimizer state is the write that fails
    const at = faults.ops.indexOf('write .ckpt-staging/optimizer.safetensors') + 1;
    expect(at).toBeGreaterThan(0);
    faults.arm(at, 'enospc');
    const r = await train('inner', args(dir, { save_total_limit: '99' }));
    hook.faults = null;
    expect(r.error).toBeInstanceOf(QuotaExceeded);
    expect(r.error!.message).toBe(`saving ${dir} failed: the disk is full (ENOSPC: no space left on device, ` +
      `write '.ckpt-staging/optimizer.safetensors'); the last complete checkpoint is ${join(dir, `checkpoint-${STEPS - 1}`)}; once the disk ` +
      `can be written again, run the same command with --resume ${dir}`);
    const again = await train('inner', args(dir, { save_total_limit: '99', resume: dir }));
    expect(again.error).toBeNull();
    expect(again.err).toContain(`at step ${STEPS - 1}`);
    expect(treeDiff(normalTree(await storeTree(nodeStore(dir))), want)).toEqual([]);
  });
});
