/**
 * The runner's output paths: checked before any model loads (so that a bad path fails in a second, not after an
 * hour of training), and a write that fails on the way (a full disk, an I/O error, a read-only mount) as a named
 * error that says what was being written, what is kept and how to go on, instead of Node's bare errno message.
 */
import { accessSync, constants as fsConstants, existsSync, statSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { InvalidArgument, QuotaExceeded, RmasError, StorageFailed } from '../errors';

/**
 * Makes sure a folder the run writes into can be made and written, before any model loads and without making it:
 * a path that is a file, one under a file, or one whose nearest existing folder cannot be written is refused now
 * rather than at the first save.
 */
export function checkOutputFolder(flag: string, dir: string) {
  const fail = (why: string) => new InvalidArgument(`--${flag} ${dir}: ${why}; give a folder this run can write (nothing was trained)`);
  let at = resolvePath(dir);
  if (existsSync(at) && !statSync(at).isDirectory()) throw fail('it is a file, not a folder');
  while (!existsSync(at)) at = dirname(at);
  if (!statSync(at).isDirectory()) throw fail(`it cannot be made: ${at} is a file (ENOTDIR)`);
  try {
    accessSync(at, fsConstants.W_OK);
  } catch (e) {
    throw fail(`it cannot be written: ${at} is not writable (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
}

/** The same for a file the run appends to (--log_jsonl): the path must not be a folder, and its folder must be writable. */
export function checkOutputFile(flag: string, file: string) {
  if (existsSync(file) && statSync(file).isDirectory())
    throw new InvalidArgument(`--${flag} ${file}: it is a folder; give a file path (nothing was trained)`);
  checkOutputFolder(flag, dirname(resolvePath(file)));
}

const FULL = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);

/**
 * A file-system error met while `doing` (e.g. "appending the record of question 7 to --result_jsonl r.jsonl") as a
 * named error: QuotaExceeded when the disk or quota is full, StorageFailed for any other errno (EIO, EROFS, EACCES,
 * ENOENT of a folder deleted under the run). `next` says what is kept and how to go on. Our own errors and
 * anything without an errno code pass through unchanged.
 */
export function writeFailed(e: unknown, doing: string, next: string): unknown {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  if (e instanceof RmasError || typeof code !== 'string' || !/^E[A-Z0-9]+$/.test(code)) return e;
  const why = FULL.has(code) ? 'the disk is full' : 'the file system refused the write';
  const Named = FULL.has(code) ? QuotaExceeded : StorageFailed;
  return Object.assign(new Named(`${doing} failed: ${why} (${(e as Error).message}); ${next}`), { code, cause: e });
}

/** Runs a write (or an async one), turning a file-system error into writeFailed's named one; `next` is read only then. */
export function writing<T>(doing: string, next: string | (() => string), write: () => T): T {
  const fail = (e: unknown): never => {
    throw writeFailed(e, doing, typeof next === 'string' ? next : next());
  };
  try {
    const r = write();
    return (r instanceof Promise ? r.catch(fail) : r) as T;
  } catch (e) {
    return fail(e);
  }
}
