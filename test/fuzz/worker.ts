/**
 * The fuzzing worker (started by harness.ts through tsx): makes case i of a target, runs it under guards and
 * posts its outcome. Guards, armed only while a case runs:
 * - allocations: every typed array and ArrayBuffer made through the globals is counted; one larger than the
 *   case's limit (8 MB + allocFactor × input size) is refused before it exists and recorded;
 * - files: fs and fs/promises calls that write, create, rename or remove must stay inside the case's folder
 *   (os.tmpdir() points there too, so a reader's temp folder does);
 * - code: child processes, native modules, eval, Function and vm compilation are refused and recorded.
 */
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { join, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parentPort, workerData } from 'node:worker_threads';
import { Rng } from '../../src/util/rng';
import type { CaseContext, Failure, FailureKind, FuzzTarget, WorkerMessage } from './harness';

// the CommonJS objects of the builtins, whose functions can be replaced (syncBuiltinESMExports passes that on to imports)
const require = createRequire(import.meta.url);
const fs = require('node:fs') as typeof import('node:fs');
const childProcess = require('node:child_process') as typeof import('node:child_process');
const v8 = require('node:v8') as typeof import('node:v8');
const vm = require('node:vm') as typeof import('node:vm');
const d = workerData as {
  module: string; target: string; seed: number; from: number; to: number; root: string; base: string; verbose: boolean;
};
const post = (m: WorkerMessage) => parentPort!.postMessage(m);

v8.setFlagsFromString('--expose-gc');
// a stack overflow's trace is all recursion: keep every frame, so that the reader's own line is found in it
Error.stackTraceLimit = Infinity;
const gc = vm.runInNewContext('gc') as () => void;

const state = { armed: false, dir: '', allocLimit: 0, allocTotal: 0, violations: [] as { kind: FailureKind; detail: string }[] };
class GuardError extends Error {
  override name = 'FuzzGuard';
}
const violation = (kind: FailureKind, detail: string) => {
  state.violations.push({ kind, detail });
  return new GuardError(`${kind}: ${detail}`);
};

// ---- allocations
const TYPED = ['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array', 'Int32Array', 'Uint32Array', 'Float32Array',
  'Float64Array', 'BigInt64Array', 'BigUint64Array', 'ArrayBuffer', 'SharedArrayBuffer'] as const;
const g = globalThis as unknown as Record<string, unknown>;
for (const name of TYPED) {
  const C = g[name] as (new (...a: unknown[]) => object) & { BYTES_PER_ELEMENT?: number };
  const per = C.BYTES_PER_ELEMENT ?? 1;
  const proxy: object = new Proxy(C, {
    construct(t, args, nt) {
      if (state.armed) {
        const a = args[0];
        const n = typeof a === 'number' ? a * per
          : a instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && a instanceof SharedArrayBuffer) ? 0
            : a && typeof a === 'object' && 'length' in a ? Number((a as { length: number }).length) * per : 0;
        state.allocTotal += Number.isFinite(n) ? n : 0;
        if (n > state.allocLimit || state.allocTotal > 4 * state.allocLimit) {
          throw violation('alloc', `new ${name}(${typeof a === 'number' ? a : `<${n} bytes>`}): ${n} bytes in one allocation, ` +
            `${state.allocTotal} in this case, over the limit of ${state.allocLimit} for this input`);
        }
      }
      return Reflect.construct(t, args, nt === proxy ? t : nt);
    },
  });
  g[name] = proxy;
}

// ---- files
const inside = (p: unknown) => {
  if (typeof p !== 'string' && !(p instanceof URL) && !(p instanceof Uint8Array)) return true; // a file descriptor
  const abs = resolve(p instanceof URL ? p.pathname : String(p instanceof Uint8Array ? new TextDecoder().decode(p) : p));
  return abs === state.dir || abs.startsWith(state.dir + sep);
};
const writes = (flags: unknown) => flags !== undefined && flags !== 'r' && flags !== 'rs' && flags !== fs.constants.O_RDONLY;
function guardFs(obj: Record<string, unknown>, names: string[], paths: number[], openFlags = false) {
  for (const n of names) {
    const f = obj[n] as ((...a: unknown[]) => unknown) | undefined;
    if (typeof f !== 'function') continue;
    obj[n] = function (this: unknown, ...a: unknown[]) {
      if (state.armed && (!openFlags || writes(a[1]))) {
        for (const i of paths) if (!inside(a[i])) throw violation('fs', `${n}(${String(a[i])}) outside the case folder ${state.dir}`);
      }
      return f.apply(this, a);
    };
  }
}
const WRITE1 = ['writeFile', 'appendFile', 'mkdir', 'mkdtemp', 'truncate', 'rm', 'rmdir', 'unlink', 'utimes', 'chmod', 'chown',
  'createWriteStream'];
