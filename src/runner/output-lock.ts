/**
 * One writer per output. Every file or folder a command writes (train-*'s --save_dir, run's --result_jsonl, ask's
 * --output_jsonl, …) is locked first by a lock file beside it, `<output>.lock`, created with O_EXCL ('wx'), holding the
 * owner's PID, host, command and start time. A second writer meets the lock and is refused by name (OutputLocked,
 * naming the output, the owner and what to do) before it writes anything. A lock whose owner is gone (a dead PID on
 * this host, or a PID now used by a process that started later) is stale: it is taken over, under a short-lived
 * `.takeover` lock of its own so that two processes never both take it. The lock goes at the end of the command, also
 * on an error, at process exit and on SIGTERM, SIGINT and SIGHUP; SIGKILL leaves a stale lock, which the next run takes.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, realpathSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { OutputLocked } from '../errors';

/** What a lock file holds. */
export interface LockOwner {
  pid: number;
  host: string;
  command: string;
  /** ISO time the lock was taken. */
  since: string;
  /** The process's start time in clock ticks after boot (Linux /proc), to tell a reused PID from the owner. */
  proc_start: string | null;
  /** This lock's own id: a takeover removes only the stale lock it read, never a newer one. */
  token: string;
}

/** The lock file of an output: `<output>.lock` beside it, the folder's real path resolved (so two spellings share one). */
export function lockPathOf(output: string): string {
  const abs = resolve(output);
  let dir = dirname(abs);
  try {
    dir = realpathSync(dir);
  } catch {
    // a folder not made yet: its spelling as given, resolved
  }
  return join(dir, `${basename(abs)}.lock`);
}

/** Fields 3 on of /proc/PID/stat (state first), or null where /proc cannot tell. */
function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // the command name (field 2) may hold spaces and parentheses: the fields after it follow its last ')'
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** The start time of process `pid` (field 22 of /proc/PID/stat), or null where /proc cannot tell. */
const procStart = (pid: number): string | null => procStat(pid)?.[19] ?? null;

/**
 * Whether the owner of a lock on this host still runs: its PID alive, not a zombie (a killed process whose parent
 * died too may never be reaped) and, where /proc tells, the same process as when it took the lock.
 */
