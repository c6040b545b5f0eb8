/**
 * The page's IndexedDB writes under faults (headless Chromium): the checkpoint store of a training run
 * (src/store/idb-store.ts, one database per run) and the tab's checkpoint registry, over an idb-keyval store wrapped
 * to fail where asked.
 * - Quota: the k-th put of a save fails with QuotaExceededError (its transaction aborted, as the browser does), for
 *   each k → QuotaExceeded; the checkpoint saved before is whole and still the newest (or, past the commit point, the
 *   new one, which recovery finishes); no chunk is left that no file refers to.
 * - An aborted transaction: the k-th read-write transaction of a save is aborted once it has started, for each k →
 *   StorageFailed; the same checks.
 * - A second tab (a second connection to the database) deletes, before each store call of a save, the folder being
 *   saved, the checkpoint before it, or the whole run → the save ends or fails by name (never a raw DOMException),
 *   every checkpoint left loads with the bytes it was saved with, and the next save into the folder (the resumed
 *   run's) works.
 * After each fault the save is made again and loads exactly. Then three whole training runs (workers/trainer.ts on
 * the CPU backend, saving at every step), faulted at seeded points, fail by name, and a resume by run id ends with the
 * uninterrupted run's adapter and AdamW state, byte for byte.
 */
import { createStore, keys, type UseStore } from 'idb-keyval';
import { describe, expect, it } from 'vitest';
import { CorruptCheckpoint, MissingCheckpoint, QuotaExceeded, RmasError, StorageFailed } from '../../src/errors';
import { InnerLink } from '../../src/mas/links';
import { checkpointRegistry } from '../../src/store/checkpoint-registry';
import { type IdbFileStore, idbFileStore } from '../../src/store/idb-store';
import { CpuBackend } from '../../src/tensor/cpu';
import { type CheckpointContent, listCheckpoints, loadCheckpoint, saveCheckpoint } from '../../src/train/checkpoint';
import { type FileStore, inFolder, recoverCheckpoint } from '../../src/train/file-store';
import { Rng } from '../../src/util/rng';
import type { TrainEvent, TrainRequest } from '../../workers/protocol';
import { trainRun, type TrainRun } from '../../workers/trainer';
import { sameBytes } from './inject';

/** Where the wrapped store fails: the put (1-based, counted over the store's life) and the read-write transaction. */
interface Plan {
  quotaAtPut: number;
  abortAtTx: number;
  puts: number;
  txs: number;
  hit: string | null;
}
const plan = (): Plan => ({ quotaAtPut: 0, abortAtTx: 0, puts: 0, txs: 0, hit: null });

/**
 * `base` with faults: the planned put fails with QuotaExceededError (its request errors and its transaction aborts
 * with that error, as IndexedDB reports a full disk), the planned read-write transaction is aborted once its body has
 * started (its requests fail with AbortError, later ones with TransactionInactiveError).
 */
