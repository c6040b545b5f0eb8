/**
 * Checkpoint stores: the same behaviour suite on nodeStore (a temp folder) and memoryStore, the folder
 * swap over an existing folder, and recoverCheckpoint after crashes at each point of the swap protocol.
 */
import { mkdtemp, readdir, rename as fsRename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgument, MissingCheckpoint } from '../errors';
import { type CheckpointStore, memoryStore, nodeStore, recoverCheckpoint } from './store';

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
  make(): Promise<{ store: CheckpointStore; /** Moves a path aside without the store (a crash after step 1). */ moveRaw(from: string, to: string): Promise<void> }>;
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
async function folder(store: CheckpointStore, dir: string, tag: string) {
  await store.write(`${dir}/a.txt`, bytes(`a-${tag}`));
  await store.write(`${dir}/sub/b.txt`, bytes(`b-${tag}`));
}
async function tagOf(store: CheckpointStore, dir: string): Promise<string> {
  const a = text(await store.read(`${dir}/a.txt`)).slice(2);
  const b = text(await store.read(`${dir}/sub/b.txt`)).slice(2);
  expect(b).toBe(a); // never a mix of two saves
  return a;
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

    it('recovers: crash between the two renames rolls the complete new folder forward', async () => {
      const { store, moveRaw } = await c.make();
      await folder(store, 'runs/ck', 'old');
      await folder(store, 'runs/ck.tmp', 'new');
      await moveRaw('runs/ck', 'runs/ck.old-7'); // step 1 done, then the process died
      expect(await store.exists('runs/ck')).toBe(false);
      expect(await recoverCheckpoint(store, 'runs/ck')).toBe('rolled-forward');
      expect(await tagOf(store, 'runs/ck')).toBe('new');
      expect(await store.list('runs')).toEqual(['ck']);
      expect(await recoverCheckpoint(store, 'runs/ck')).toBe('intact');
    });

    it('recovers: aside copy without a new folder is put back', async () => {
      const { store, moveRaw } = await c.make();
      await folder(store, 'ck', 'old');
      await moveRaw('ck', 'ck.old-1');
      expect(await recoverCheckpoint(store, 'ck')).toBe('rolled-back');
      expect(await tagOf(store, 'ck')).toBe('old');
      expect(await store.list('')).toEqual(['ck']);
    });

    it('recovers: stale aside copy after step 2, and a save that never reached the swap', async () => {
      const { store } = await c.make();
      await folder(store, 'ck', 'new');
      await folder(store, 'ck.old-3', 'old'); // step 3 never ran
      await store.write('ck.tmp/a.txt', bytes('a-half')); // an unfinished later save
      expect(await recoverCheckpoint(store, 'ck')).toBe('intact');
      expect(await tagOf(store, 'ck')).toBe('new');
      expect(await store.list('')).toEqual(['ck']);
      // first save ever, died while writing
      await store.write('fresh.tmp/a.txt', bytes('a-half'));
      expect(await recoverCheckpoint(store, 'fresh')).toBe('none');
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
