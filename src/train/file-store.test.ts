/**
 * Checkpoint stores: the same behaviour suite on nodeStore (a temp folder) and memoryStore; the folder
 * swap over an existing folder and recoverFolderRename after crashes at each point of it; the journaled
 * commit into the root and into a folder with other contents, with a crash before every mutating call.
 */
import { mkdtemp, readdir, rename as fsRename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint } from '../errors';
import {
  type FileStore,
  JOURNAL_FILE,
  PART_MARK,
  STAGING_DIR,
  beginCommit,
  folderPath,
  memoryStore,
  nodeStore,
  recoverCheckpoint,
  recoverFolderRename,
} from './file-store';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'rmas-store-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
let nStore = 0;

interface Case {
  name: string;
  make(): Promise<{
    store: FileStore;
    /** Moves a path aside without the store (a crash after step 1). */ moveRaw(from: string, to: string): Promise<void>;
  }>;
}

const cases: Case[] = [
  {
    name: 'node',
    async make() {
      const dir = join(root, `s${++nStore}`);
      return { store: nodeStore(dir), moveRaw: (f, t) => fsRename(join(dir, f), join(dir, t)) };
    },
  },
  {
    name: 'memory',
    async make() {
      const store = memoryStore();
      return { store, moveRaw: (f, t) => store.rename(f, t) };
    },
  },
];

/** A checkpoint-like folder with two files whose text carries `tag`. */
async function folder(store: FileStore, dir: string, tag: string) {
  await store.write(`${dir}/a.txt`, bytes(`a-${tag}`));
  await store.write(`${dir}/sub/b.txt`, bytes(`b-${tag}`));
}
async function tagOf(store: FileStore, dir: string): Promise<string> {
  const a = text(await store.read(`${dir}/a.txt`)).slice(2);
  const b = text(await store.read(`${dir}/sub/b.txt`)).slice(2);
  expect(b).toBe(a); // never a mix of two saves
  return a;
}

/** The store, except that its n-th mutating call (write, remove, rename) throws instead of running. */
function crashAt(inner: FileStore, n: number): FileStore {
  let calls = 0;
  const tick = () => {
    if (++calls === n) throw new Error(`crash at ${n}`);
  };
  return {
    ...inner,
    write: async (p, b) => (tick(), inner.write(p, b)),
    remove: async (p) => (tick(), inner.remove(p)),
    rename: async (f, t) => (tick(), inner.rename(f, t)),
  };
}