const WRITE2 = ['rename', 'copyFile', 'cp', 'symlink', 'link'];
const fsObj = fs as unknown as Record<string, unknown>;
const fsp = fs.promises as unknown as Record<string, unknown>;
guardFs(fsObj, [...WRITE1, ...WRITE1.map((n) => `${n}Sync`)], [0]);
guardFs(fsObj, [...WRITE2, ...WRITE2.map((n) => `${n}Sync`)], [0, 1]);
guardFs(fsObj, ['open', 'openSync'], [0], true);
guardFs(fsp, WRITE1, [0]);
guardFs(fsp, WRITE2, [0, 1]);
guardFs(fsp, ['open'], [0], true);

// ---- code
const refuse = (what: string) => function () {
  throw violation('exec', `${what} was called`);
};
const cp = childProcess as unknown as Record<string, unknown>;
for (const n of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) {
  const f = cp[n] as (...a: unknown[]) => unknown;
  cp[n] = function (this: unknown, ...a: unknown[]) {
    if (state.armed) throw violation('exec', `child_process.${n}(${String(a[0])})`);
    return f.apply(this, a);
  };
}
const dlopen = process.dlopen;
process.dlopen = function (...a: Parameters<typeof dlopen>) {
  if (state.armed) return refuse(`process.dlopen(${String(a[1])})`)();
  return dlopen.apply(process, a);
} as typeof dlopen;
const vmObj = vm as unknown as Record<string, unknown>;
for (const n of ['runInNewContext', 'runInThisContext', 'runInContext', 'compileFunction']) {
  const f = vmObj[n] as (...a: unknown[]) => unknown;
  vmObj[n] = function (this: unknown, ...a: unknown[]) {
    if (state.armed) throw violation('exec', `vm.${n}`);
    return f.apply(this, a);
  };
}
const code = <T extends object>(what: string): ProxyHandler<T> => ({
  apply(t, self, a: unknown[]) {
    if (state.armed) throw violation('exec', `${what} of ${JSON.stringify(String(a[a.length - 1] ?? '')).slice(0, 80)}`);
    return Reflect.apply(t as (...x: unknown[]) => unknown, self, a);
  },
  construct(t, a: unknown[], nt) {
    if (state.armed) throw violation('exec', `new ${what}`);
    return Reflect.construct(t as new (...x: unknown[]) => object, a, nt);
  },
});
g.eval = new Proxy(g.eval as (...a: unknown[]) => unknown, code('eval'));
g.Function = new Proxy(Function, code<FunctionConstructor>('Function'));
syncBuiltinESMExports();

process.on('unhandledRejection', (e) => {
  if (state.armed) return void violation('uncaught', `unhandled rejection: ${describe(e)}`);
  console.error(e); // the worker's own failure: the harness reports the exit
  process.exit(70);
});

// ---- cases

/** FNV-1a of a string, the seed of a case's Rng. */
function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

function describe(e: unknown): string {
  if (!(e instanceof Error)) return `a thrown ${typeof e}: ${String(e).slice(0, 200)}`;
  const at = (e.stack ?? '').split('\n').find((l) => l.includes('/src/') || l.includes('node_modules'))?.trim() ?? '';
  return `${e.name}: ${e.message.slice(0, 400)}${at ? ` (${at.replace(d.root + '/', '')})` : ''}`;
}

const isNamed = (e: unknown) => {
  for (let p = e && typeof e === 'object' ? Object.getPrototypeOf(e) : null; p; p = Object.getPrototypeOf(p)) {
    if (p.constructor?.name === 'RmasError') return true;
  }
  return false;
};

const mod = (await import(pathToFileURL(d.module).href)) as Record<string, FuzzTarget<unknown>>;
const target = mod[d.target];
if (!target) throw new Error(`${d.module} exports no target ${d.target}`);
const seeds = await target.seeds();
const cuts = seeds.flatMap((s) => target.truncations?.(s) ?? []);
const seedKeys = new Map<string, number>(seeds.map((s, k) => [target.key(s), k]));
const seedDigests: (string | undefined)[] = [];
// under the run's folder, which the harness removes at the end (also after a worker it had to terminate)
const work = join(d.base, `worker-${d.from}`);
fs.mkdirSync(work, { recursive: true });
const realTmp = process.env.TMPDIR;
post({ type: 'ready', name: target.name, total: seeds.length + cuts.length,
  known: (target.known ?? []).map((k) => ({ kind: k.kind, detail: k.detail.source })) });