function ownerAlive(o: LockOwner): boolean {
  try {
    process.kill(o.pid, 0);
  } catch (e) {
    // EPERM: alive, another user's
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = procStat(o.pid);
  if (stat && (stat[0] === 'Z' || stat[0] === 'X')) return false;
  const now = stat?.[19] ?? null;
  return o.proc_start === null || now === null || now === o.proc_start;
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/**
 * The owner a lock file names; null when the file is gone. A file still empty or half written (its owner between
 * the exclusive create and the write) is read again for up to a second; one that stays unreadable is 'unreadable'.
 */
function readOwner(file: string): LockOwner | 'unreadable' | null {
  for (let i = 0; ; i++) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
    try {
      const o = JSON.parse(text) as LockOwner;
      if (Number.isInteger(o.pid) && typeof o.host === 'string' && typeof o.token === 'string') return o;
    } catch {
      // not whole yet
    }
    if (i >= 20) return 'unreadable';
    sleep(50);
  }
}

/** Seconds after which an unreadable lock file (its writer died between create and write) counts as stale. */
const UNREADABLE_STALE_S = 10;

/** Whether a lock file's owner is gone for sure: a dead process on this host, or a file that never got its owner. */
function isStale(file: string, o: LockOwner | 'unreadable'): boolean {
  if (o === 'unreadable') {
    try {
      return Date.now() - statSync(file).mtimeMs > UNREADABLE_STALE_S * 1000;
    } catch {
      return true;
    }
  }
  if (o.host !== hostname()) return false;
  // an owner killed a moment ago may still be exiting: it is given a moment before it counts as alive
  for (let i = 0; i < 5; i++) {
    if (!ownerAlive(o)) return true;
    if (o.pid === process.pid) return false;
    sleep(100);
  }
  return false;
}

function tryCreate(file: string, o: LockOwner): boolean {
  try {
    writeFileSync(file, `${JSON.stringify(o)}\n`, { flag: 'wx' });
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
}

function removeIfOwned(file: string, token: string) {
  const o = readOwner(file);
  if (o && o !== 'unreadable' && o.token === token) unlinkSync(file);
}

/** The message of a refused writer. */
function lockedMessage(flag: string, output: string, file: string, o: LockOwner | 'unreadable'): string {
  const what = `--${flag} ${output}`;
  if (o === 'unreadable')
    return `${what} is being locked by another process right now (${file} has no owner written yet); wait a moment and run ` +
      'the command again (nothing was written)';
  const here = o.host === hostname();
  return `${what} is being written by another rmas process: pid ${o.pid} on host ${o.host} (${o.command}, since ${o.since}). ` +
    `Wait for it to finish or stop it, or give another --${flag}; nothing was written` +
    (here ? '' : `. If that process is gone, delete ${file} (a lock from another host cannot be checked from here)`);
}

/** The locks this process holds, released at exit and on a stop signal. */
const held = new Map<string, string>();
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

function releaseHeld() {
  for (const [file, token] of held) {
    try {
      removeIfOwned(file, token);
    } catch {
      // at exit nothing more can be done; the next run finds the lock stale
    }
  }
  held.clear();
}

/**
 * A stop signal: the locks go, then the signal takes its course: when no other handler listens, it is raised again so
 * that the process ends as it would have; another handler (a bundle's cleanup, mpirun's RankLost line) decides.
 */
function onStopSignal(sig: NodeJS.Signals) {
  releaseHeld();
  for (const s of STOP_SIGNALS) process.removeListener(s, onStopSignal);
  if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
}

function watchExit() {
  if (!process.listeners('exit').includes(releaseHeld)) process.on('exit', releaseHeld);
  for (const s of STOP_SIGNALS) if (!process.listeners(s).includes(onStopSignal)) process.on(s, onStopSignal);
}

function unwatchExit() {
  if (held.size) return;
  process.removeListener('exit', releaseHeld);
  for (const s of STOP_SIGNALS) process.removeListener(s, onStopSignal);
}

/**
 * Locks `output` (a file or folder the command writes, named by `--flag`) for this process; OutputLocked when another
 * live process holds it. A stale lock is taken over. Returns the lock file's path.
 */
export function lockOutput(flag: string, output: string, command: string): string {
  const file = lockPathOf(output);
  const me: LockOwner = {
    pid: process.pid, host: hostname(), command, since: new Date().toISOString(), proc_start: procStart(process.pid),
    token: randomBytes(8).toString('hex'),
  };
  mkdirSync(dirname(file), { recursive: true });
  for (let attempt = 0; attempt < 5; attempt++) {
    if (tryCreate(file, me)) {
      held.set(file, me.token);
      watchExit();
      return file;
    }
    const o = readOwner(file);
    if (o === null) continue;
    if (!isStale(file, o)) throw new OutputLocked(lockedMessage(flag, output, file, o));
    // a stale lock: taken over by one process at a time, each checking that the lock is still the stale one it read
    const takeover = `${file}.takeover`;
    const guard = { ...me, token: randomBytes(8).toString('hex') };
    if (!tryCreate(takeover, guard)) {
      const g = readOwner(takeover);
      if (g !== null && !isStale(takeover, g)) throw new OutputLocked(lockedMessage(flag, output, file, g));
      if (g !== null && g !== 'unreadable') removeIfOwned(takeover, g.token);
      continue;
    }
    try {
      const again = readOwner(file);
      if (again !== null && again !== 'unreadable' && o !== 'unreadable' && again.token === o.token) unlinkSync(file);
      else if (again === 'unreadable' && o === 'unreadable') unlinkSync(file);
    } finally {
      removeIfOwned(takeover, guard.token);
    }
  }
  throw new OutputLocked(`--${flag} ${output}: could not take its lock ${file} (other processes kept taking it); run the command again`);
}

/** Releases a lock this process took (lockOutput); a lock another process holds by now is left alone. */
export function releaseOutput(file: string) {
  const token = held.get(file);
  if (token === undefined) return;
  held.delete(file);
  try {
    removeIfOwned(file, token);
  } finally {
    unwatchExit();
  }
}

/** The locks of one command: each output locked as it is named, every one released when the command ends. */
export class OutputLocks {
  private files: string[] = [];
  constructor(readonly command: string) {}
  /** Locks `output` (see lockOutput); an absent output flag is skipped. */
  take(flag: string, output: string | undefined): void {
    if (output === undefined || output === '') return;
    this.files.push(lockOutput(flag, output, this.command));
  }
  release(): void {
    for (const f of this.files.splice(0).reverse()) releaseOutput(f);
  }
}

/** Runs a command body with its output locks, releasing them however it ends. */
export async function withOutputLocks<T>(command: string, body: (locks: OutputLocks) => Promise<T>): Promise<T> {
  const locks = new OutputLocks(command);
  try {
    return await body(locks);
  } finally {
    locks.release();
  }
}
