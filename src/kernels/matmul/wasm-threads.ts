/**
 * Worker threads for the WebAssembly kernels: one pool for Node (worker_threads) and the page (Workers), which differ
 * only in how a worker is started (the two adapters at the end). Each worker instantiates the kernels' modules over
 * the caller's shared memory, so weights, x and y are where every thread reads and writes them; nothing is copied.
 *
 * A job is one kernel call over a range of output rows. The caller writes it into a control block (an Int32Array on a
 * SharedArrayBuffer of its own), opens it, bumps the generation and wakes the workers, then takes chunks of rows
 * itself; every thread takes the next chunk with one atomic add until none are left, so a thread slowed by other
 * work takes fewer. A row is computed wholly by one thread with the single-threaded code, so the result is the same
 * bits whatever the split. When no chunk is left the caller closes the job and waits only for the workers inside it:
 * a worker counts itself in (ACTIVE) before it looks whether a job is open, and reads the job only then, so one that
 * wakes late (a busy machine) finds it closed and costs the caller nothing, and the caller writes the next job only
 * once none is inside. Between jobs a thread watches the control block for SPIN_MS, then blocks in Atomics.wait, which
 * Node's main thread and any worker allow and a page's main thread does not (threads are then not offered).
 */

/** Control words. */
const GEN = 0;
/** Workers inside the current job. */
const ACTIVE = 1;
const READY = 2;
const NEXT = 3;
const END = 4;
const CHUNK = 5;
const FN = 6;
const ERR = 7;
/** 1 while a job is open to the workers. */
const OPEN = 17;
/** Rows the workers (not the caller) computed, in all: tests check the threads took part. */
const ROWS = 8;
/** The call's arguments before its row range: w, ld, K, x, M, y, ldy; then bias. */
const ARGS = 9;
const BIAS = 16;
/** The packed kernels' weight scratch: the first thread's, and the bytes from one thread's to the next's. */
const PK = 18;
const PK_STRIDE = 19;
const WORDS = 20;
/**
 * How long a thread watches for the next job (a worker) or for the workers' last rows (the caller) before it sleeps
 * in Atomics.wait, whose wake-up took tens of microseconds a job: Qwen3-0.6B's decode on 2 threads spent a quarter of
 * the caller's time waiting in run(). Watching 0.5 ms took its q8_0 decode from 20.8–21.8 to 23.2–24.7 tokens/s and
 * q4_0's from 18.9–20.6 to 23.0–24.0 (bf16, bound by memory, within the noise).
 */
const SPIN_MS = 0.5;

/**
 * The worker's code, plain JavaScript so that both adapters can start it from text with no bundler or loader in the
 * way. `start(init)` instantiates the module and serves jobs until the worker is terminated; a job's exception is
 * recorded in ERR (the caller throws it) and the worker still leaves the job, so the caller never waits on it.
 */
const WORKER_SOURCE = `
function start(init) {
  const c = new Int32Array(init.control);
  let fns;
  try {
    const ex = Object.assign({}, ...init.modules.map((m) => new WebAssembly.Instance(m, { env: { memory: init.memory } }).exports));
    fns = init.exports.map((n) => ex[n]);
  } catch (e) {
    Atomics.store(c, ${ERR}, 1);
    throw e;
  }
  let gen = Atomics.load(c, ${GEN});
  Atomics.add(c, ${READY}, 1);
  Atomics.notify(c, ${READY});
  for (;;) {
    // the next job of a decode step comes tens of microseconds after the last: watch for it a while before sleeping
    const until = performance.now() + ${SPIN_MS};
    while (Atomics.load(c, ${GEN}) === gen && performance.now() < until);
    if (Atomics.load(c, ${GEN}) === gen && Atomics.wait(c, ${GEN}, gen, 1000) === 'timed-out') continue;
    gen = Atomics.load(c, ${GEN});
    Atomics.add(c, ${ACTIVE}, 1);
    try {
      if (!Atomics.load(c, ${OPEN})) throw 0;
      const f = fns[c[${FN}]];
      const end = c[${END}];
      const chunk = c[${CHUNK}];
      const a = c.slice(${ARGS}, ${ARGS + 7});
      const bias = c[${BIAS}];
      const pk = c[${PK}] + init.index * c[${PK_STRIDE}];
      let rows = 0;
      for (let n0 = Atomics.add(c, ${NEXT}, chunk); n0 < end; n0 = Atomics.add(c, ${NEXT}, chunk)) {
        const n1 = Math.min(n0 + chunk, end);
        f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], n0, n1, bias, pk);
        rows += n1 - n0;
      }
      Atomics.add(c, ${ROWS}, rows);
    } catch (e) {
      if (e !== 0) Atomics.store(c, ${ERR}, 2);
    }
    Atomics.sub(c, ${ACTIVE}, 1);
    Atomics.notify(c, ${ACTIVE});
  }
}
`;

