/**
 * SIGKILL at seeded random points of a training run that saves at every step: `node bin/rmas.js train-inner
 * --save_steps 1` (tiny model, CPU backend) is killed, with its child, a random delay after it reports its first step
 * (within about three steps, so many kills land inside a save: staging, journal, renames, fsyncs, model files being
 * placed), then started again with `--resume SAVE_DIR`, until a run ends by itself. After each kill the newest
 * complete checkpoint holds exactly the uninterrupted run's bytes for its step; at the end the adapter, the optimizer
 * state and the whole save_dir equal the uninterrupted run's, byte for byte. About 30 s on 2 cores.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { latestCheckpoint, listCheckpoints } from '../../src/train/checkpoint';
import { type FileStore, inFolder, nodeStore, recoverCheckpoint } from '../../src/train/file-store';
import { Rng } from '../../src/util/rng';
import { arithmeticRows } from '../train/fixtures';
import { storeTree, treeDiff } from './inject';

const ROOT = resolve(import.meta.dirname, '../..');
const STEPS = 8;
const tmp = mkdtempSync(join(tmpdir(), 'rmas-faults-kill-'));
const started: ChildProcess[] = [];
afterAll(() => {
  for (const p of started) if (p.exitCode === null && p.signalCode === null) process.kill(-p.pid!, 'SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});
const rowsFile = join(tmp, 'rows.jsonl');
writeFileSync(rowsFile, arithmeticRows(6).map((r) => JSON.stringify(r)).join('\n'));

/** train-inner in its own process group (the wrapper and its child), `--resume` when asked; `onStep` sees each step reported. */
function start(save: string, resume: boolean, onStep: (step: number) => void = () => {}) {
  const p = spawn(process.execPath, [
    join(ROOT, 'bin/rmas.js'), 'train-inner', '--model_name_or_path', 'models/tiny/qwen3-tiny', '--mas_design', 'sequential',
    '--mas_role', 'planner', '--dataset_name', rowsFile, '--save_dir', save, '--max_steps', String(STEPS), '--save_steps', '1',
    '--batch_size', '2', '--adapter_lr', '1e-2', '--warmup_steps', '1', '--seed', '3', '--logging_steps', '1', '--backend', 'cpu',
    ...(resume ? ['--resume', save] : []),
  ], { cwd: ROOT, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
  started.push(p);
  let err = '';
  p.stderr!.on('data', (d: Buffer) => {
    err += d.toString();
    for (const m of d.toString().matchAll(/step (\d+)\//g)) onStep(Number(m[1]));
  });
  const exit = new Promise<{ code: number | null; signal: string | null; err: string }>((res) =>
    p.on('exit', (code, signal) => res({ code, signal, err })));
  return { p, exit };
}

/** train_args.json records the command line, which differs by --save_dir and --resume. */
function normal(path: string, b: Uint8Array): Uint8Array {
  if (!path.endsWith('train_args.json')) return b;
  const a = JSON.parse(new TextDecoder().decode(b)) as Record<string, unknown>;
  for (const k of ['save_dir', 'resume']) delete a[k];
  return new TextEncoder().encode(JSON.stringify(a));
}
const normalTree = (t: Map<string, Uint8Array>) => new Map([...t].map(([p, b]) => [p, normal(p, b)]));
async function checkpointFiles(store: FileStore, dir: string) {
  const st = JSON.parse(new TextDecoder().decode(await store.read(inFolder(dir, 'trainer_state.json')))) as { files: string[] };
  return new Map(await Promise.all(st.files.map(async (f) => [f, normal(f, await store.read(inFolder(dir, f)))] as const)));
}
/** Signs of a save cut short: a staging folder, a journal, a temp file of nodeStore or of the model files' placement. */
const interrupted = (t: Map<string, Uint8Array>) =>
  [...t.keys()].some((p) => /\.ckpt-staging|\.ckpt-commit|\.part-|\.rmas-partial/.test(p));

describe('train-inner killed with SIGKILL at random points', () => {
  it('resumes after each kill to the bytes of the uninterrupted run', async () => {
    const whole = join(tmp, 'whole');
    let t1 = 0;
    const ref = start(whole, false, (s) => void (s === 1 && (t1 = performance.now())));
    const r = await ref.exit;
    expect(r.code, r.err).toBe(0);
    const perStep = (performance.now() - t1) / STEPS; // a step and its save, with the process's exit spread over them
    const want = normalTree(await storeTree(nodeStore(whole)));
    const saved = new Map<number, Map<string, Uint8Array>>();
    for (const c of await listCheckpoints(nodeStore(whole), '.')) saved.set(c.step, await checkpointFiles(nodeStore(whole), c.dir));
    expect([...saved.keys()]).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));

    const rng = new Rng(27);
    const save = join(tmp, 'killed');
    const log: string[] = [];
    let cut = 0;
    const t0 = performance.now();
    for (let round = 0; ; round++) {
      const resume = (await listCheckpoints(nodeStore(save), '.')).length > 0;
      // the last rounds (or past 40 s) run to the end
      const kill = round < 10 && performance.now() - t0 < 40_000;
      const delay = rng.uniform(0, 3 * perStep);
      let timer: NodeJS.Timeout | undefined;
      const run = start(save, resume, () => {
        if (kill && !timer) timer = setTimeout(() => process.kill(-run.p.pid!, 'SIGKILL'), delay);
      });
      const end = await run.exit;
      clearTimeout(timer);
      if (end.code === 0) {
        log.push(`round ${round}: ended by itself`);
        break;
      }
      expect(end.signal, end.err).toBe('SIGKILL');
      const store = nodeStore(save);
      const tree = await storeTree(store);
      if (interrupted(tree)) cut++;
      const found = await listCheckpoints(store, '.');
      log.push(`round ${round}: killed ${delay.toFixed(0)} ms after its first step; newest ${found.at(-1)?.step ?? 'none'}` +
        `${interrupted(tree) ? ', a save cut short' : ''}`);
      if (found.length) {
        const latest = await latestCheckpoint(store, '.');
        await recoverCheckpoint(store, latest.dir); // what the resume's load does first
        expect(treeDiff(await checkpointFiles(store, latest.dir), saved.get(latest.step)!), log.at(-1)).toEqual([]);
      }
    }
    console.log(`${log.join('\n')}\n${cut} kills cut a save short`);
    expect(log.length).toBeGreaterThan(3);
    for (const f of ['adapter.safetensors', 'optimizer.safetensors'])
      expect(treeDiff(new Map([[f, (await storeTree(nodeStore(save))).get(f)!]]), new Map([[f, want.get(f)!]])), f).toEqual([]);
    expect(treeDiff(normalTree(await storeTree(nodeStore(save))), want)).toEqual([]);
  }, 120_000);
});
