/**
 * The Python tool's worker: Pyodide (CPython on WebAssembly), started by the engine worker (workers/python.ts) and
 * stopped by terminating it (src/mas/tools/pyodide.ts). It holds no keys, models or page state. Model code runs with:
 * - no network: once Pyodide has loaded (its own runtime files are all this worker fetches), the worker's ways out
 *   are removed before any model code runs: fetch, XMLHttpRequest, WebSocket(Stream), EventSource, WebTransport,
 *   importScripts, nested workers, BroadcastChannel, IndexedDB and Cache Storage, string timers, eval and the Function
 *   constructors. Python loses its bridges to JS (the `js` and `pyodide_js` modules, pyodide.http, run_js) and
 *   Pyodide's package loading (loadPackage, micropip): importing one raises an ImportError that says so (NO_NETWORK);
 *   Python's sockets (urllib, http.client) find no host;
 * - bounded memory: the WebAssembly heap may not grow past the bound given to load() (default 512 MiB,
 *   DEFAULT_PYTHON_MEMORY_BYTES): growth is refused as the model's code asks for it, Python gets a MemoryError, and
 *   the run reports memoryExceeded, so that the runner answers with its memory message and starts a fresh worker
 *   (a heap never shrinks);
 * - bounded time: the runner's timeout terminates the worker, the only way to stop a Python loop.
 * This locks down one worker from inside; it is not a browser sandbox (the page's CSP would be one).
 */
import { expose } from 'comlink';
import { loadPyodide, type PyodideAPI } from 'pyodide';
import { RmasError } from '../src/errors';
import { DEFAULT_PYTHON_MEMORY_BYTES, type PythonRun, type PythonWorkerApi, formatPythonOutput, PYTHON_PRELUDE } from '../src/mas/tools';

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

/** What an import of a bridge to JS or the network says (Python's ImportError text, {name} the module). */
const NO_NETWORK =
  'the Python tool runs without network access: module {name} is not available here (no fetch, sockets, JavaScript or package installs)';

// A finder ahead of every other refuses the bridges (imported ones are dropped from sys.modules first, so that the
// finders are asked again); pyodide.http is also dropped from its package's attributes. The JS modules are
// unregistered, and every loader that made one forgets its object (a dropped module's spec still holds its loader).
const LOCKDOWN = `
import sys, gc, importlib.abc
from _pyodide._importhook import jsfinder, JsLoader
for __m in list(jsfinder.jsproxies):
    jsfinder.unregister_js_module(__m)
for __o in gc.get_objects():
    if isinstance(__o, JsLoader):
        __o.jsproxy = None
class __RmasNoNetwork(importlib.abc.MetaPathFinder):
    blocked = ("js", "pyodide_js", "pyodide.http", "micropip")
    @classmethod
    def refuses(cls, name):
        return any(name == b or name.startswith(b + ".") for b in cls.blocked)
    def find_spec(self, name, path=None, target=None):
        if self.refuses(name):
            raise ImportError(${JSON.stringify(NO_NETWORK)}.replace("{name}", repr(name)), name=name)
        return None
for __m in [m for m in sys.modules if __RmasNoNetwork.refuses(m)]:
    del sys.modules[__m]
import pyodide
if hasattr(pyodide, "http"):
    del pyodide.http
sys.meta_path.insert(0, __RmasNoNetwork())
del __RmasNoNetwork, __m, __o
`;

const refusal = (what: string) =>
  new RmasError('NetworkDisabled', `${what} is disabled in the Python tool's worker: model code runs without network access`);

/** A function that refuses to run, named as the one it replaces (Pyodide reads constructor names). */
function refuser(name: string): (...a: unknown[]) => never {
  const f = () => {
    throw refusal(name);
  };
  Object.defineProperty(f, 'name', { value: name });
  return f;
}

/** Sets `name` to `value` on the worker's global and wherever its prototype chain defines it; false when it cannot. */
function replaceGlobal(name: string, value: unknown): boolean {
  for (let o: object | null = self; o; o = Object.getPrototypeOf(o) as object | null) {
    if (!Object.hasOwn(o, name)) continue;
    try {
      Object.defineProperty(o, name, { value, writable: false, configurable: false });
    } catch {
      return false;
    }
  }
  return (self as unknown as Record<string, unknown>)[name] === value;
}

