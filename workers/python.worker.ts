/**
 * The Python tool's worker: Pyodide (CPython on WebAssembly) run off the page's thread.
 * A dedicated worker sees no DOM and no page state; it could reach the origin's IndexedDB and
 * network like any worker, and Python code can call into JS through Pyodide's `js` module, so the
 * model's code is no more sandboxed than the worker itself. It is not given any keys or models.
 * The page stops a runaway run by terminating this worker (src/mas/tools/pyodide.ts); workers/python.ts starts it.
 */
import { expose } from 'comlink';
import { loadPyodide, type PyodideAPI } from 'pyodide';
import type { PythonWorkerApi } from '../src/mas/tools/pyodide';
import { formatPythonOutput, PYTHON_PRELUDE } from '../src/mas/tools/python-format';

// stdout/stderr go to StringIO buffers around exec; a traceback drops this wrapper's own frame;
// SystemExit gives an exit code as it would in a subprocess
const RUNNER = `
import sys, io, contextlib, traceback
def __rmas_run(src):
    out, err = io.StringIO(), io.StringIO()
    status = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(src, "<stdin>", "exec"), {"__name__": "__main__"})
        except SystemExit as e:
            if e.code is None:
                status = 0
            elif isinstance(e.code, int):
                status = e.code
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except BaseException as e:
            traceback.print_exception(type(e), e, e.__traceback__.tb_next)
            status = 1
    return [out.getvalue(), err.getvalue(), status]
__rmas_run
`;

let pyodide: Promise<PyodideAPI> | null = null;
let runner: ((src: string) => { toJs(): [string, string, number]; destroy(): void }) | null = null;

/**
 * Where pyodide.asm.mjs, .wasm, python_stdlib.zip and pyodide-lock.json are served from. In dev, the
 * npm package's own folder as Vite serves it; in a build, `pyodide/` beside the app, which
 * build/pyodide-plugin.ts fills (Pyodide needs the files side by side, unhashed).
 */
async function defaultIndexURL(): Promise<string> {
  if (import.meta.env.DEV) {
    const { default: asmUrl } = await import('pyodide/pyodide.asm.mjs?url');
    return new URL('./', new URL(asmUrl, self.location.href)).href;
  }
  return new URL(`${import.meta.env.BASE_URL}pyodide/`, self.location.href).href;
}

const api: PythonWorkerApi = {
  async load(indexURL) {
    pyodide ??= (async () => loadPyodide({ indexURL: indexURL ?? (await defaultIndexURL()) }))();
    const py = await pyodide;
    runner ??= py.runPython(RUNNER);
  },
  async run(code) {
    await api.load();
    const res = runner!(PYTHON_PRELUDE + code + '\n');
    const [stdout, stderr, status] = res.toJs();
    res.destroy();
    return formatPythonOutput(stdout, stderr, status);
  },
};

expose(api);
