/**
 * Checkpoint saves under faults: trainLoop on the tiny models with the runner's save rule (src/runner/train-cmd.ts:
 * `checkpoint-<step>` folders, the last save at the top, then --save_total_limit 1), saving at every step (inner links
 * 3 steps, outer links 2). Each save of the uninterrupted run is made again from the save_dir and the links as they
 * were just before it, failing at one point at a time:
 * - a crash before each mutating store call (a memoryStore, which keeps what was written as a disk does): every
 *   staged write (`optimizer.safetensors` among them), the journal, each rename, each removal, the pruning;
 * - ENOSPC from each store call (inner), the program going on with the same store;
 * - ENOSPC inside nodeStore (a folder on disk) from each file-system call of the save of checkpoint-2 and its pruning:
 *   a temp file half written, a failed fsync, rename or mkdir;
 * - the folder being saved deleted by someone else (another tab, a user) before each store call.
 * After each fault: every checkpoint that listCheckpoints finds holds exactly the bytes that the uninterrupted run
 * saved at its step (never a mix); the newest is the one before the interrupted save or that save itself; a run resumed
 * from it (as --resume does: load, then trainLoop) ends with the uninterrupted run's save_dir, file for file and byte
 * for byte, with nothing partial left. Also: pruning keeps the newest complete checkpoints, not the remains of a save.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InnerLink, OuterLink } from '../../src/mas/links';
import { getStyle } from '../../src/mas/styles';
import { readLinkFile } from '../../src/mas/upstream';
import { type Decoder, loadDecoderFromDir } from '../../src/model';
import { CpuBackend } from '../../src/tensor/cpu';
import { type Tokenizer, loadTokenizerFromDir } from '../../src/tokenizer';
import {
  type CheckpointContent,
  latestCheckpoint,
  listCheckpoints,
  loadCheckpoint,
  pruneCheckpoints,
  saveCheckpoint,
  type TrainerState,
} from '../../src/train/checkpoint';
import { CorruptCheckpoint, MissingCheckpoint } from '../../src/errors';
import { type FileStore, JOURNAL_FILE, inFolder, memoryStore, nodeStore, recoverCheckpoint } from '../../src/train/file-store';
import { createOuterJob, type TrainJob } from '../../src/train/jobs';
import { initialState, trainLoop, type LoopOptions } from '../../src/train/loop';
import { arithmeticRows, innerJob } from '../train/fixtures';
import { Faults, type FaultMode, InjectedCrash, faultyStore, isEnospc, storeTree, treeDiff } from './inject';

/** The file-system calls of nodeStore that change the disk, failed with ENOSPC where `fs.faults` says (a write after half its bytes). */
const fs = vi.hoisted(() => ({ faults: null as null | { tick(op: string, path: string): void } }));
vi.mock('node:fs/promises', async (orig) => {
  const real = await orig<typeof import('node:fs/promises')>();
  const tick = (op: string, path: unknown) => fs.faults?.tick(`${op} ${String(path)}`, String(path));
  const open: typeof real.open = async (path, flags, mode) => {
    if (flags !== 'w') return real.open(path, flags, mode);
    tick('open', path);
    const h = await real.open(path, flags, mode);
    return new Proxy(h, {
      get(t, prop) {
        if (prop === 'writeFile') {
          return async (data: Uint8Array) => {
            try {
              tick('write', path);
            } catch (e) {
              await t.writeFile(data.subarray(0, data.length >> 1)); // the disk filled up half way
              throw e;
            }
            return t.writeFile(data);
          };
        }
        if (prop === 'sync') return async () => (tick('fsync', path), t.sync());
        const v = Reflect.get(t, prop, t) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    });
  };
  const mod = {
    ...real,
    open,
    rename: (async (a, b) => (tick('rename', b), real.rename(a, b))) as typeof real.rename,
    mkdir: (async (p, o) => (tick('mkdir', p), real.mkdir(p, o))) as typeof real.mkdir,
  };
  return { ...mod, default: mod };
});

const be = new CpuBackend('f32');
const LIMIT = 1;
const FULL = process.env.RMAS_FAULTS === 'full';

const root = mkdtempSync(join(tmpdir(), 'rmas-faults-save-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let nDir = 0;

/** One save of the uninterrupted run: the save_dir just before it, and the links, moments and state it saves. */
interface SavePoint {
  step: number;
  last: boolean;
  before: Map<string, Uint8Array>;
}

interface Subject {
  name: string;
  job: TrainJob;
  opts: LoopOptions;
  manifests: Record<string, unknown>;
  /** `zero`: the links before any step; `pre-<step>`: the links as each save saw them. */
  links: FileStore;
  saves: SavePoint[];
  /** The uninterrupted run's save_dir at the end, and the files of each step's checkpoint. */
  tree: Map<string, Uint8Array>;
  saved: Map<number, Map<string, Uint8Array>>;
  dispose(): void;
}

const content = (s: Subject, state: TrainerState): CheckpointContent => ({
  kind: s.job.kind, links: s.job.links, optimizerT: s.job.optimizer.t, state, args: { command: 'faults', resolved: s.opts },
  manifests: s.manifests,
});

/** The files of the checkpoint in `dir` (those its trainer_state.json names), name → bytes. */
async function checkpointFiles(store: FileStore, dir: string): Promise<Map<string, Uint8Array>> {
  const st = JSON.parse(new TextDecoder().decode(await store.read(inFolder(dir, 'trainer_state.json')))) as { files: string[] };
  const out = new Map<string, Uint8Array>();
  for (const f of [...st.files].sort()) out.set(f, await store.read(inFolder(dir, f)));
  return out;
}

/** Where a run was when it stopped: the step of its last committed save, and of the save it was in. */
interface Progress {
  committed: number | null;
  saving: number | null;
}

/** The runner's save (src/runner/train-cmd.ts): checkpoint-<step>, or the top for the last one; then --save_total_limit. */
async function saveAs(s: Subject, store: FileStore, st: TrainerState, last: boolean, p: Progress) {
  const dir = last ? '' : `checkpoint-${st.step}`;
  p.saving = st.step;
  await saveCheckpoint(store, dir || '.', content(s, st));
  p.committed = st.step;
  await pruneCheckpoints(store, '.', LIMIT);
  p.saving = null;
}

/** Trains from `state` to the end, saving into `store`; `before` runs ahead of each save and `after` once it committed. */
async function train(s: Subject, store: FileStore, state: TrainerState, p: Progress,
  before?: (st: TrainerState, last: boolean) => Promise<void>, after?: (st: TrainerState, last: boolean) => Promise<void>) {
  await trainLoop(s.job.size, s.opts, {
    optimizer: s.job.optimizer,
    runBatch: (i, scale, shard) => s.job.runBatch(i, scale, shard),
    save: async (st, last) => {
      await before?.(st, last);
      await saveAs(s, store, st, last, p);
      await after?.(st, last);
    },
  }, state);
}

/** Puts the links, moments and t of checkpoint `dir` of s.links into the job; its trainer state. */
async function restore(s: Subject, dir: string): Promise<TrainerState> {
  const { optimizerT, state } = await loadCheckpoint(s.links, dir, s.job.links);
  s.job.optimizer.t = optimizerT;
  return state;
}

/** A light outer job: the tiny sequential system (frozen golden inner links), 1 round, 2 latent tokens, batch 1. */
async function lightOuterJob() {
  const style = getStyle('sequential_light');
  const models = { planner: 'qwen3-tiny', critic: 'llama-tiny', solver: 'qwen2-tiny' } as const;
  const agents = new Map<string, { decoder: Decoder; inner: InnerLink; tokenizer: Tokenizer }>();
  const disposers: (() => void)[] = [];
  for (const [role, m] of Object.entries(models)) {
    const decoder = await loadDecoderFromDir(`models/tiny/${m}`, be);
    const golden = await readLinkFile(`test/golden/tiny-mas/${role}-inner.pt`);
    const inner = InnerLink.fromStateDict(be, golden, { name: `${role} inner` }).freeze();
    disposers.push(() => (inner.dispose(), decoder.dispose()));
    agents.set(role, { decoder, inner, tokenizer: await loadTokenizerFromDir(`models/tiny/${m}`) });
  }
  const outer = new Map<string, OuterLink>();
  for (const [i, l] of style.links.entries()) {
    const [dIn, dOut] = [agents.get(l.from)!.decoder.config.hidden, agents.get(l.to)!.decoder.config.hidden];
    const link = OuterLink.create(be, dIn, dOut, { seed: 50 + i, name: l.key });
    disposers.push(() => link.dispose());
    outer.set(l.key, link);
  }
  const job = createOuterJob({
    style, agents, outer, rows: arithmeticRows(4), task: 'math', batchSize: 1, optimizer: { maxGradNorm: 1 },
    loss: { rounds: 1, maxLatentTokens: 2, superviseFinalOnly: true, nonLastLossWeight: 0.1, maxLength: 256 },
  });
  return { job, dispose: () => disposers.reverse().forEach((d) => d()) };
}

async function subject(kind: 'inner' | 'outer'): Promise<Subject> {
  const made = kind === 'inner' ? await innerJob(be, arithmeticRows(6)) : await lightOuterJob();
  const s: Subject = {
    name: kind, job: made.job, links: memoryStore(), saves: [], tree: new Map(), saved: new Map(), dispose: made.dispose,
    opts: { maxSteps: kind === 'inner' ? 3 : 2, batchSize: kind === 'inner' ? 2 : 1, gradAccumSteps: 1, lr: 1e-2, scheduler: 'cosine',
      warmupSteps: 1, seed: 11, shuffle: true, saveSteps: 1 },
    manifests: kind === 'inner' ? { 'adapter_config.json': { adapter_type: 'ln_res_adapter' } } : { 'outerlink_config.json': { links: 3 } },
  };
  await saveCheckpoint(s.links, 'zero', content(s, initialState(s.job.size, s.opts)));
  const store = memoryStore();
  await train(s, store, await restore(s, 'zero'), { committed: null, saving: null }, async (st, last) => {
    s.saves.push({ step: st.step, last, before: await storeTree(store) });
    await saveCheckpoint(s.links, `pre-${st.step}`, content(s, st));
  }, async (st, last) => void s.saved.set(st.step, await checkpointFiles(store, last ? '' : `checkpoint-${st.step}`)));
  s.tree = await storeTree(store);
  return s;
}

/** A save_dir holding `tree`: in memory, or a new folder on disk. */
async function storeWith(tree: ReadonlyMap<string, Uint8Array>, disk: boolean): Promise<FileStore> {
  if (!disk) {
    const store = memoryStore();
    for (const [p, b] of tree) store.files.set(p, b.slice());
    return store;
  }
  const dir = join(root, `d${++nDir}`);
  for (const [p, b] of tree) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), b);
  }
  return nodeStore(dir);
}

