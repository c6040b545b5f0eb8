/**
 * The Python tool in the page: Pyodide in a dedicated worker. A timeout or an abort terminates the worker,
 * the only way to stop a running Python loop; the next call starts a fresh one (Pyodide loads again, a few
 * seconds). The app starts the worker (workers/python.ts: `new Worker(new URL(…))` must sit where the
 * bundler sees the worker file), so the library names no worker file.
 */
import { type Remote, wrap } from 'comlink';
import type { ToolRunners } from './loop';
import { ABORTED_TEXT, timeoutText } from './python-format';

/** What the Python worker offers over comlink (workers/python.worker.ts implements it). */
export interface PythonWorkerApi {
  /** Loads Pyodide from `indexURL` (default: the npm package's files); later calls reuse the first load. */
  load(indexURL?: string): Promise<void>;
  /** Runs the code in fresh globals after the tool prelude; returns the tool's result text. */
  run(code: string): Promise<string>;
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
}

/** Python runner backed by a Pyodide worker; never throws for tool failures. */
export function pyodideRunner(opts: PyodideRunnerOptions): ToolRunners['python'] & { dispose(): void } {
  let worker: Worker | null = null;
  let api: Remote<PythonWorkerApi> | null = null;
  let ready: Promise<void> | null = null;

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
      ready = api.load(opts.indexURL);
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
      return await race(w.api.run(code), timeoutMs, () => timeoutText(timeoutMs), signal);
    } catch (e) {
      dispose();
      return `[error] The Python tool (Pyodide) failed: ${e instanceof Error ? e.message : String(e)}`;
    }
  };
  return Object.assign(run, { dispose });
}
