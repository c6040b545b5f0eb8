/**
 * A file store: the small file-system interface (FileStore) through which checkpoints are written, so the
 * same checkpoint code writes files in Node (nodeStore), IndexedDB in the browser (store/idb-store.ts) and
 * memory in tests. Paths are '/'-separated and relative to the store root
 * (leading and trailing '/' ignored); '.', '..' and empty segments are refused.
 *
 * Checkpoint commit protocol (journaled; used for every checkpoint folder, including the store root
 * and folders that hold other files or `checkpoint-<step>/` subfolders, which are never touched):
 *   1. recover (below), then write each new file to `<dir>/.ckpt-staging/<name>`;
 *   2. write the journal `<dir>/.ckpt-commit.json` = {format_version, write: [names], remove: [names]}
 *      in one atomic store.write: THE COMMIT POINT;
 *   3. rename each staged file over `<dir>/<name>` (file over file: one atomic step each);
 *   4. remove the `remove` names (files of the previous checkpoint the new one does not have);
 *   5. remove `.ckpt-staging/`, then the journal.
 * recoverCheckpoint(dir): a journal present → redo 3–5 (each step is idempotent) → the new checkpoint;
 * no journal but a staging folder → delete it → the previous checkpoint, whose files were never touched.
 * Either way a journal a kill left half-written under its temp name (`.ckpt-commit.json.part-<n>`) is deleted.
 * One writer per folder at a time is assumed. A journal naming a file that is neither staged nor in place (something
 * else deleted files of the folder while it was being saved: another tab, a user) can never be finished: recovery
 * refuses it by name, listing never takes the folder for a checkpoint, and the next save into the folder discards
 * it (the checkpoint files of both saves, the staging folder, then the journal) before writing its own.
 *
 * Folder swap (nodeStore.rename of a folder onto an existing folder, which POSIX cannot do in one step;
 * the checkpoint code no longer needs it): 1. rename `to` aside to `to.old-<n>`; 2. rename `from` to
 * `to`; 3. remove `to.old-<n>`. recoverFolderRename(store, to) repairs a crash inside it when `from` was
 * `<to>.tmp` and complete before step 1.
 */
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint } from '../errors';
import { nodeImport } from '../util/node-import';

