/**
 * Where training checkpoints live: a small file-system interface so the same checkpoint code writes
 * files in Node and IndexedDB in the browser. Paths are '/'-separated and relative to the store root
 * (leading and trailing '/' ignored); '.', '..' and empty segments are refused.
 *
 * Folder swap protocol (nodeStore.rename of a folder onto an existing folder, which POSIX cannot do in
 * one step):
 *   1. rename `to` aside to `to.old-<n>`;
 *   2. rename `from` to `to`;
 *   3. remove `to.old-<n>`.
 * A crash can leave: after 1, `to` absent with `to.old-*` beside it (and `from` still there); after 2,
 * a stale `to.old-*`. recoverCheckpoint(store, dir) repairs both for the checkpoint convention where
 * `from` is `<dir>.tmp`, which is complete before step 1 starts (saveCheckpoint writes every file first).
 */
import { InvalidArgument, MissingCheckpoint } from '../errors';

export interface CheckpointStore {
  write(path: string, bytes: Uint8Array): Promise<void>;
  /** MissingCheckpoint if absent. */
  read(path: string): Promise<Uint8Array>;
  exists(path: string): Promise<boolean>;
  /** Names directly inside dir ([] if absent). */
  list(dir: string): Promise<string[]>;
  /** File or folder, recursive; no error if absent. */
  remove(path: string): Promise<void>;
  /** Atomically replace `to` with `from` (a folder or file): after a crash either the old or the new one is complete. */
  rename(from: string, to: string): Promise<void>;
}

/** Splits and checks a store path; '' (the root) only where `rootOk`. */
function clean(path: string, rootOk = false): string {
  const s = String(path).replace(/^\/+|\/+$/g, '');
  const parts = s ? s.split('/') : [];
  if (parts.some((p) => p === '' || p === '.' || p === '..' || p.includes('\\'))) {
    throw new InvalidArgument(`store path '${path}' must be '/'-separated names without '.', '..', '\\' or empty segments`);
  }
  if (!parts.length && !rootOk) throw new InvalidArgument('store path is empty; name a file or folder under the store root');
  return parts.join('/');
}

const parentOf = (p: string) => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '');
const baseOf = (p: string) => p.slice(p.lastIndexOf('/') + 1);
const ASIDE = '.old-';

// ------------------------------------------------------------------------------------ memory

/** An in-memory store (the test double and the browser placeholder); `files` maps full paths to bytes. */
export function memoryStore(): CheckpointStore & { files: Map<string, Uint8Array> } {
  const files = new Map<string, Uint8Array>();
  const under = (p: string) => [...files.keys()].filter((k) => k.startsWith(`${p}/`));
  return {
    files,
    async write(path, bytes) {
      const p = clean(path);
      if (under(p).length) throw new InvalidArgument(`memory store: '${p}' is a folder; cannot write a file over it`);
      files.set(p, bytes.slice());
    },
    async read(path) {
      const p = clean(path);
      const b = files.get(p);
      if (!b) throw new MissingCheckpoint(`checkpoint file ${p} does not exist (memory store); save a checkpoint first or fix the path`);
      return b.slice();
    },
    async exists(path) {
      const p = clean(path);
      return files.has(p) || under(p).length > 0;
    },
    async list(dir) {
      const d = clean(dir, true);
      const pre = d ? `${d}/` : '';
      const names = new Set<string>();
      for (const k of files.keys()) if (k.startsWith(pre)) names.add(k.slice(pre.length).split('/')[0]);
      return [...names].sort();
    },
    async remove(path) {
      const p = clean(path);
      files.delete(p);
      for (const k of under(p)) files.delete(k);
    },
    async rename(from, to) {
      const f = clean(from);
      const t = clean(to);
      if (f === t) return;
      if (t.startsWith(`${f}/`)) throw new InvalidArgument(`memory store: cannot move '${f}' into itself ('${t}')`);
      const moved: [string, Uint8Array][] = [];
      if (files.has(f)) moved.push([t, files.get(f)!]);
      for (const k of under(f)) moved.push([t + k.slice(f.length), files.get(k)!]);
      if (!moved.length) throw new MissingCheckpoint(`memory store: cannot rename '${f}': it does not exist`);
      // one synchronous block: nothing can observe a half-done move
      files.delete(f);
      for (const k of under(f)) files.delete(k);
      files.delete(t);
      for (const k of under(t)) files.delete(k);
      for (const [k, b] of moved) files.set(k, b);
    },
  };
}

// ------------------------------------------------------------------------------------ node

type FsPromises = typeof import('node:fs/promises');
// Held in a variable so that bundlers do not try to resolve node:fs for the browser build.
const FS_MODULE = 'node:fs/promises';
const fsp = async () => (await import(/* @vite-ignore */ FS_MODULE)) as FsPromises;
const errCode = (e: unknown) => (e as NodeJS.ErrnoException).code;
let counter = 0;
const unique = () => `${Date.now().toString(36)}-${(++counter).toString(36)}`;