const NETWORK_FUNCTIONS = [
  'fetch', 'fetchLater', 'XMLHttpRequest', 'WebSocket', 'WebSocketStream', 'EventSource', 'WebTransport', 'importScripts',
  'Worker', 'SharedWorker', 'BroadcastChannel', 'FontFace', 'eval',
];
const STORAGE_OBJECTS = ['indexedDB', 'caches', 'fonts'];

/**
 * Removes the worker's ways to the network and to the origin's storage, and the ways to compile new JS (which could
 * import() a URL); fails closed: a global that stays reachable throws, and the worker is never used.
 */
function removeNetwork(): void {
  const stuck: string[] = [];
  for (const name of NETWORK_FUNCTIONS) {
    if (name in self && !replaceGlobal(name, refuser(name))) stuck.push(name);
  }
  for (const name of STORAGE_OBJECTS) {
    if (name in self && !replaceGlobal(name, undefined)) stuck.push(name);
  }
  for (const name of ['storage', 'serviceWorker']) {
    if (name in navigator) Object.defineProperty(navigator, name, { value: undefined, configurable: false });
  }
  const constructors = [Function, (async () => {}).constructor, function* () {}.constructor, async function* () {}.constructor];
  for (const c of constructors) Object.defineProperty(c.prototype, 'constructor', { value: refuser(c.name), configurable: false });
  if (stuck.length) throw refusal(`removing ${stuck.join(', ')} failed, so the Python tool`);
}

/** Timers take functions only: a string handler would be compiled as code (before load, so that Pyodide keeps these). */
function functionTimers(): void {
  for (const name of ['setTimeout', 'setInterval'] as const) {
    const real = self[name].bind(self) as (h: unknown, ...a: unknown[]) => number;
    const timer = (handler: unknown, ...rest: unknown[]) => {
      if (typeof handler !== 'function') throw refusal(`${name} with code in a string`);
      return real(handler, ...rest);
    };
    Object.defineProperty(timer, 'name', { value: name });
    replaceGlobal(name, timer);
  }
}

/**
 * Growth of any WebAssembly memory past `limit` bytes is refused (Emscripten turns that into a failed malloc, which
 * Python raises as MemoryError); `refused` records it for the run that asked.
 */
const heap = { limit: DEFAULT_PYTHON_MEMORY_BYTES, refused: false };
function boundMemory(): void {
  const grow = WebAssembly.Memory.prototype.grow;
  Object.defineProperty(WebAssembly.Memory.prototype, 'grow', {
    configurable: false,
    writable: false,
    value: function (this: WebAssembly.Memory, delta: number) {
      if (this.buffer.byteLength + delta * 65536 > heap.limit) {
        heap.refused = true;
        throw new RangeError(`the Python tool's heap may not grow past ${heap.limit} bytes`);
      }
      return grow.call(this, delta);
    },
  });
}

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

/** Pyodide loaded, then locked down: nothing of it may fetch afterwards. */
async function start(indexURL: string | undefined): Promise<PyodideAPI> {
  boundMemory();
  functionTimers();
  const py = await loadPyodide({ indexURL: indexURL ?? (await defaultIndexURL()) });
  runner = py.runPython(RUNNER);
  py.runPython(LOCKDOWN);
  for (const name of ['loadPackage', 'loadPackagesFromImports', 'registerJsModule', 'runPythonAsync'] as const)
    Object.defineProperty(py, name, { value: refuser(name), writable: false, configurable: false });
  removeNetwork();
  return py;
}

/** The heap's size now (Pyodide's Emscripten module; 0 if this Pyodide does not expose it). */
const heapBytes = (py: PyodideAPI) => (py as unknown as { _module?: { HEAPU8?: Uint8Array } })._module?.HEAPU8?.buffer.byteLength ?? 0;

const api: PythonWorkerApi = {
  async load(opts = {}) {
    if (!pyodide) {
      heap.limit = opts.memoryLimitBytes ?? DEFAULT_PYTHON_MEMORY_BYTES;
      pyodide = start(opts.indexURL);
    }
    await pyodide;
  },
  async run(code): Promise<PythonRun> {
    await api.load();
    const py = await pyodide!;
    heap.refused = false;
    const res = runner!(PYTHON_PRELUDE + code + '\n');
    const [stdout, stderr, status] = res.toJs();
    res.destroy();
    return { text: formatPythonOutput(stdout, stderr, status), memoryExceeded: heap.refused, heapBytes: heapBytes(py) };
  },
};

expose(api);