/**
 * After a fault: each checkpoint found holds its step's bytes, the newest is the last committed one or the one being
 * saved, and a run resumed from it (or started over when there is none) ends on the uninterrupted save_dir.
 */
async function checkAndResume(s: Subject, store: FileStore, p: Progress, where: string) {
  const found = await listCheckpoints(store, '.');
  for (const c of found) {
    await recoverCheckpoint(store, c.dir); // what load does first
    const want = s.saved.get(c.step)!;
    expect(treeDiff(await checkpointFiles(store, c.dir), want), `${where}: ${c.dir || 'top'} holds step ${c.step}`).toEqual([]);
  }
  const newest = found.at(-1) ?? null;
  expect([p.committed, p.saving], `${where}: newest ${newest?.step}`).toContain(newest?.step ?? null);
  let state: TrainerState;
  if (newest) {
    expect((await latestCheckpoint(store, '.')).dir).toBe(newest.dir);
    const loaded = await loadCheckpoint(store, newest.dir, s.job.links);
    s.job.optimizer.t = loaded.optimizerT;
    state = loaded.state;
  } else state = await restore(s, 'zero');
  await train(s, store, state, { committed: null, saving: null });
  expect(treeDiff(await storeTree(store), s.tree), `${where}: the resumed save_dir`).toEqual([]);
}