for (const c of cases) {
  describe(`${c.name} store`, () => {
    it('writes, reads, lists and removes', async () => {
      const { store } = await c.make();
      await store.write('run/ckpt/x.bin', new Uint8Array([1, 2, 3]));
      await store.write('run/ckpt/y.bin', new Uint8Array([4]));
      await store.write('run/ckpt/x.bin', new Uint8Array([9, 8])); // overwrite
      expect(Array.from(await store.read('run/ckpt/x.bin'))).toEqual([9, 8]);
      expect(await store.list('run')).toEqual(['ckpt']);
      expect(await store.list('run/ckpt')).toEqual(['x.bin', 'y.bin']);
      expect(await store.list('nowhere')).toEqual([]);
      expect(await store.list('')).toEqual(['run']);
      expect(await store.exists('run/ckpt')).toBe(true);
      expect(await store.exists('run/ckpt/y.bin')).toBe(true);
      expect(await store.exists('run/ckpt/z.bin')).toBe(false);
      await store.remove('run/ckpt/y.bin');
      expect(await store.list('run/ckpt')).toEqual(['x.bin']);
      await store.remove('run');
      await store.remove('run'); // absent: no error
      expect(await store.exists('run/ckpt/x.bin')).toBe(false);
      await expect(store.read('run/ckpt/x.bin')).rejects.toThrow(MissingCheckpoint);
    });

    it('refuses paths that leave the root', async () => {
      const { store } = await c.make();
      await expect(store.write('../evil', bytes('x'))).rejects.toThrow(InvalidArgument);
      await expect(store.read('a/./b')).rejects.toThrow(InvalidArgument);
      await expect(store.remove('')).rejects.toThrow(InvalidArgument);
    });

    it('renames a folder over an existing folder, leaving only the new one', async () => {
      const { store } = await c.make();
      await folder(store, 'ck', 'old');
      await store.write('ck/only-old.txt', bytes('x'));
      await folder(store, 'ck.tmp', 'new');
      await store.rename('ck.tmp', 'ck');
      expect(await tagOf(store, 'ck')).toBe('new');
      expect(await store.list('ck')).toEqual(['a.txt', 'sub']);
      expect(await store.list('')).toEqual(['ck']);
      // file over file
      await store.write('f1', bytes('one'));
      await store.write('f2', bytes('two'));
      await store.rename('f2', 'f1');
      expect(text(await store.read('f1'))).toBe('two');
      expect(await store.exists('f2')).toBe(false);
      await expect(store.rename('missing', 'f1')).rejects.toThrow(MissingCheckpoint);
    });

    it('commits files into the root, keeping sibling folders and unrelated files; stale files removed', async () => {
      const { store } = await c.make();
      await store.write('model.bin', bytes('user model'));
      await store.write('checkpoint-4/x.txt', bytes('x-4'));
      let tx = await beginCommit(store, '.');
      await tx.put('x.txt', bytes('x-1'));
      await tx.put('gone.txt', bytes('g-1'));
      await tx.commit();
      expect(await store.list('')).toEqual(['checkpoint-4', 'gone.txt', 'model.bin', 'x.txt']);
      tx = await beginCommit(store, '');
      await tx.put('x.txt', bytes('x-2'));
      await tx.commit(['gone.txt', 'x.txt']); // x.txt is staged, so it stays
      expect(await store.list('')).toEqual(['checkpoint-4', 'model.bin', 'x.txt']);
      expect(text(await store.read('x.txt'))).toBe('x-2');
      expect(text(await store.read('model.bin'))).toBe('user model');
      expect(text(await store.read('checkpoint-4/x.txt'))).toBe('x-4');
      await expect(tx.put('y.txt', bytes('y'))).rejects.toThrow(InvalidArgument); // finished
      const tx2 = await beginCommit(store, 'checkpoint-4');
      await expect(tx2.put('sub/y.txt', bytes('y'))).rejects.toThrow(InvalidArgument);
      await expect(tx2.put(JOURNAL_FILE, bytes('y'))).rejects.toThrow(InvalidArgument);
      await expect(tx2.commit(['../model.bin'])).rejects.toThrow(InvalidArgument);
      expect(text(await store.read('model.bin'))).toBe('user model');
    });

    it('a crash before any mutating call of a commit leaves all-old or all-new after recovery', async () => {
      const outcomes: string[] = [];
      for (let n = 1; ; n++) {
        const { store } = await c.make();
        await store.write('keep/user.txt', bytes('mine'));
        await store.write('other.txt', bytes('o'));
        const tx0 = await beginCommit(store, '');
        for (const f of ['a', 'b', 'c']) await tx0.put(`${f}.txt`, bytes(`${f}-old`));
        await tx0.commit();
        const crashing = crashAt(store, n);
        const ok = await (async () => {
          const tx = await beginCommit(crashing, '');
          for (const f of ['a', 'b', 'd']) await tx.put(`${f}.txt`, bytes(`${f}-new`));
          await tx.commit(['c.txt']);
        })().then(() => true, (e: Error) => (expect(e.message).toBe(`crash at ${n}`), false));
        const outcome = await recoverCheckpoint(store, '');
        outcomes.push(outcome);
        const names = await store.list('');
        const tags = await Promise.all(
          names.filter((f) => f.length === 5 && f !== 'other.txt').map(async (f) => text(await store.read(f))),
        );
        const isNew = names.includes('d.txt');
        expect(names).toEqual(isNew ? ['a.txt', 'b.txt', 'd.txt', 'keep', 'other.txt'] : ['a.txt', 'b.txt', 'c.txt', 'keep', 'other.txt']);
        expect(tags).toEqual(isNew ? ['a-new', 'b-new', 'd-new'] : ['a-old', 'b-old', 'c-old']);
        expect(text(await store.read('keep/user.txt'))).toBe('mine');
        if (ok) {
          expect(isNew).toBe(true);
          expect(outcome).toBe('intact');
          break;
        }
      }
      // before write 1: nothing to undo; before writes 2-3 and the journal: staging rolled back; before any of
      // 3 renames, 1 removal, the staging and the journal removal: rolled forward; n = 11 succeeds
      expect(outcomes).toEqual(['intact', ...Array(3).fill('rolled-back'), ...Array(6).fill('rolled-forward'), 'intact']);
    });

    it('recovery of a first save into a sub-folder removes the folder; a damaged journal is named', async () => {
      const { store } = await c.make();
      await store.write(`runs/checkpoint-2/${STAGING_DIR}/a.txt`, bytes('half'));
      expect(await recoverCheckpoint(store, 'runs/checkpoint-2/')).toBe('rolled-back');
      expect(await store.list('runs')).toEqual([]);
      expect(await recoverCheckpoint(store, 'runs/checkpoint-2')).toBe('none');
      // killed while the journal was written to its temp name: the commit point was never reached
      await store.write(`runs/checkpoint-3/${STAGING_DIR}/a.txt`, bytes('half'));
      await store.write(`runs/checkpoint-3/${JOURNAL_FILE}${PART_MARK}k1-2`, bytes('{"format_version":1,"wr'));
      expect(await recoverCheckpoint(store, 'runs/checkpoint-3')).toBe('rolled-back');
      expect(await store.list('runs')).toEqual([]);
      await store.write(`ck2/a.txt`, bytes('old'));
      await store.write(`ck2/${JOURNAL_FILE}${PART_MARK}k1-3`, bytes('{'));
      expect(await recoverCheckpoint(store, 'ck2')).toBe('intact');
      expect(await store.list('ck2')).toEqual(['a.txt']);
      await store.write(`ck/${JOURNAL_FILE}`, bytes('{"format_version":1,"write":["../x"],"remove":[]}'));
      await expect(recoverCheckpoint(store, 'ck')).rejects.toThrow(CorruptCheckpoint);
      await expect(recoverCheckpoint(store, 'ck')).rejects.toThrow(/ck\/\.ckpt-commit\.json is not a version 1 commit journal/);
      expect([folderPath('.'), folderPath('./'), folderPath('/'), folderPath('./runs/ck/')]).toEqual(['', '', '', 'runs/ck']);
      expect(() => folderPath('runs/../x')).toThrow(InvalidArgument);
    });

    it('recovers: crash between the two renames rolls the complete new folder forward', async () => {
      const { store, moveRaw } = await c.make();
      await folder(store, 'runs/ck', 'old');
      await folder(store, 'runs/ck.tmp', 'new');
      await moveRaw('runs/ck', 'runs/ck.old-7'); // step 1 done, then the process died
      expect(await store.exists('runs/ck')).toBe(false);
      expect(await recoverFolderRename(store, 'runs/ck')).toBe('rolled-forward');
      expect(await tagOf(store, 'runs/ck')).toBe('new');
      expect(await store.list('runs')).toEqual(['ck']);
      expect(await recoverFolderRename(store, 'runs/ck')).toBe('intact');
    });

    it('recovers: aside copy without a new folder is put back', async () => {
      const { store, moveRaw } = await c.make();
      await folder(store, 'ck', 'old');
      await moveRaw('ck', 'ck.old-1');
      expect(await recoverFolderRename(store, 'ck')).toBe('rolled-back');
      expect(await tagOf(store, 'ck')).toBe('old');
      expect(await store.list('')).toEqual(['ck']);
    });

    it('recovers: stale aside copy after step 2, and a save that never reached the swap', async () => {
      const { store } = await c.make();
      await folder(store, 'ck', 'new');
      await folder(store, 'ck.old-3', 'old'); // step 3 never ran
      await store.write('ck.tmp/a.txt', bytes('a-half')); // an unfinished later save
      expect(await recoverFolderRename(store, 'ck')).toBe('intact');
      expect(await tagOf(store, 'ck')).toBe('new');
      expect(await store.list('')).toEqual(['ck']);
      // first save ever, died while writing
      await store.write('fresh.tmp/a.txt', bytes('a-half'));
      expect(await recoverFolderRename(store, 'fresh')).toBe('none');
      expect(await store.list('')).toEqual(['ck']);
    });
  });
}

describe('node store on disk', () => {
  it('leaves no temp files behind and keeps the old file when a write fails', async () => {
    const dir = join(root, 'disk');
    const store = nodeStore(dir);
    await store.write('ck/w.bin', new Uint8Array([1, 2]));
    await expect(store.write('ck/w.bin/inner', new Uint8Array([3]))).rejects.toThrow(); // parent is a file
    expect(Array.from(await store.read('ck/w.bin'))).toEqual([1, 2]);
    expect(await readdir(join(dir, 'ck'))).toEqual(['w.bin']);
  });
});