function faultyIdb(base: UseStore, p: Plan): UseStore {
  return (mode, cb) => base(mode, (os) => {
    const no = mode === 'readwrite' ? ++p.txs : 0;
    let injected: DOMException | null = null;
    if (no && no === p.abortAtTx) {
      p.hit = `transaction ${no}`;
      queueMicrotask(() => abort(os.transaction)); // as the browser aborts one: once its body has started
    }
    const tx = new Proxy(os.transaction, {
      get: (t, prop) => (prop === 'error' && injected ? injected : bound(t, prop)),
      set: (t, prop, v) => Reflect.set(t, prop, v),
    });
    const store = new Proxy(os, {
      get(t, prop) {
        if (prop === 'transaction') return tx;
        if (prop !== 'put' && prop !== 'delete') return bound(t, prop);
        return (...a: unknown[]) => {
          if (prop === 'put' && ++p.puts === p.quotaAtPut) {
            injected = new DOMException('The quota has been exceeded.', 'QuotaExceededError');
            p.hit = `put ${String(a[1])}`;
            return failedRequest(os.transaction, injected);
          }
          if (no === p.abortAtTx && !p.hit!.includes('(')) p.hit += ` (${prop} ${String(a[prop === 'put' ? 1 : 0])})`;
          return (t[prop] as (...x: unknown[]) => IDBRequest)(...a);
        };
      },
    });
    return cb(store);
  });
}
const bound = (t: object, prop: string | symbol) => {
  const v = Reflect.get(t, prop, t) as unknown;
  return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
};
const abort = (t: IDBTransaction) => {
  try {
    t.abort();
  } catch { /* already aborted by its body */ }
};
/** A request of `t` that fails with `error` once its handlers are set, aborting `t` (and so every request made with it). */
function failedRequest(t: IDBTransaction, error: DOMException): IDBRequest {
  const r = { error, result: undefined, onsuccess: null, onerror: null } as { onerror: ((e: Event) => void) | null };
  queueMicrotask(() => {
    abort(t);
    r.onerror?.(new Event('error'));
  });
  return r as unknown as IDBRequest;
}

/** `inner`, with `before(k)` awaited ahead of its k-th write, remove or rename (the second tab acting in between). */
function interleaved(inner: FileStore, before: (k: number) => Promise<void>): FileStore {
  let k = 0;
  const at = async () => before(++k);
  return {
    read: (p) => inner.read(p),
    exists: (p) => inner.exists(p),
    list: (d) => inner.list(d),
    write: async (p, b) => (await at(), inner.write(p, b)),
    remove: async (p) => (await at(), inner.remove(p)),
    rename: async (f, t) => (await at(), inner.rename(f, t)),
  };
}

const cpu = new CpuBackend('f32');
let nDb = 0;
const dbName = () => `faults-${Date.now().toString(36)}-${++nDb}`;

/** Two checkpoints' contents (step 1 and step 2), links with distinct weights and moments. */
function contents(): Map<number, CheckpointContent> {
  const out = new Map<number, CheckpointContent>();
  for (const step of [1, 2]) {
    const link = InnerLink.create(cpu, 48, { seed: step, name: `step ${step}` });
    const rng = new Rng(step);
    for (const part of ['m', 'v'] as const) {
      link.params.import(new Map(link.params.entries.map((e) => [e.name, Float32Array.from({ length: e.numel }, () => rng.uniform())])),
        { part });
    }
    out.set(step, {
      kind: 'inner', links: new Map([['adapter', link]]), optimizerT: step, args: { command: 'train-inner', resolved: { maxSteps: 2 } },
      state: {
        step, epoch: 0, sampleCursor: 2 * step, order: [3, 1, 0, 2], rng: { kind: 'mulberry32', s: step }, skipped: {}, tokensSeen: 9,
      },
      manifests: { 'adapter_config.json': { adapter_type: link.type } },
    });
  }
  return out;
}
const CONTENT = contents();
const dirOf = (step: number) => `checkpoint-${step}`;

async function checkpointFiles(store: FileStore, dir: string) {
  const st = JSON.parse(new TextDecoder().decode(await store.read(inFolder(dir, 'trainer_state.json')))) as { files: string[] };
  return new Map(await Promise.all(st.files.map(async (f) => [f, await store.read(inFolder(dir, f))] as const)));
}
const sameFiles = (a: Map<string, Uint8Array>, b: Map<string, Uint8Array>) =>
  a.size === b.size && [...a].every(([k, v]) => b.has(k) && sameBytes(v, b.get(k)!));

/** The bytes each step's checkpoint is saved with (from a store nothing disturbs). */
const SAVED = new Map<number, Map<string, Uint8Array>>();
async function savedFiles() {
  if (SAVED.size) return SAVED;
  const s = idbFileStore(dbName());
  for (const [step, c] of CONTENT) {
    await saveCheckpoint(s, dirOf(step), c);
    SAVED.set(step, await checkpointFiles(s, dirOf(step)));
  }
  return SAVED;
}

