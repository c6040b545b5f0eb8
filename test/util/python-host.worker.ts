/**
 * A worker that holds the tab's Python tool as the engine worker does (workers/python.ts: Pyodide in a worker nested
 * in this one), for test/python-tool.browser.test.ts.
 */
import { expose } from 'comlink';
import { pagePythonRunner } from '../../workers/python';

const python = pagePythonRunner();

const host = {
  run: (code: string, timeoutMs: number) => python(code, { timeoutMs }),
};
export type PythonHost = typeof host;

expose(host);