/** Best effort: persist a folder's entries (renames) on POSIX; platforms that cannot open a folder skip it. */
async function syncDir(fs: FsPromises, dir: string) {
  const h = await fs.open(dir, 'r').catch(() => null);
  if (!h) return;
  await h.sync().catch(() => undefined);
  await h.close();
}

/** A store over a folder on disk (created on first write). Files are written to a temp name, synced and renamed in. */
export function nodeStore(root: string): CheckpointStore {
  const base = root.replace(/\/+$/, '') || '/';
  const abs = (p: string) => (p ? `${base}/${p}` : base);
  return {
    async write(path, bytes) {
      const p = clean(path);
      const fs = await fsp();
      const dest = abs(p);
      await fs.mkdir(abs(parentOf(p)), { recursive: true });
      const tmp = `${dest}.part-${unique()}`;
      try {
        const h = await fs.open(tmp, 'w');
        try {
          await h.writeFile(bytes);
          await h.sync();
        } finally {
          await h.close();
        }
        await fs.rename(tmp, dest);
      } catch (e) {
        await fs.rm(tmp, { force: true });
        throw e;
      }
    },
    async read(path) {
      const p = clean(path);
      const fs = await fsp();
      try {
        return new Uint8Array(await fs.readFile(abs(p)));
      } catch (e) {
        if (errCode(e) === 'ENOENT' || errCode(e) === 'EISDIR' || errCode(e) === 'ENOTDIR') {
          throw new MissingCheckpoint(`checkpoint file ${abs(p)} does not exist; save a checkpoint first or fix the path`);
        }
        throw e;
      }
    },
    async exists(path) {
      const fs = await fsp();
      return (await fs.stat(abs(clean(path))).catch(() => null)) !== null;
    },
    async list(dir) {
      const fs = await fsp();
      try {
        return (await fs.readdir(abs(clean(dir, true)))).sort();
      } catch (e) {
        if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return [];
        throw e;
      }
    },
    async remove(path) {
      const fs = await fsp();
      await fs.rm(abs(clean(path)), { recursive: true, force: true });
    },
    async rename(from, to) {
      const f = clean(from);
      const t = clean(to);
      if (f === t) return;
      const fs = await fsp();
      const src = await fs.stat(abs(f)).catch(() => null);
      if (!src) throw new MissingCheckpoint(`cannot rename ${abs(f)}: it does not exist`);
      await fs.mkdir(abs(parentOf(t)), { recursive: true });
      const dst = await fs.stat(abs(t)).catch(() => null);
      if (!dst || (!src.isDirectory() && !dst.isDirectory())) {
        await fs.rename(abs(f), abs(t)); // a file over a file (or onto nothing) is one atomic step
      } else {
        const aside = `${t}${ASIDE}${unique()}`;
        await fs.rename(abs(t), abs(aside)); // 1
        await fs.rename(abs(f), abs(t)); // 2
        await syncDir(fs, abs(parentOf(t)));
        await fs.rm(abs(aside), { recursive: true, force: true }); // 3
      }
      await syncDir(fs, abs(parentOf(t)));
    },
  };
}

// ------------------------------------------------------------------------------------ recovery

export type RecoveryOutcome = 'intact' | 'rolled-forward' | 'rolled-back' | 'none';

/**
 * Finishes or undoes a folder swap of `<dir>.tmp` onto `dir` that a crash interrupted, and clears
 * leftovers, so that `dir` is absent or one complete checkpoint:
 * - `dir` present: stale `dir.old-*` and an unfinished `dir.tmp` (a save that never reached the swap)
 *   are removed → 'intact'.
 * - `dir` absent, `dir.old-*` present: the swap had started, so `dir.tmp` was complete; it is renamed
 *   in ('rolled-forward'); without it the newest aside copy is put back ('rolled-back').
 * - neither: a first save that never finished; its `dir.tmp` is removed → 'none'.
 */
export async function recoverCheckpoint(store: CheckpointStore, dir: string): Promise<RecoveryOutcome> {
  const d = clean(dir);
  const name = baseOf(d);
  const parent = parentOf(d);
  const at = (n: string) => (parent ? `${parent}/${n}` : n);
  const siblings = await store.list(parent);
  const asides = siblings.filter((n) => n.startsWith(name + ASIDE)).sort();
  const tmp = at(`${name}.tmp`);
  let outcome: RecoveryOutcome;
  if (siblings.includes(name)) {
    outcome = 'intact';
    await store.remove(tmp);
  } else if (asides.length && siblings.includes(`${name}.tmp`)) {
    await store.rename(tmp, d);
    outcome = 'rolled-forward';
  } else if (asides.length) {
    const last = asides.pop()!;
    await store.rename(at(last), d);
    outcome = 'rolled-back';
  } else {
    await store.remove(tmp);
    return 'none';
  }
  for (const a of asides) await store.remove(at(a));
  return outcome;
}
