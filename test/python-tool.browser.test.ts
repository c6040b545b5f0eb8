/**
 * The tab's Python tool as deliberation runs it: Pyodide in a worker nested in another (the engine worker's place, here
 * test/util/python-host.worker.ts). It gives the Node runner's exact texts (src/mas/tools/python.cases.ts), reaches no
 * network (each bridge from Python to JS or the net fails with its message in the result), and its memory and time
 * are bounded: a run past the heap bound or the timeout is stopped with its named message, and the next one runs fresh.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { type Remote, wrap } from 'comlink';
import { DEFAULT_PYTHON_MEMORY_BYTES, memoryText } from '../src/mas/tools/pyodide';
import { PYTHON_CASES } from '../src/mas/tools/python.cases';
import { timeoutText } from '../src/mas/tools/python-format';
import type { PythonHost } from './util/python-host.worker';

const worker = new Worker(new URL('./util/python-host.worker.ts', import.meta.url), { type: 'module' });
const host: Remote<PythonHost> = wrap(worker);
afterAll(() => worker.terminate());
const run = (code: string, timeoutMs = 20_000) => host.run(code, timeoutMs);

/** The ImportError the worker's finder raises for module `name` (workers/python.worker.ts NO_NETWORK). */
const noNetwork = (name: string) =>
  `ImportError: the Python tool runs without network access: module '${name}' is not available here ` +
  '(no fetch, sockets, JavaScript or package installs)\n[exit_code] 1';

describe('the Python tool in a nested worker', () => {
  it('gives the Node runner\'s texts', async () => {
    for (const c of PYTHON_CASES) expect(await run(c.code), c.name).toBe(c.text);
  });

  it('reaches no network: js, pyodide.http, pyodide_js, micropip, run_js, the Function constructor, sockets', async () => {
    expect((await run('import js\njs.fetch("https://example.com")')).endsWith(noNetwork('js'))).toBe(true);
    expect((await run('from pyodide.http import pyfetch')).endsWith(noNetwork('pyodide.http'))).toBe(true);
    expect((await run('import pyodide_js\npyodide_js.loadPackage("micropip")')).endsWith(noNetwork('pyodide_js'))).toBe(true);
    expect((await run('import micropip')).endsWith(noNetwork('micropip'))).toBe(true);
    expect((await run('import pyodide.code\npyodide.code.run_js("fetch(\'https://example.com\')")')).endsWith(noNetwork('js'))).toBe(true);
    // a JS object from Python leads to Function only through .constructor, which refuses to compile code
    const ctor = await run('from pyodide.ffi import to_js\nto_js([1]).constructor.constructor("return fetch")()');
    expect(ctor).toContain('JsException: NetworkDisabled: Function is disabled in the Python tool\'s worker: model code runs ' +
      'without network access\n[exit_code] 1');
    expect(await run('import socket\ntry:\n    socket.create_connection(("example.com", 80), timeout=2)\nexcept OSError as e:\n' +
      '    print(type(e).__name__, e.errno)')).toMatch(/^(OSError|ConnectionRefusedError|TimeoutError) \d+$/);
    // nothing the garbage collector can reach still holds the JS global or Pyodide's API
    const probe = 'import gc\nfrom pyodide.ffi import JsProxy\nheld = {k for o in gc.get_objects() for r in gc.get_referents(o)\n' +
      '        if isinstance(r, JsProxy) for k in ("Function", "fetch", "_api", "_module", "jsglobals") if hasattr(r, k)}\n' +
      'print(sorted(held))';
    expect(await run(probe)).toBe('[]');
  });

  it('stops a run whose heap would pass the bound, caught or not, and runs fresh afterwards', async () => {
    expect(DEFAULT_PYTHON_MEMORY_BYTES).toBe(512 * 2 ** 20);
    const over = memoryText(DEFAULT_PYTHON_MEMORY_BYTES);
    expect(over).toBe('[memory] Python tool exceeded its memory bound of 512 MiB; use less memory (the next run starts fresh).');
    expect(await run('x = bytearray(600 * 2**20)\nprint("never")')).toBe(over);
    expect(await run('try:\n    x = bytearray(600 * 2**20)\nexcept MemoryError:\n    print("caught")')).toBe(over);
    expect(await run('print(len(bytearray(100 * 2**20)))')).toBe('104857600');
  });

  it('stops a runaway loop at the timeout and runs fresh afterwards', async () => {
    const t0 = performance.now();
    expect(await run('while True: pass', 500)).toBe(timeoutText(500));
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(await run('print(6 * 7)')).toBe('42');
  });
});