export interface FileStore {
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

/** Splits and checks a store path; '' (the root) only where `rootOk`. Every FileStore uses it. */
export function cleanStorePath(path: string, rootOk = false): string {
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
export function memoryStore(): FileStore & { files: Map<string, Uint8Array> } {
  const files = new Map<string, Uint8Array>();
  const under = (p: string) => [...files.keys()].filter((k) => k.startsWith(`${p}/`));
  return {
    files,
    async write(path, bytes) {
      const p = cleanStorePath(path);
      if (under(p).length) throw new InvalidArgument(`memory store: '${p}' is a folder; cannot write a file over it`);
      files.set(p, bytes.slice());
    },
    async read(path) {
      const p = cleanStorePath(path);
      const b = files.get(p);
      if (!b) throw new MissingCheckpoint(`checkpoint file ${p} does not exist (memory store); save a checkpoint first or fix the path`);
      return b.slice();
    },
    async exists(path) {
      const p = cleanStorePath(path);
      return files.has(p) || under(p).length > 0;
    },
    async list(dir) {
      const d = cleanStorePath(dir, true);
      const pre = d ? `${d}/` : '';
      const names = new Set<string>();
      for (const k of files.keys()) if (k.startsWith(pre)) names.add(k.slice(pre.length).split('/')[0]);
      return [...names].sort();
    },
    async remove(path) {
      const p = cleanStorePath(path);
      files.delete(p);
      for (const k of under(p)) files.delete(k);
    },
    async rename(from, to) {
      const f = cleanStorePath(from);
      const t = cleanStorePath(to);
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
const fsp = () => nodeImport('node:fs/promises');
const errCode = (e: unknown) => (e as NodeJS.ErrnoException).code;
let counter = 0;
const unique = () => `${Date.now().toString(36)}-${(++counter).toString(36)}`;
/** What nodeStore appends to a file's name while writing it; a process killed mid-write leaves `<name>.part-<n>`. */
export const PART_MARK = '.part-';

/** Best effort: persist a folder's entries (renames) on POSIX; platforms that cannot open a folder skip it. */
async function syncDir(fs: FsPromises, dir: string) {
  const h = await fs.open(dir, 'r').catch(() => null);
  if (!h) return;
  await h.sync().catch(() => undefined);
  await h.close();
}

/** A store over a folder on disk (created on first write). Files are written to a temp name, synced and renamed in. */
export function nodeStore(root: string): FileStore {
  const base = root.replace(/\/+$/, '') || '/';
  const abs = (p: string) => (p ? `${base}/${p}` : base);
  return {
    async write(path, bytes) {
      const p = cleanStorePath(path);
      const fs = await fsp();
      const dest = abs(p);
      await fs.mkdir(abs(parentOf(p)), { recursive: true });
      const tmp = `${dest}${PART_MARK}${unique()}`;
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
      const p = cleanStorePath(path);
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
      return (await fs.stat(abs(cleanStorePath(path))).catch(() => null)) !== null;
    },
    async list(dir) {
      const fs = await fsp();
      try {
        return (await fs.readdir(abs(cleanStorePath(dir, true)))).sort();
      } catch (e) {
        if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR') return [];
        throw e;
      }
    },
    async remove(path) {
      const fs = await fsp();
      await fs.rm(abs(cleanStorePath(path)), { recursive: true, force: true });
    },
    async rename(from, to) {
      const f = cleanStorePath(from);
      const t = cleanStorePath(to);
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

// ------------------------------------------------------------------------------------ journaled commit

export const STAGING_DIR = '.ckpt-staging';
export const JOURNAL_FILE = '.ckpt-commit.json';
const JOURNAL_VERSION = 1;

/** A checkpoint folder path: '', '.', './' and '/' are the store root (returned as ''). */
export function folderPath(dir: string): string {
  const s = String(dir).replace(/^\/+|\/+$/g, '').replace(/^(\.\/)+/, '');
  return s === '.' ? '' : cleanStorePath(s, true);
}
/** `name` inside folder `d` ('' = root). */
export const inFolder = (d: string, name: string) => (d ? `${d}/${name}` : name);

const plainName = (n: unknown): n is string =>
  typeof n === 'string' && /^[^/\\]+$/.test(n) && n !== '.' && n !== '..' && n !== STAGING_DIR && n !== JOURNAL_FILE;

export interface Journal {
  write: string[];
  remove: string[];
}

/** The journal of an interrupted commit in `dir`, or null if none; CorruptCheckpoint if unreadable. */
export async function pendingCommit(store: FileStore, dir: string): Promise<Journal | null> {
  const path = inFolder(folderPath(dir), JOURNAL_FILE);
  if (!(await store.exists(path))) return null;
  let j: unknown;
  try {
    j = JSON.parse(new TextDecoder().decode(await store.read(path)));
  } catch {
    j = null;
  }
  const o = j as Record<string, unknown> | null;
  const ok = (v: unknown): v is string[] => Array.isArray(v) && v.every(plainName);
  if (!o || typeof o !== 'object' || o.format_version !== JOURNAL_VERSION || !ok(o.write) || !ok(o.remove)) {
    throw new CorruptCheckpoint(
      `${path} is not a version ${JOURNAL_VERSION} commit journal; delete it and ${inFolder(folderPath(dir), STAGING_DIR)} by hand, then check that the checkpoint loads`,
    );
  }
  return { write: o.write, remove: o.remove };
}

/** The files a journal commits that are neither staged nor in place: the commit can never be finished. */
async function lostFiles(store: FileStore, d: string, j: Journal): Promise<string[]> {
  const lost: string[] = [];
  for (const name of j.write) {
    if (!(await store.exists(inFolder(d, `${STAGING_DIR}/${name}`))) && !(await store.exists(inFolder(d, name)))) lost.push(name);
  }
  return lost;
}

const brokenCommit = (d: string, lost: readonly string[]) =>
  new CorruptCheckpoint(
    `${lost.map((n) => inFolder(d, n)).join(', ')} ${lost.length > 1 ? 'were' : 'was'} committed but ${lost.length > 1 ? 'are' : 'is'} ` +
      `neither staged nor in place (deleted while the checkpoint was being saved?); the checkpoint in ${d || 'the store root'} is ` +
      'damaged: resume from another one (the next save into this folder replaces it)',
  );

/** Steps 3–5 of the protocol; safe to repeat after a crash at any point inside it. */
async function applyJournal(store: FileStore, d: string, j: Journal) {
  for (const name of j.write) {
    const staged = inFolder(d, `${STAGING_DIR}/${name}`);
    if (await store.exists(staged)) await store.rename(staged, inFolder(d, name));
    else if (!(await store.exists(inFolder(d, name)))) throw brokenCommit(d, [name]);
  }
  for (const name of j.remove) await store.remove(inFolder(d, name));
  await store.remove(inFolder(d, STAGING_DIR));
  await store.remove(inFolder(d, JOURNAL_FILE));
}

export interface FileCommit {
  /** Stages one file (a plain name) of the new checkpoint. */
  put(name: string, bytes: Uint8Array): Promise<void>;
  /** Commits every staged file and removes `remove` (names not staged); nothing in the folder changes before this. */
  commit(remove?: Iterable<string>): Promise<void>;
}

/** Starts a journaled multi-file commit into `dir` (recovering an interrupted one first). */
export async function beginCommit(store: FileStore, dir: string): Promise<FileCommit> {
  const d = folderPath(dir);
  await recoverCheckpoint(store, d, { discardBroken: true });
  const staged: string[] = [];
  let done = false;
  return {
    async put(name, bytes) {
      if (done) throw new InvalidArgument('this commit is finished; begin a new one');
      if (!plainName(name))
        throw new InvalidArgument(`checkpoint file name '${name}' must be a plain file name other than ${STAGING_DIR} and ${JOURNAL_FILE}`);
      await store.write(inFolder(d, `${STAGING_DIR}/${name}`), bytes);
      if (!staged.includes(name)) staged.push(name);
    },
    async commit(remove = []) {
      if (done) throw new InvalidArgument('this commit is finished; begin a new one');
      done = true;
      const gone = [...new Set(remove)].filter((n) => !staged.includes(n));
      const bad = gone.filter((n) => !plainName(n));
      if (bad.length) throw new InvalidArgument(`files to remove (${bad.join(', ')}) must be plain file names in the folder`);
      const j: Journal = { write: staged, remove: gone };
      await store.write(
        inFolder(d, JOURNAL_FILE),
        new TextEncoder().encode(`${JSON.stringify({ format_version: JOURNAL_VERSION, ...j })}\n`),
      );
      await applyJournal(store, d, j);
    },
  };
}

// ------------------------------------------------------------------------------------ recovery

export type RecoveryOutcome = 'intact' | 'rolled-forward' | 'rolled-back' | 'discarded' | 'none';

/**
 * Finishes (journal present: 'rolled-forward') or undoes (staging only: 'rolled-back') a commit into
 * `dir` that a crash interrupted; 'intact' if there was nothing to do, 'none' if the folder is empty.
 * A sub-folder left empty by a rolled-back first save is removed. A commit that can never be finished (files it
 * names are gone) is CorruptCheckpoint, or with `discardBroken` (a new save into the folder) removed: 'discarded'.
 */
export async function recoverCheckpoint(
  store: FileStore,
  dir: string,
  opts: { discardBroken?: boolean } = {},
): Promise<RecoveryOutcome> {
  const d = folderPath(dir);
  const all = await store.list(d);
  // a journal killed before its rename into place: never a commit point, so only litter
  const halfJournals = all.filter((n) => n.startsWith(JOURNAL_FILE + PART_MARK));
  for (const n of halfJournals) await store.remove(inFolder(d, n));
  const names = all.filter((n) => !halfJournals.includes(n));
  const j = names.includes(JOURNAL_FILE) ? await pendingCommit(store, d) : null;
  if (j) {
    const lost = await lostFiles(store, d, j);
    if (!lost.length) {
      await applyJournal(store, d, j);
      return 'rolled-forward';
    }
    if (!opts.discardBroken) throw brokenCommit(d, lost);
    // neither save's checkpoint is whole: their files go, the journal last (a crash in between repeats this)
    for (const name of new Set([...j.write, ...j.remove])) await store.remove(inFolder(d, name));
    await store.remove(inFolder(d, STAGING_DIR));
    await store.remove(inFolder(d, JOURNAL_FILE));
    return 'discarded';
  }
  if (names.includes(STAGING_DIR)) {
    await store.remove(inFolder(d, STAGING_DIR));
    if (d && !(await store.list(d)).length) await store.remove(d);
    return 'rolled-back';
  }
  return names.length ? 'intact' : 'none';
}

/**
 * Finishes or undoes a folder swap of `<to>.tmp` onto `to` (store.rename of folders) that a crash
 * interrupted: `to` present → stale `to.old-*` and `to.tmp` removed ('intact'); `to` absent with an
 * aside copy → `to.tmp` renamed in ('rolled-forward') or, without it, the newest aside copy put back
 * ('rolled-back'); neither → `to.tmp` removed ('none').
 */
export async function recoverFolderRename(store: FileStore, to: string): Promise<RecoveryOutcome> {
  const d = cleanStorePath(to);
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