/**
 * What a worker is given: the modules, the shared memory, the control block, the exports it may run (by index, from
 * whichever module has them), and its index among the threads (the caller is 0), which picks its own scratch.
 */
export interface ThreadInit {
  modules: WebAssembly.Module[];
  memory: WebAssembly.Memory;
  control: SharedArrayBuffer;
  exports: string[];
  index: number;
}

interface Spawned {
  terminate(): void;
}

/** A kernel export: (w, ld, K, x, M, y, ldy, n0, n1, bias, pk); the float dtypes' unpacked kernels ignore pk. */
type Kernel = (...args: [number, number, number, number, number, number, number, number, number, number, number]) => void;

/** Rows of a chunk: about four chunks a thread, in whole blocks of 4 rows. */
const chunkRows = (rows: number, threads: number) => Math.max(4, Math.ceil(rows / (4 * threads) / 4) * 4);

/** Threads that run kernel calls over row ranges; the caller is one of them. */
export class ThreadPool {
  private readonly c: Int32Array;
  private readonly workers: Spawned[];
  private closed = false;

  private constructor(
    readonly threads: number,
    control: SharedArrayBuffer,
    workers: Spawned[],
  ) {
    this.c = new Int32Array(control);
    this.workers = workers;
  }

  /**
   * `threads - 1` workers over `init`'s memory, or why there can be none here. Node waits up to `waitMs` for them to
   * start; a page cannot (a worker starts only once its parent's event loop runs), so its first calls may run on
   * the caller alone until `ready` is true.
   */
  static start(threads: number, init: Omit<ThreadInit, 'control' | 'index'>, waitMs = 5000): ThreadPool | string {
    const why = cannotBlock();
    if (why) return why;
    const spawn = spawner();
    if (typeof spawn === 'string') return spawn;
    const control = new SharedArrayBuffer(4 * WORDS);
    const workers: Spawned[] = [];
    try {
      for (let i = 1; i < threads; i++) workers.push(spawn({ ...init, control, index: i }));
    } catch (e) {
      for (const w of workers) w.terminate();
      return `worker threads failed to start (${e instanceof Error ? e.message : String(e)})`;
    }
    const pool = new ThreadPool(threads, control, workers);
    if (spawn.blocking) {
      const t0 = Date.now();
      for (let r; (r = Atomics.load(pool.c, READY)) < workers.length && !pool.c[ERR] && Date.now() - t0 < waitMs; )
        Atomics.wait(pool.c, READY, r, 50);
    }
    if (pool.c[ERR]) {
      pool.close();
      return 'worker threads failed to instantiate the kernels';
    }
    return pool;
  }

  /** Whether every worker has started (until then calls run on the caller alone). */
  get ready(): boolean {
    return !this.closed && Atomics.load(this.c, READY) === this.workers.length;
  }

  /** Rows the workers have computed so far. */
  get workerRows(): number {
    return Atomics.load(this.c, ROWS);
  }

