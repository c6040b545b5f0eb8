/**
 * A FileStore (src/train/file-store.ts) in the browser's IndexedDB, over idb-keyval's createStore.
 *
 * Layout of the object store 'files' of database `rmas-ckpt-<name>`:
 *   `f:<path>` → FileEntry {size, sha256, chunks: [chunk keys]}   one per file
 *   `c:<time>:<uid>:<i>` → Uint8Array (≤ 8 MiB)                   the file's bytes, in order
 * Chunk keys do not name the path, so renaming a file or folder rewrites only its entries, in one
 * transaction (atomic, as the commit protocol needs). A write stores its new chunks first (one
 * transaction per chunk) and then swaps the entry and drops the old chunks in one transaction, so a
 * failure (quota, closed tab) leaves the old file whole; chunks of writes that never reached the swap
 * are orphans that sweepOrphans() removes. Reads check size and SHA-256 and raise CorruptCheckpoint.
 * QuotaExceededError becomes QuotaExceeded with the size that was being written; any other failure of IndexedDB (an
 * aborted transaction, a closed connection, a disk error) becomes StorageFailed naming what was being done.
 */
import { createStore, type UseStore } from 'idb-keyval';
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint, QuotaExceeded, RmasError, StorageFailed } from '../errors';
import { cleanStorePath, type FileStore } from '../train/file-store';
import { sha256Hex } from '../util/sha256';

export const CHUNK_BYTES = 8 * 1024 * 1024;

const FILE = 'f:';
const CHUNK = 'c:';
const HIGH = '\uffff';

export interface FileEntry {
  size: number;
  sha256: string;
  chunks: string[];
}

export interface IdbFileStore extends FileStore {
  /** The idb-keyval store underneath (tests, the cache manager's size listing). */
  readonly idb: UseStore;
  /** Size, hash and chunk keys of a stored file, or null. */
  entry(path: string): Promise<FileEntry | null>;
  /** Removes chunks no file refers to that are older than `olderThanMs` (default 1 hour); returns how many. */
  sweepOrphans(olderThanMs?: number): Promise<number>;
}


const req = <T>(r: IDBRequest<T>) => new Promise<T>((res, rej) => {
  r.onsuccess = () => res(r.result);
  r.onerror = () => rej(r.error);
});
/** Everything strictly below folder key prefix `pre` (which ends in '/'). */
const below = (pre: string) => IDBKeyRange.bound(pre, pre + HIGH);
const isQuota = (e: unknown) => typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'QuotaExceededError';
const size = (n: number) => (n >= 2 ** 20 ? `${(n / 2 ** 20).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} bytes`);
/** A stored path as the user knows it: the file name, without internal staging folders. */
const shown = (p: string) => p.split('/').filter((s) => !s.startsWith('.')).join('/') || p;
let uidCounter = 0;
const uid = () => `${Math.random().toString(36).slice(2, 10)}${(++uidCounter).toString(36)}`;

/**
 * A checkpoint store in IndexedDB database `rmas-ckpt-<name>`. `opts.store` replaces the idb-keyval
 * store (tests wrap it to simulate a full disk).
 */
