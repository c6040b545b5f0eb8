/**
 * The FileStore contract as a reusable vitest suite (no Node modules, so the browser project runs it
 * on the IndexedDB store and the node project on memoryStore): files, folders, listing, removal, path
 * checks, atomic rename of files and folders over existing ones, and a journaled commit with recovery.
 */
import { describe, expect, it } from 'vitest';
import { InvalidArgument, MissingCheckpoint } from '../errors';
import { type FileStore, beginCommit, recoverCheckpoint } from '../train/file-store';

const bytes = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);

async function rejects(p: Promise<unknown>, cls: new (m: string) => Error) {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(cls);
}

/** Registers the contract tests for stores made by `make` (each test gets a fresh, empty store). */
export function checkpointStoreContract(label: string, make: () => Promise<FileStore>) {
  describe(`FileStore contract: ${label}`, () => {
    it('writes, overwrites, reads, lists and removes files and folders', async () => {
      const s = await make();
      await s.write('run/ckpt/x.bin', new Uint8Array([1, 2, 3]));
      await s.write('run/ckpt/y.bin', new Uint8Array([4]));
      await s.write('/run/ckpt/x.bin/', new Uint8Array([9, 8])); // outer '/' ignored; overwrite
      await s.write('top.txt', bytes('t'));
      await s.write('empty.bin', new Uint8Array(0));
      expect(Array.from(await s.read('run/ckpt/x.bin'))).toEqual([9, 8]);
      expect((await s.read('empty.bin')).length).toBe(0);
      expect(await s.list('')).toEqual(['empty.bin', 'run', 'top.txt']);
      expect(await s.list('run')).toEqual(['ckpt']);
      expect(await s.list('run/ckpt')).toEqual(['x.bin', 'y.bin']);
      expect(await s.list('nope')).toEqual([]);
      expect([await s.exists('run'), await s.exists('run/ckpt/y.bin'), await s.exists('run/ck'), await s.exists('ru')]).toEqual([
        true,
        true,
        false,
        false,
      ]);
      await s.remove('run/ckpt/y.bin');
      expect(await s.list('run/ckpt')).toEqual(['x.bin']);
      await s.remove('run');
      await s.remove('never-there');
      expect(await s.exists('run/ckpt/x.bin')).toBe(false);
      expect(await s.list('')).toEqual(['empty.bin', 'top.txt']);
      await rejects(s.read('run/ckpt/x.bin'), MissingCheckpoint);
    });

    it('refuses paths that leave the root and files over folders', async () => {
      const s = await make();
      for (const p of ['../x', 'a/../b', 'a//b', './a', '', 'a\\b']) await rejects(s.write(p, bytes('x')), InvalidArgument);
      await s.write('d/f', bytes('x'));
      await rejects(s.write('d', bytes('y')), InvalidArgument);
      expect(text(await s.read('d/f'))).toBe('x');
    });

    it('renames a file over a file, a folder over a folder (the old one gone), and into new parents', async () => {
      const s = await make();
      await s.write('a.txt', bytes('A'));
      await s.write('b.txt', bytes('B'));
      await s.rename('a.txt', 'b.txt');
      expect([await s.exists('a.txt'), text(await s.read('b.txt'))]).toEqual([false, 'A']);
      await s.write('new/one', bytes('1'));
      await s.write('new/sub/two', bytes('2'));
      await s.write('old/stale', bytes('s'));
      await s.write('old/one', bytes('old'));
      await s.write('newer', bytes('sibling with a common prefix'));
      await s.rename('new', 'old');
      expect(await s.list('old')).toEqual(['one', 'sub']);
      expect([text(await s.read('old/one')), text(await s.read('old/sub/two'))]).toEqual(['1', '2']);
      expect([await s.exists('new'), text(await s.read('newer'))]).toEqual([false, 'sibling with a common prefix']);
      await s.rename('old', 'deep/er/place');
      expect(await s.list('deep/er/place/sub')).toEqual(['two']);
      await rejects(s.rename('missing', 'x'), MissingCheckpoint);
      await rejects(s.rename('deep', 'deep/inside'), InvalidArgument);
    });

    it('commits files journaled, and a staged but uncommitted save rolls back', async () => {
      const s = await make();
      await s.write('ck/keep.txt', bytes('keep'));
      let tx = await beginCommit(s, 'ck');
      await tx.put('a.txt', bytes('a1'));
      await tx.put('old.txt', bytes('o'));
      await tx.commit();
      tx = await beginCommit(s, 'ck');
      await tx.put('a.txt', bytes('a2'));
      await tx.commit(['old.txt']);
      expect(await s.list('ck')).toEqual(['a.txt', 'keep.txt']);
      expect(text(await s.read('ck/a.txt'))).toBe('a2');
      tx = await beginCommit(s, 'ck');
      await tx.put('a.txt', bytes('a3')); // never committed: a crash here
      expect(await recoverCheckpoint(s, 'ck')).toBe('rolled-back');
      expect([await s.list('ck'), text(await s.read('ck/a.txt'))]).toEqual([['a.txt', 'keep.txt'], 'a2']);
    });
  });
}
