/**
 * Fault injection shared by the tests of test/faults (no Node modules, so that the browser project uses it too): a
 * counter that fails the k-th mutating call of a run as a crash (that call and every later one throw, as if the
 * process had died there) or as a full disk (that call alone throws an ENOSPC-coded error and the program goes on),
 * and a FileStore that counts its write, remove and rename calls on such a counter.
 */
import type { FileStore } from '../../src/train/file-store';

export type FaultMode = 'crash' | 'enospc';

/** What a crash throws: nothing after it runs, so nothing may catch it and carry on. */
export class InjectedCrash extends Error {
  constructor(readonly at: number, readonly op: string) {
    super(`injected crash at mutating call ${at} (${op})`);
    this.name = 'InjectedCrash';
  }
}

/** An error as Node's fs raises it when the disk is full. */
export function enospc(syscall: string, path: string): NodeJS.ErrnoException {
  const e = new Error(`ENOSPC: no space left on device, ${syscall} '${path}'`) as NodeJS.ErrnoException;
  Object.assign(e, { code: 'ENOSPC', errno: -28, syscall, path });
  return e;
}

export const isEnospc = (e: unknown) => (e as NodeJS.ErrnoException | null)?.code === 'ENOSPC';

/**
 * Counts mutating calls while armed and fails the `at`-th. `ops` lists every counted call, so that a sweep knows
 * how many points a run has (arm with at = 0 to count without failing) and a failure message can say where it was.
 */
export class Faults {
  at = 0;
  mode: FaultMode = 'crash';
  calls = 0;
  ops: string[] = [];
  /** The counted call that failed, once one has. */
  hit: string | null = null;
  armed = false;

  arm(at: number, mode: FaultMode = 'crash') {
    Object.assign(this, { at, mode, calls: 0, ops: [], hit: null, armed: true });
  }
  disarm() {
    this.armed = false;
  }
  /** For calls that are not counted (clean-ups): after a crash nothing runs any more. */
  alive(): void {
    if (this.armed && this.hit !== null && this.mode === 'crash') throw new InjectedCrash(this.at, 'a clean-up after the crash');
  }
  /** Counts `op`; throws if it is the call to fail (or, after a crash, any later one). */
  tick(op: string, path = op): void {
    if (!this.armed) return;
    if (this.hit !== null && this.mode === 'crash') throw new InjectedCrash(this.at, `${op} after the crash`);
    this.ops.push(op);
    if (++this.calls !== this.at) return;
    this.hit = op;
    throw this.mode === 'crash' ? new InjectedCrash(this.at, op) : enospc(op.split(' ')[0]!, path);
  }
}

/** `inner`, with each write, remove and rename counted on `faults` before it runs. */
export function faultyStore(inner: FileStore, faults: Pick<Faults, 'tick'>): FileStore {
  return {
    read: (p) => inner.read(p),
    exists: (p) => inner.exists(p),
    list: (d) => inner.list(d),
    write: async (p, b) => (faults.tick(`write ${p}`, p), inner.write(p, b)),
    remove: async (p) => (faults.tick(`remove ${p}`, p), inner.remove(p)),
    rename: async (f, t) => (faults.tick(`rename ${f} ${t}`, t), inner.rename(f, t)),
  };
}

/** Every file under `dir` of a store, path → bytes (a whole save_dir, to compare two of them). */
export async function storeTree(store: FileStore, dir = ''): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  const walk = async (d: string) => {
    for (const name of await store.list(d)) {
      const p = d ? `${d}/${name}` : name;
      const under = await store.list(p);
      if (under.length) await walk(p);
      else {
        const b = await store.read(p).catch(() => null);
        if (b) out.set(p, b);
        else out.set(`${p}/`, new Uint8Array(0)); // an empty folder
      }
    }
  };
  await walk(dir);
  return out;
}

export const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);

/** The paths of `got` and `want` whose bytes differ or that only one of them has ([] when the trees are equal). */
export function treeDiff(got: ReadonlyMap<string, Uint8Array>, want: ReadonlyMap<string, Uint8Array>): string[] {
  const out: string[] = [];
  for (const [p, b] of got) if (!want.has(p)) out.push(`+${p}`);
  else if (!sameBytes(b, want.get(p)!)) out.push(`~${p}`);
  for (const p of want.keys()) if (!got.has(p)) out.push(`-${p}`);
  return out.sort();
}
