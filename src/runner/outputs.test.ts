import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidArgument, QuotaExceeded, StorageFailed } from '../errors';
import { checkOutputFile, checkOutputFolder, writeFailed, writing } from './outputs';

const errno = (code: string, message: string) => Object.assign(new Error(message), { code, syscall: 'write' });

describe('writeFailed', () => {
  it('a full disk or quota is QuotaExceeded, another errno StorageFailed; the message says what and how to go on', () => {
    const full = writeFailed(errno('ENOSPC', "ENOSPC: no space left on device, write 'r.jsonl'"), 'appending to r.jsonl', 'resume');
    expect(full).toBeInstanceOf(QuotaExceeded);
    expect((full as Error).message).toBe(
      "appending to r.jsonl failed: the disk is full (ENOSPC: no space left on device, write 'r.jsonl'); resume");
    expect((full as NodeJS.ErrnoException).code).toBe('ENOSPC');
    expect(writeFailed(errno('EDQUOT', 'EDQUOT: quota'), 'x', 'y')).toBeInstanceOf(QuotaExceeded);
    const io = writeFailed(errno('EIO', 'EIO: i/o error, write'), 'saving out', 'go on');
    expect(io).toBeInstanceOf(StorageFailed);
    expect((io as Error).message).toBe('saving out failed: the file system refused the write (EIO: i/o error, write); go on');
    expect(writeFailed(errno('EROFS', 'EROFS: read-only file system'), 'a', 'b')).toBeInstanceOf(StorageFailed);
  });

  it('our own errors and errors without an errno code pass through unchanged', () => {
    const ours = new InvalidArgument('bad');
    expect(writeFailed(ours, 'a', 'b')).toBe(ours);
    const plain = new TypeError('x is not a function');
    expect(writeFailed(plain, 'a', 'b')).toBe(plain);
    const odd = Object.assign(new Error('m'), { code: 'ERR_INVALID_ARG_TYPE' });
    expect(writeFailed(odd, 'a', 'b')).toBe(odd);
  });

  it('writing names a failed write, sync or async, and returns what the write returns', async () => {
    expect(writing('a', 'b', () => 7)).toBe(7);
    const cause = errno('ENOSPC', 'ENOSPC: no space left on device');
    const sync = (() => {
      try {
        writing('writing f', 'b', () => {
          throw cause;
        });
      } catch (e) {
        return e as NodeJS.ErrnoException;
      }
    })();
    expect(sync).toBeInstanceOf(QuotaExceeded);
    expect([sync!.message, sync!.code, sync!.cause]).toEqual(['writing f failed: the disk is full (ENOSPC: no space left on device); b',
      'ENOSPC', cause]);
    const later = await writing('saving d', () => 'resume it', async () => {
      throw errno('EIO', 'EIO: i/o error');
    }).then(() => null, (e: NodeJS.ErrnoException) => e);
    expect(later).toBeInstanceOf(StorageFailed);
    expect([later!.message, later!.code]).toEqual(
      ['saving d failed: the file system refused the write (EIO: i/o error); resume it', 'EIO']);
    await expect(writing('a', 'b', async () => 'done')).resolves.toBe('done');
  });
});

describe('output paths', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rmas-outputs-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a folder path that is a file, or under a file, is refused; a new folder under a writable one is not made', () => {
    const file = join(dir, 'f');
    writeFileSync(file, 'x');
    expect(() => checkOutputFolder('save_dir', file)).toThrow(
      new InvalidArgument(`--save_dir ${file}: it is a file, not a folder; give a folder this run can write (nothing was trained)`));
    expect(() => checkOutputFolder('save_dir', join(file, 'sub'))).toThrow(
      `--save_dir ${join(file, 'sub')}: it cannot be made: ${file} is a file (ENOTDIR)`);
    checkOutputFolder('save_dir', join(dir, 'new', 'deeper'));
    expect(existsSync(join(dir, 'new'))).toBe(false);
    expect(() => checkOutputFile('log_jsonl', dir)).toThrow(`--log_jsonl ${dir}: it is a folder; give a file path`);
  });

});
