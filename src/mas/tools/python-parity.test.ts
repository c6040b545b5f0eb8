// The Node Python runner on the shared cases (python.cases.ts), whose texts the Pyodide worker must give too
// (test/python-tool.browser.test.ts).
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { PYTHON_CASES } from './python.cases';
import { nodePythonRunner } from './python-node';

const hasPython = spawnSync('python3', ['--version']).status === 0;

describe.skipIf(!hasPython)('nodePythonRunner on the shared Python cases', () => {
  const run = nodePythonRunner();
  for (const c of PYTHON_CASES) {
    it(c.name, async () => {
      expect(await run(c.code, { timeoutMs: 20_000 })).toBe(c.text);
    });
  }
});