/**
 * Each save of the run (or only the save of step `only`) failed at each of its counted calls in turn: the save_dir as
 * it was before that save, the links as the save saw them, the save with `faults` armed (over the store, or inside
 * nodeStore's file-system calls), then the checks and the resume. Returns the points, in order.
 */
async function sweep(s: Subject, mode: FaultMode, o: { fs?: boolean; only?: number } = {}) {
  const faults = new Faults();
  const points: string[] = [];
  for (const save of s.saves.filter((x) => o.only === undefined || x.step === o.only)) {
    for (let k = 1; ; k++) {
      const disk = await storeWith(save.before, !!o.fs);
      const state = await restore(s, `pre-${save.step}`);
      const p: Progress = { committed: save.step > 1 ? save.step - 1 : null, saving: null };
      faults.arm(k, mode);
      if (o.fs) fs.faults = faults;
      const err = await saveAs(s, o.fs ? disk : faultyStore(disk, faults), state, save.last, p).then(() => null, (e: unknown) => e);
      fs.faults = null;
      faults.disarm();
      if (!faults.hit) {
        expect(err).toBeNull();
        break;
      }
      const where = `${s.name} ${mode}, save of step ${save.step}, call ${k} (${faults.hit})`;
      points.push(faults.hit);
      if (mode === 'crash') expect(err, where).toBeInstanceOf(InjectedCrash);
      else expect(isEnospc(err), `${where}: ${String(err)}`).toBe(true);
      await checkAndResume(s, disk, p, where);
    }
  }
  return points;
}

