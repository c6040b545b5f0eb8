/**
 * The tab's Python tool: pyodideRunner (src/mas/tools/pyodide.ts) on workers/python.worker.ts, which the engine worker
 * starts as a nested worker (deliberation's tool-caller). The worker is constructed here, in the app, where Vite sees
 * `new Worker(new URL(…, import.meta.url))` and bundles it.
 */
import { type PyodideRunnerOptions, pyodideRunner } from '../src/mas/tools';

export function pagePythonRunner(opts: Omit<PyodideRunnerOptions, 'startWorker'> = {}) {
  return pyodideRunner({
    ...opts,
    startWorker: () => new Worker(new URL('./python.worker.ts', import.meta.url), { type: 'module', name: 'python' }),
  });
}