  /**
   * `kernel(w, ld, K, x, M, y, ldy, n0, n1, bias, pk)` over rows [n0, n1) split among the threads; `fn` is the
   * kernel's index in the workers' `exports`. Thread i gets pk + i·pkStride as its scratch (the packed and quantized kernels).
   * Workers not started yet (or asleep on a busy machine) simply take no rows.
   */
  run(fn: number, kernel: Kernel, args: readonly number[], n0: number, n1: number, bias: number, pk = 0, pkStride = 0) {
    const [w, ld, K, x, M, y, ldy] = args;
    if (this.closed) return kernel(w, ld, K, x, M, y, ldy, n0, n1, bias, pk);
    const c = this.c;
    const chunk = chunkRows(n1 - n0, this.threads);
    c[FN] = fn;
    c[END] = n1;
    c[CHUNK] = chunk;
    c.set(args.slice(0, 7), ARGS);
    c[BIAS] = bias;
    c[PK] = pk;
    c[PK_STRIDE] = pkStride;
    Atomics.store(c, NEXT, n0);
    Atomics.store(c, OPEN, 1);
    Atomics.add(c, GEN, 1);
    Atomics.notify(c, GEN);
    for (let a = Atomics.add(c, NEXT, chunk); a < n1; a = Atomics.add(c, NEXT, chunk)) {
      kernel(w, ld, K, x, M, y, ldy, a, Math.min(a + chunk, n1), bias, pk);
    }
    // every chunk is taken: the rows not done yet are being done by the workers inside the job
    Atomics.store(c, OPEN, 0);
    const until = performance.now() + SPIN_MS;
    while (Atomics.load(c, ACTIVE) > 0 && performance.now() < until);
    for (let a; (a = Atomics.load(c, ACTIVE)) > 0; ) Atomics.wait(c, ACTIVE, a, 1000);
    if (Atomics.exchange(c, ERR, 0)) throw new Error('a worker thread of the CPU kernels failed in a kernel call');
  }

  close() {
    this.closed = true;
    for (const w of this.workers) w.terminate();
  }
}

/** The number of hardware threads: os.availableParallelism() in Node, navigator.hardwareConcurrency in the page. */
export function hardwareThreads(): number {
  const os = nodeModule<{ availableParallelism?: () => number; cpus(): unknown[] }>('node:os');
  if (os) return os.availableParallelism?.() ?? os.cpus().length;
  const n = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
  return Number.isInteger(n) && n! > 0 ? n! : 1;
}

/** Why worker threads cannot share the kernels' memory here, or '' where they can. */
export function sharedMemoryUnavailable(): string {
  if (typeof SharedArrayBuffer !== 'function') {
    return isNode() ? 'no SharedArrayBuffer' : 'no SharedArrayBuffer (the page is not cross-origin isolated)';
  }
  const g = globalThis as { crossOriginIsolated?: boolean };
  if (!isNode() && g.crossOriginIsolated === false) return 'the page is not cross-origin isolated';
  return '';
}

/** Why this thread may not block in Atomics.wait (a page's main thread), or ''. */
function cannotBlock(): string {
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return '';
  } catch {
    return 'this thread may not block (a page\'s main thread)';
  }
}

const isNode = () => typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === 'string';

/** A Node built-in module, loaded synchronously; null outside Node. */
export function nodeModule<T>(name: string): T | null {
  if (!isNode()) return null;
  const p = (globalThis as unknown as { process: { getBuiltinModule?: (n: string) => unknown } }).process;
  return (p.getBuiltinModule?.(name) as T | undefined) ?? null;
}

type Spawn = ((init: ThreadInit) => Spawned) & { blocking: boolean };

/** The adapter that starts a worker here: worker_threads in Node, a Worker from a blob in the page. */
function spawner(): Spawn | string {
  if (isNode()) {
    const wt = nodeModule<typeof import('node:worker_threads')>('node:worker_threads');
    if (!wt) return 'no node:worker_threads (Node before 20.16 has no process.getBuiltinModule)';
    const code = `${WORKER_SOURCE}\nstart(require('node:worker_threads').workerData);\n`;
    return Object.assign(
      (init: ThreadInit): Spawned => {
        const w = new wt.Worker(code, { eval: true, workerData: init, name: 'cpu-kernels' });
        w.unref(); // a process whose work is done exits with its pool idle
        w.on('error', () => {}); // recorded in the control block; the caller throws
        return w;
      },
      { blocking: true },
    );
  }
  const g = globalThis as { Worker?: typeof Worker; Blob?: typeof Blob; URL?: typeof URL };
  if (typeof g.Worker !== 'function' || typeof g.Blob !== 'function') return 'no Worker here';
  let url: string | null = null;
  return Object.assign(
    (init: ThreadInit): Spawned => {
      url ??= URL.createObjectURL(new Blob([`${WORKER_SOURCE}\nself.onmessage = (e) => start(e.data);\n`], { type: 'text/javascript' }));
      const w = new Worker(url, { name: 'cpu-kernels' });
      w.postMessage(init);
      return w;
    },
    { blocking: false },
  );
}