export function idbFileStore(name: string, opts: { store?: UseStore } = {}): IdbFileStore {
  const idb = opts.store ?? createStore(`rmas-ckpt-${name}`, 'files');

  /** Runs `body` in one transaction, resolving after it commits; a throw or rejection aborts it. */
  const tx = <T>(mode: IDBTransactionMode, body: (os: IDBObjectStore) => Promise<T>): Promise<T> =>
    idb(mode, async (os) => {
      const t = os.transaction;
      const done = new Promise<void>((res, rej) => {
        t.oncomplete = () => res();
        t.onabort = () => rej(t.error ?? new DOMException('the transaction was aborted', 'AbortError'));
      });
      done.catch(() => {});
      let out: T;
      try {
        out = await body(os);
      } catch (e) {
        try { t.abort(); } catch { /* already finished or aborting */ }
        throw e;
      }
      await done;
      return out;
    });

  /** What the caller gets for a failure of IndexedDB while doing `what`: QuotaExceeded, StorageFailed, or our own error as it is. */
  const failed = (e: unknown, what: string, bytes: number | null = null) => {
    if (isQuota(e)) {
      return new QuotaExceeded(
        `browser storage is full: ${what}${bytes === null ? '' : ` needed ${size(bytes)}`}. Delete models or checkpoints ` +
          'you no longer need (or allow persistent storage), then try again; nothing stored was changed',
      );
    }
    if (e instanceof RmasError || !(e instanceof Error || e instanceof DOMException)) return e;
    return new StorageFailed(
      `browser storage failed ${what} (${e.name}: ${e.message}); nothing stored was changed. Try again; if it keeps failing, ` +
        'reload the page (another tab may have deleted or upgraded the database)',
    );
  };
  /** `op`, with a failure of IndexedDB turned into a named error (failed). */
  const named = async <T>(what: string, op: () => Promise<T>, bytes: number | null = null): Promise<T> => {
    try {
      return await op();
    } catch (e) {
      throw failed(e, what, bytes);
    }
  };

  const entriesAt = async (os: IDBObjectStore, p: string): Promise<[string, FileEntry][]> => {
    const out: [string, FileEntry][] = [];
    const own = (await req(os.get(FILE + p))) as FileEntry | undefined;
    if (own) out.push([p, own]);
    const r = below(`${FILE}${p}/`);
    const [ks, vs] = await Promise.all([req(os.getAllKeys(r)), req(os.getAll(r))]);
    ks.forEach((k, i) => out.push([String(k).slice(FILE.length), vs[i] as FileEntry]));
    return out;
  };
  const dropEntries = (os: IDBObjectStore, list: [string, FileEntry][]) => {
    for (const [p, e] of list) {
      os.delete(FILE + p);
      for (const c of e.chunks) os.delete(c);
    }
  };

  return {
    idb,
    async write(path, bytes) {
      const p = cleanStorePath(path);
      const sha256 = await sha256Hex(bytes);
      const chunks: string[] = [];
      const stamp = `${CHUNK}${Date.now().toString(36).padStart(10, '0')}:${uid()}:`;
      try {
        for (let at = 0, i = 0; at < bytes.length; at += CHUNK_BYTES, i++) {
          const key = `${stamp}${i}`;
          const part = bytes.slice(at, Math.min(bytes.length, at + CHUNK_BYTES)); // a copy: a view would clone its whole buffer
          await tx('readwrite', async (os) => { await req(os.put(part, key)); });
          chunks.push(key);
        }
        await tx('readwrite', async (os) => {
          const nested = await req(os.count(below(`${FILE}${p}/`)));
          if (nested) throw new InvalidArgument(`IndexedDB store: '${p}' is a folder; cannot write a file over it`);
          const old = (await req(os.get(FILE + p))) as FileEntry | undefined;
          const entry: FileEntry = { size: bytes.length, sha256, chunks };
          await req(os.put(entry, FILE + p));
          for (const c of old?.chunks ?? []) os.delete(c);
        });
      } catch (e) {
        await tx('readwrite', async (os) => { for (const c of chunks) os.delete(c); }).catch(() => {});
        throw failed(e, `saving ${shown(p)}`, bytes.length);
      }
    },
    async read(path) {
      const p = cleanStorePath(path);
      const got = await named(`reading ${shown(p)}`, () => tx('readonly', async (os) => {
        const e = (await req(os.get(FILE + p))) as FileEntry | undefined;
        if (!e) return null;
        return { e, parts: await Promise.all(e.chunks.map((c) => req(os.get(c)) as Promise<Uint8Array | undefined>)) };
      }));
      if (!got)
        throw new MissingCheckpoint(`checkpoint file ${p} does not exist (browser storage); save a checkpoint first or fix the path`);
      const damaged = (what: string) =>
        new CorruptCheckpoint(`${p} in browser storage ${what}; delete this checkpoint in the cache manager and save or import it again`);
      const out = new Uint8Array(got.e.size);
      let at = 0;
      for (const [i, b] of got.parts.entries()) {
        if (!(b instanceof Uint8Array)) throw damaged(`lacks chunk ${i + 1} of ${got.parts.length}`);
        if (at + b.length > out.length) throw damaged(`holds more bytes than its recorded size ${got.e.size}`);
        out.set(b, at);
        at += b.length;
      }
      if (at !== out.length) throw damaged(`holds ${at} bytes, expected ${got.e.size}`);
      if ((await sha256Hex(out)) !== got.e.sha256) throw damaged('fails its SHA-256 check (the stored bytes changed)');
      return out;
    },
    async exists(path) {
      const p = cleanStorePath(path);
      return named(`looking for ${shown(p)}`, () =>
        tx('readonly', async (os) => (await req(os.count(FILE + p))) > 0 || (await req(os.count(below(`${FILE}${p}/`)))) > 0));
    },
    async list(dir) {
      const d = cleanStorePath(dir, true);
      const pre = `${FILE}${d ? `${d}/` : ''}`;
      const ks = await named(`listing ${shown(d) || 'the store'}`, () => tx('readonly', async (os) => req(os.getAllKeys(below(pre)))));
      return [...new Set(ks.map((k) => String(k).slice(pre.length).split('/')[0]!))].sort();
    },
    async remove(path) {
      const p = cleanStorePath(path);
      await named(`deleting ${shown(p)}`, () => tx('readwrite', async (os) => dropEntries(os, await entriesAt(os, p))));
    },
    async rename(from, to) {
      const f = cleanStorePath(from);
      const t = cleanStorePath(to);
      if (f === t) return;
      if (t.startsWith(`${f}/`)) throw new InvalidArgument(`IndexedDB store: cannot move '${f}' into itself ('${t}')`);
      try {
        await tx('readwrite', async (os) => {
          const moved = await entriesAt(os, f);
          if (!moved.length) throw new MissingCheckpoint(`IndexedDB store: cannot rename '${f}': it does not exist`);
          dropEntries(os, await entriesAt(os, t)); // the target's files and their chunks
          for (const [p] of moved) os.delete(FILE + p);
          for (const [p, e] of moved) os.put(e, FILE + t + p.slice(f.length));
        });
      } catch (e) {
        throw failed(e, `renaming ${shown(f)}`);
      }
    },
    async entry(path) {
      const p = cleanStorePath(path);
      const e = await named(`reading ${shown(p)}`, () => tx('readonly', async (os) => req(os.get(FILE + p))));
      return (e as FileEntry | undefined) ?? null;
    },
    async sweepOrphans(olderThanMs = 3_600_000) {
      const cutoff = `${CHUNK}${Math.max(0, Date.now() - olderThanMs).toString(36).padStart(10, '0')}`;
      return named('sweeping unused chunks', () => tx('readwrite', async (os) => {
        const used = new Set(((await req(os.getAll(below(FILE)))) as FileEntry[]).flatMap((e) => e.chunks));
        const stale = (await req(os.getAllKeys(IDBKeyRange.bound(CHUNK, cutoff)))).map(String).filter((k) => !used.has(k));
        for (const k of stale) os.delete(k);
        return stale.length;
      }));
    },
  };
}