async function inputOf(i: number): Promise<unknown> {
  if (i < seeds.length) return seeds[i];
  if (i < seeds.length + cuts.length) return cuts[i - seeds.length];
  const rng = new Rng(hash32(`${d.target}:${d.seed}:${i}`));
  let x = seeds[rng.int(seeds.length)];
  for (let k = 1 + rng.int(3); k > 0; k--) {
    try {
      x = await target.mutate(rng, x);
    } catch (e) { // a mutation that does not fit what an earlier one made
      if (d.verbose) console.error(`mutation of case ${i} threw ${describe(e)}`);
    }
  }
  return x;
}

function save(i: number, input: unknown) {
  const dir = join(d.root, '.cache', 'fuzz-failures', d.target, String(i));
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  // hostile names (traversal, over-long, '.') become plain ones; names.json keeps the originals
  const files = Object.entries(target.files(input));
  files.forEach(([n, b], k) => fs.writeFileSync(join(dir, `${k}-${n.replace(/[^\w.-]/g, '_').slice(-80)}`), b));
  fs.writeFileSync(join(dir, 'names.json'), JSON.stringify(files.map(([n]) => n)));
}

let baseline = -1;
for (let i = d.from; i < d.to; i++) {
  const input = await inputOf(i);
  const pristine = i < seeds.length;
  const dir = join(work, 'case');
  if (!fs.existsSync(dir)) fs.mkdirSync(dir);
  else if (fs.readdirSync(dir).length) { // emptied only when the last case wrote to it
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir);
  }
  const ctx: CaseContext = { dir, pristine };
  const size = target.size(input);
  Object.assign(state, { dir, violations: [], allocTotal: 0, allocLimit: 8 * 2 ** 20 + (target.allocFactor ?? 64) * size });
  process.env.TMPDIR = dir;
  let digest: string | undefined;
  let error: unknown;
  let threw = false;
  const t0 = performance.now();
  state.armed = true;
  try {
    digest = await target.run(input, ctx);
  } catch (e) {
    threw = true;
    error = e;
  } finally {
    state.armed = false;
  }
  const ms = performance.now() - t0;
  if (realTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = realTmp;

  let failure: Failure | undefined;
  const fail = (kind: FailureKind, detail: string) => (failure ??= { case: i, kind, detail });
  if (state.violations.length) fail(state.violations[0]!.kind, state.violations[0]!.detail);
  else if (!threw) {
    const k = seedKeys.get(target.key(input));
    if (pristine) seedDigests[i] = digest;
    else if (k !== undefined && seedDigests[k] !== undefined && digest !== seedDigests[k]) {
      fail('wrong-result', `an input equal to seed ${k} read as ${String(digest).slice(0, 200)}, not ${seedDigests[k]!.slice(0, 200)}`);
    }
  } else if (pristine) fail('seed-rejected', describe(error));
  else if ((error as Error)?.name === 'PropertyViolation') fail('wrong-result', (error as Error).message);
  else if (isNamed(error)) {
    const labels = target.labels(input, ctx);
    const msg = (error as Error).message;
    if (!labels.some((l) => msg.includes(l))) {
      fail('unnamed', `${describe(error)}; expected one of ${JSON.stringify(labels).slice(0, 200)} in it`);
    }
  } else fail('uncaught', describe(error));
  if (d.verbose) console.error(`case ${i}: ${threw ? (error as Error)?.stack ?? String(error) : `ok ${String(digest).slice(0, 300)}`}`);

  if ((i + 1) % 100 === 0) {
    gc();
    const m = process.memoryUsage();
    const used = m.heapUsed + m.arrayBuffers;
    if (baseline < 0) baseline = used;
    else if (used - baseline > 256 * 2 ** 20) {
      fail('leak', `retained memory grew by ${((used - baseline) / 2 ** 20).toFixed(0)} MB since case 99`);
    }
  }
  const known = failure ? target.known?.some((k) => k.kind === failure!.kind && k.detail.test(failure!.detail)) : false;
  if (failure && !known) {
    try {
      save(i, input);
    } catch (e) {
      console.error(`case ${i}: the failing input could not be saved (${describe(e)})`);
    }
  }
  post({ type: 'case', i, ms, outcome: failure ? 'failed' : threw ? 'refused' : 'ok', ...(failure ? { failure, known } : {}) });
}
fs.rmSync(work, { recursive: true, force: true });
post({ type: 'done' });