/** Every checkpoint left holds its step's bytes and loads; no chunk is left that no file refers to; returns the newest step. */
async function consistent(store: IdbFileStore, where: string): Promise<number | null> {
  const saved = await savedFiles();
  const found = await listCheckpoints(store, '.');
  for (const c of found) {
    await recoverCheckpoint(store, c.dir);
    expect(sameFiles(await checkpointFiles(store, c.dir), saved.get(c.step)!), `${where}: ${c.dir} holds step ${c.step}`).toBe(true);
    const link = InnerLink.create(cpu, 48, { seed: 99, name: 'loaded' });
    await loadCheckpoint(store, c.dir, new Map([['adapter', link]]));
    link.dispose();
  }
  const all = (await keys(store.idb)).map(String);
  const used = new Set<string>();
  for (const k of all.filter((x) => x.startsWith('f:'))) for (const c of (await store.entry(k.slice(2)))!.chunks) used.add(c);
  expect(all.filter((x) => x.startsWith('c:') && !used.has(x)), `${where}: unreferenced chunks`).toEqual([]);
  return found.at(-1)?.step ?? null;
}

/** A store holding the step-1 checkpoint, and its database's name. */
async function withFirst(wrap?: (base: UseStore) => UseStore) {
  const name = dbName();
  const base = createStore(`rmas-ckpt-${name}`, 'files');
  const store = idbFileStore(name, { store: wrap ? wrap(base) : base });
  await saveCheckpoint(store, dirOf(1), CONTENT.get(1)!);
  return { name, store, clean: idbFileStore(name, { store: base }) };
}

/** The save of step 2 again on an undisturbed connection (the resumed run's), then the checks. */
async function saveAgain(clean: IdbFileStore, where: string) {
  await saveCheckpoint(clean, dirOf(2), CONTENT.get(2)!);
  expect(await consistent(clean, `${where}, saved again`)).toBe(2);
}

