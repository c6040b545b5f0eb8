/**
 * The Python tool in the page: Pyodide in a dedicated worker without network access (workers/python.worker.ts says
 * how). A timeout or an abort terminates the worker, the only way to stop a running Python loop, and so does a run
 * whose heap reached the memory bound (a WebAssembly heap never shrinks); the next call starts a fresh one (Pyodide
 * loads again, a few seconds). The app starts the worker (workers/python.ts: `new Worker(new URL(…))` must sit where
 * the bundler sees the worker file), so the library names no worker file.
 */
import { type Remote, wrap } from 'comlink';
import type { ToolRunners } from './loop';
import { ABORTED_TEXT, timeoutText } from './python-format';

/** Default bound on the Python worker's WebAssembly heap. */
export const DEFAULT_PYTHON_MEMORY_BYTES = 512 * 2 ** 20;

/** The result of a run whose heap would have grown past `bytes` (Python got a MemoryError). */
export const memoryText = (bytes: number) =>
  `[memory] Python tool exceeded its memory bound of ${bytes / 2 ** 20} MiB; use less memory (the next run starts fresh).`;

/** One run in the worker. */
export interface PythonRun {
  /** The tool's result text (formatPythonOutput). */
  text: string;
  /** The heap was refused growth past the bound during the run. */
  memoryExceeded: boolean;
  /** The WebAssembly heap's size after the run (0 where Pyodide does not say). */
  heapBytes: number;
}

/** What the Python worker offers over comlink (workers/python.worker.ts implements it). */
export interface PythonWorkerApi {
  /**
   * Loads Pyodide from `indexURL` (default: the npm package's files) with its heap bounded to `memoryLimitBytes`
   * (default DEFAULT_PYTHON_MEMORY_BYTES), then takes away its network; later calls reuse the first load.
   */
  load(opts?: { indexURL?: string; memoryLimitBytes?: number }): Promise<void>;
  /** Runs the code in fresh globals after the tool prelude. */
  run(code: string): Promise<PythonRun>;
}

export interface PyodideRunnerOptions {
  /** Starts a fresh worker that exposes PythonWorkerApi; called again after each terminate. */
  startWorker: () => Worker;
  /**
   * Folder URL (ending in `/`) holding pyodide.asm.mjs, pyodide.asm.wasm, python_stdlib.zip and
   * pyodide-lock.json; by default the worker uses the files of the `pyodide` npm package as Vite serves them.
   */
  indexURL?: string;
  /** Limit on loading Pyodide itself, apart from the run's timeout (default 60 s). */
  loadTimeoutMs?: number;
  /** Bound on the worker's WebAssembly heap (default DEFAULT_PYTHON_MEMORY_BYTES, 512 MiB). */
  memoryLimitBytes?: number;
}

/** Python runner backed by a Pyodide worker; never throws for tool failures. */
export function pyodideRunner(opts: PyodideRunnerOptions): ToolRunners['python'] & { dispose(): void } {
  let worker: Worker | null = null;
  let api: Remote<PythonWorkerApi> | null = null;
  let ready: Promise<void> | null = null;
  const memoryLimit = opts.memoryLimitBytes ?? DEFAULT_PYTHON_MEMORY_BYTES;

  const dispose = () => {
    worker?.terminate();
    worker = null;
    api = null;
    ready = null;
  };
  const start = () => {
    if (!worker) {
      worker = opts.startWorker();
      api = wrap<PythonWorkerApi>(worker);
      ready = api.load({
        ...(opts.indexURL !== undefined ? { indexURL: opts.indexURL } : {}),
        memoryLimitBytes: memoryLimit,
      });
    }
    return { api: api!, ready: ready! };
  };

  /** Settles with `p`, or with `onTimeout()` / the abort text (killing the worker) if those come first. */
  const race = <T>(p: Promise<T>, ms: number, onTimeout: () => T, signal?: AbortSignal) =>
    new Promise<T>((resolve, reject) => {
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const stop = (value: T) => {
        cleanup();
        dispose(); // the only way to stop Python mid-run
        resolve(value);
      };
      const timer = setTimeout(() => stop(onTimeout()), ms);
      const onAbort = () => stop(ABORTED_TEXT as T);
      signal?.addEventListener('abort', onAbort, { once: true });
      p.then(
        (v) => {
          cleanup();
          resolve(v);
        },
        (e) => {
          cleanup();
          reject(e);
        },
      );
    });

  const run: ToolRunners['python'] = async (code, { timeoutMs, signal }) => {
    if (signal?.aborted) return ABORTED_TEXT;
    try {
      const w = start();
      const loadMs = opts.loadTimeoutMs ?? 60_000;
      const notLoaded = () => `[error] The Python tool (Pyodide) did not load within ${loadMs / 1000} s.`;
      const failed = await race(w.ready.then(() => ''), loadMs, notLoaded, signal);
      if (failed) return failed;
      // the timeout counts from here: loading Pyodide is not the model's code being slow
      const r = await race<PythonRun | string>(w.api.run(code), timeoutMs, () => timeoutText(timeoutMs), signal);
      if (typeof r === 'string') return r;
      if (!r.memoryExceeded && r.heapBytes <= memoryLimit) return r.text;
      dispose(); // the heap stays at its size: the next run gets a fresh worker
      return memoryText(memoryLimit);
    } catch (e) {
      dispose();
      return `[error] The Python tool (Pyodide) failed: ${e instanceof Error ? e.message : String(e)}`;
    }
  };
  return Object.assign(run, { dispose });
}