const perSave = (files: number) => 2 * files + 3; // the staged files and the journal, a rename each, staging and journal removed

describe('checkpoint saves under faults', () => {
  const subjects: Partial<Record<'inner' | 'outer', Subject>> = {};
  beforeAll(async () => {
    subjects.inner = await subject('inner');
    subjects.outer = await subject('outer');
  });
  afterAll(() => Object.values(subjects).forEach((s) => s.dispose()));

  it('inner: a crash before each store call of a 3-step run saved at every step, with pruning', async () => {
    const points = await sweep(subjects.inner!, 'crash');
    expect(points.filter((p) => p.startsWith('write ')).length).toBe(3 * 7);
    expect(points.filter((p) => /^write (checkpoint-\d\/)?\.ckpt-staging\/optimizer\.safetensors$/.test(p)).length).toBe(3);
    expect(points.filter((p) => p.startsWith('rename checkpoint-1 .pruned-checkpoint-1')).length).toBe(1);
    expect(points.length).toBe(3 * perSave(6) + 2);
  });

  // the first save into checkpoint-1 as well with RMAS_FAULTS=full (the inner sweep covers that case by default)
  it(`outer: a crash before each store call of ${FULL ? 'both saves' : 'the last save'} of a 2-step run`, async () => {
    const points = await sweep(subjects.outer!, 'crash', FULL ? {} : { only: 2 });
    const saves = FULL ? 2 : 1;
    expect(points.filter((p) => /^write (checkpoint-1\/)?\.ckpt-staging\/outer_\d\d\.(pt|safetensors)$/.test(p)).length).toBe(6 * saves);
    expect(points.length).toBe(saves * perSave(10));
  });

  it('inner: ENOSPC from each store call, the program going on with the same store', async () => {
    const points = await sweep(subjects.inner!, 'enospc');
    expect(points.length).toBe(3 * perSave(6) + 2);
  });

  // each staged file and the journal: mkdir, open, write, fsync, rename; each rename into place: mkdir, rename; the
  // pruning's rename aside: mkdir, rename
  it('inner: ENOSPC inside nodeStore at each file-system call of the save of checkpoint-2 and its pruning', async () => {
    const points = await sweep(subjects.inner!, 'enospc', { fs: true, only: 2 });
    expect(points.filter((p) => p.startsWith('write ')).length).toBe(7);
    expect(points.length).toBe(5 * 7 + 2 * 6 + 2);
  });

  it.runIf(FULL)('outer: ENOSPC inside nodeStore at each file-system call of both saves (RMAS_FAULTS=full)', async () => {
    const points = await sweep(subjects.outer!, 'enospc', { fs: true });
    expect(points.length).toBe(2 * (5 * 11 + 2 * 10));
  });

  it('the folder being saved deleted by someone else before each store call: a named error or a whole checkpoint', async () => {
    const s = subjects.inner!;
    const [one, two] = [s.saves[0]!, s.saves[1]!];
    const outcomes: string[] = [];
    for (let k = 1; ; k++) {
      const store = (await storeWith(two.before, false)) as ReturnType<typeof memoryStore>;
      let calls = 0;
      const drop = () => void (++calls === k && store.remove('checkpoint-2'));
      const other: FileStore = {
        ...store,
        write: async (p, b) => (await drop(), store.write(p, b)),
        remove: async (p) => (await drop(), store.remove(p)),
        rename: async (f, t) => (await drop(), store.rename(f, t)),
      };
      const state = await restore(s, 'pre-2');
      const err = await saveCheckpoint(other, 'checkpoint-2', content(s, state)).then(() => null, (e: unknown) => e);
      if (calls < k) break;
      const where = `checkpoint-2 deleted before call ${k}`;
      outcomes.push(err === null ? 'saved' : (err as Error).name);
      if (err !== null) expect([CorruptCheckpoint, MissingCheckpoint].some((c) => err instanceof c), `${where}: ${String(err)}`).toBe(true);
      // what was left is never a checkpoint unless whole; loading the folder says why it cannot
      const found = await listCheckpoints(store, '.');
      for (const c of found) expect(treeDiff(await checkpointFiles(store, c.dir), s.saved.get(c.step)!), where).toEqual([]);
      if (await store.exists(`checkpoint-2/${JOURNAL_FILE}`)) {
        expect(found.map((c) => c.step), where).toEqual([1]);
        await expect(loadCheckpoint(store, 'checkpoint-2', s.job.links), where).rejects.toThrow(
          /checkpoint-2\/.* committed but .* neither staged nor in place .*the next save into this folder replaces it/,
        );
      }
      // the resumed run's save of step 2 discards what is left and saves it whole
      await saveCheckpoint(store, 'checkpoint-2', content(s, await restore(s, 'pre-2')));
      expect(treeDiff(await checkpointFiles(store, 'checkpoint-2'), s.saved.get(2)!), where).toEqual([]);
      expect((await store.list('checkpoint-2')).sort(), where).toEqual([...s.saved.get(2)!.keys()].sort());
      expect(treeDiff(await checkpointFiles(store, one.last ? '' : 'checkpoint-1'), s.saved.get(1)!), where).toEqual([]);
    }
    // deleted before the first staged write: nothing was lost; before a later one or the journal: the commit cannot
    // finish (CorruptCheckpoint); before a rename: the staged file is gone (MissingCheckpoint); before a removal: nothing
    // is left to do
    expect(outcomes.length).toBe(perSave(6));
    expect(outcomes.slice(0, 7)).toEqual(['saved', ...Array(6).fill('CorruptCheckpoint')]);
  });

  it('pruning keeps the newest complete checkpoints: the remains of an interrupted save never count', async () => {
    const s = subjects.inner!;
    const store = memoryStore();
    for (const step of [1, 2]) await saveCheckpoint(store, `checkpoint-${step}`, content(s, { ...(await restore(s, 'zero')), step }));
    // a save of step 4 that died staging its files, and a folder that holds only the placed model files of step 5
    await store.write('checkpoint-4/.ckpt-staging/adapter.safetensors', new Uint8Array([1, 2, 3]));
    await store.write('checkpoint-5/config.json', new TextEncoder().encode('{}'));
    await saveCheckpoint(store, 'checkpoint-3', content(s, { ...(await restore(s, 'zero')), step: 3 }));
    expect(await pruneCheckpoints(store, '.', 1)).toEqual(['checkpoint-1', 'checkpoint-2', 'checkpoint-4', 'checkpoint-5']);
    expect(await store.list('')).toEqual(['checkpoint-3']);
    expect(await latestCheckpoint(store, '.')).toEqual({ step: 3, dir: 'checkpoint-3' });
  });
});