describe('IndexedDB checkpoint saves under faults', () => {
  it('quota exceeded at each put of a save: QuotaExceeded; the previous checkpoint, or the committed new one, loads whole', async () => {
    let points = 0;
    for (let k = 1; ; k++) {
      const p = plan();
      const { store, clean } = await withFirst((b) => faultyIdb(b, p));
      p.quotaAtPut = p.puts + k;
      const err = await saveCheckpoint(store, dirOf(2), CONTENT.get(2)!).then(() => null, (e: unknown) => e);
      p.quotaAtPut = 0;
      if (!p.hit) {
        expect(err).toBeNull();
        break;
      }
      const where = `quota at put ${k} (${p.hit})`;
      points++;
      expect(err, where).toBeInstanceOf(QuotaExceeded);
      expect((err as Error).message, where).toMatch(/^browser storage is full: (saving|renaming) .*nothing stored was changed$/);
      // before the journal is in, the save is undone; after it, recovery finishes it
      const committed = await clean.exists('checkpoint-2/.ckpt-commit.json');
      expect(await consistent(clean, where), where).toBe(committed ? 2 : 1);
      await saveAgain(clean, where);
    }
    // each of the 7 files (6 and the journal): its chunk and its entry; each rename into place
    expect(points).toBe(7 * 2 + 6);
  });

  it('a transaction aborted at each read-write transaction of a save: StorageFailed; the previous or new checkpoint loads', async () => {
    const points: string[] = [];
    for (let k = 1; ; k++) {
      const p = plan();
      const { store, clean } = await withFirst((b) => faultyIdb(b, p));
      p.abortAtTx = p.txs + k;
      const err = await saveCheckpoint(store, dirOf(2), CONTENT.get(2)!).then(() => null, (e: unknown) => e);
      p.abortAtTx = 0;
      if (!p.hit) {
        expect(err).toBeNull();
        break;
      }
      const where = `abort of ${p.hit}`;
      points.push(p.hit);
      expect(err, where).toBeInstanceOf(StorageFailed);
      expect((err as Error).message, where).toMatch(
        /^browser storage failed (saving|renaming|deleting) .* \((AbortError|TransactionInactiveError): .*nothing stored was changed/);
      const newest = await consistent(clean, where);
      expect([1, 2], where).toContain(newest);
      await saveAgain(clean, where);
    }
    // per file: its chunk, its entry, its rename; the staging folder and the journal removed
    expect(points.length, points.join('\n')).toBe(7 * 2 + 6 + 2);
  });

  for (const target of ['the folder being saved', 'the previous checkpoint', 'the whole run'] as const) {
    it(`a second tab deletes ${target} before each store call of a save: a named error or a whole checkpoint`, async () => {
      const outcomes = new Map<string, number>();
      for (let k = 1; ; k++) {
        const { name, store, clean } = await withFirst();
        const other = idbFileStore(name); // a second connection, as another tab has
        let acted = false;
        const act = async () => {
          acted = true;
          if (target === 'the folder being saved') await other.remove(dirOf(2));
          else if (target === 'the previous checkpoint') await other.remove(dirOf(1));
          else for (const n of await other.list('')) await other.remove(n);
        };
        const err = await saveCheckpoint(interleaved(store, async (i) => void (i === k && (await act()))), dirOf(2), CONTENT.get(2)!)
          .then(() => null, (e: unknown) => e);
        if (!acted) {
          expect(err).toBeNull();
          break;
        }
        const where = `${target} deleted before call ${k}`;
        if (err !== null) {
          expect(err, `${where}: ${String(err)}`).toBeInstanceOf(RmasError);
          expect([CorruptCheckpoint, MissingCheckpoint].some((c) => err instanceof c), `${where}: ${String(err)}`).toBe(true);
        }
        const key = err === null ? 'saved' : (err as Error).name;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
        const newest = await consistent(clean, where);
        if (target === 'the previous checkpoint') expect(newest, where).toBe(err === null ? 2 : null);
        else expect(target === 'the whole run' ? [null, 2] : [1, 2], where).toContain(newest);
        await saveAgain(clean, where);
      }
      console.info(`${target}: ${[...outcomes].map(([o, n]) => `${o} ${n}`).join(', ')}`);
      expect([...outcomes.values()].reduce((a, b) => a + b, 0)).toBe(15); // 7 writes, 6 renames, 2 removals
      if (target !== 'the previous checkpoint') expect(outcomes.get('CorruptCheckpoint')).toBeGreaterThan(0);
    });
  }

  it('the registry saving a checkpoint as the disk fills up: QuotaExceeded at each put, listed whole or not at all', async () => {
    const files = Object.fromEntries([...(await savedFiles()).get(1)!]);
    let points = 0;
    for (let k = 1; ; k++) {
      const p = plan();
      const name = dbName();
      const base = createStore(`rmas-ckpt-${name}`, 'files');
      const reg = checkpointRegistry(idbFileStore(name, { store: faultyIdb(base, p) }));
      const first = await reg.saveFromFiles(files, { kind: 'inner', name: 'first' });
      p.quotaAtPut = p.puts + k;
      const err = await reg.saveFromFiles(files, { kind: 'inner', name: 'second' }).then(() => null, (e: unknown) => e);
      p.quotaAtPut = 0;
      const listed = await checkpointRegistry(idbFileStore(name, { store: base })).listCheckpoints();
      if (!p.hit) {
        expect(err).toBeNull();
        expect(listed.map((c) => c.name).sort()).toEqual(['first', 'second']);
        break;
      }
      points++;
      expect(err, p.hit).toBeInstanceOf(QuotaExceeded);
      expect(listed.map((c) => c.id), p.hit).toEqual([first.id]);
      const got = await reg.files(first.id);
      for (const [f, b] of Object.entries(files)) expect(sameBytes(got[f]!, b), `${p.hit}: ${f}`).toBe(true);
    }
    // each file and the metadata: its chunk, its entry, and its entry moved by the rename that lists the checkpoint
    expect(points).toBe((Object.keys(files).length + 1) * 3);
  });
});

describe('a training run in the page under storage faults', () => {
  const rows = Array.from({ length: 6 }, (_, i) => {
    const [a, b] = [3 + 2 * i, 11 - i];
    const steps = `Step 1: add ${a} and ${b}.`;
    return { question: `What is ${a} + ${b}?`, plan: steps, refined_plan: steps, answer: `${a + b}` };
  });
  const request = (): TrainRequest => ({
    kind: 'inner', backend: 'cpu', rows, model: `${location.origin}/models/tiny/qwen3-tiny/`, style: 'sequential_light', role: 'planner',
    options: { maxSteps: 4, batchSize: 2, lr: 2e-2, warmupSteps: 1, seed: 11, saveSteps: 1, maxLength: 256 },
  });
  const deps = (store: (id: string) => IdbFileStore) => ({
    storeFor: async (id: string) => store(id),
    backend: async () => ({ backend: cpu }),
  });
  let n = 0;
  const newRun = (id = `run-faults-${Date.now().toString(36)}-${++n}`): TrainRun =>
    ({ id, stop: new AbortController().signal, paused: false, wake: null, store: null });
  const final = async (s: FileStore) => ({ a: await s.read('adapter.safetensors'), o: await s.read('optimizer.safetensors') });

  it('quota, an aborted transaction, a second tab deleting the checkpoint being saved: a named error, then an exact resume', async () => {
    const whole = idbFileStore(dbName());
    await trainRun(request(), newRun(), async () => {}, deps(() => whole));
    const want = await final(whole);
    // a save makes 20 puts (a chunk and an entry for each of 7 files, an entry per rename) in 22 read-write transactions
    const faults: [string, (p: Plan) => void, new (m: string) => Error, number][] = [
      ['quota in the second save (the third file staged)', (p) => (p.quotaAtPut = 20 + 5), QuotaExceeded, 1],
      ['an aborted transaction in the third save (the fifth file staged)', (p) => (p.abortAtTx = 2 * 22 + 9), StorageFailed, 2],
      ['a second tab deleting checkpoint-2 while it is saved', () => {}, CorruptCheckpoint, 1],
    ];
    for (const [what, arm, Err, from] of faults) {
      const name = dbName();
      const base = createStore(`rmas-ckpt-${name}`, 'files');
      const p = plan();
      arm(p);
      let store: FileStore = idbFileStore(name, { store: faultyIdb(base, p) });
      if (Err === CorruptCheckpoint) {
        const other = idbFileStore(name);
        let calls = 0;
        // in the save of checkpoint-2, after its files are staged and before the journal is written
        store = interleaved(store, async () => void (++calls === 15 + 7 && (await other.remove('checkpoint-2'))));
      }
      const run = newRun();
      const err = await trainRun(request(), run, async () => {}, deps(() => store as IdbFileStore))
        .then(() => null, (e: unknown) => e);
      expect(err, `${what}: ${String(err)}`).toBeInstanceOf(Err);
      const clean = idbFileStore(name, { store: base });
      const events: TrainEvent[] = [];
      const resumed = await trainRun({ ...request(), resume: { runId: run.id } }, newRun(run.id), async (e) => void events.push(e),
        deps(() => clean));
      expect(events[0], what).toMatchObject({ type: 'start', resumedFrom: from });
      expect(resumed.steps, what).toBe(4);
      const got = await final(clean);
      expect(sameBytes(got.a, want.a) && sameBytes(got.o, want.o), `${what}: the adapter and optimizer bytes`).toBe(true);
    }
  }, 120_000);
});
