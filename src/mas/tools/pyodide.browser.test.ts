import { afterAll, describe, expect, it } from 'vitest';
import { pagePythonRunner } from '../../../workers/python';

describe('pyodideRunner (Pyodide in a worker)', () => {
  const run = pagePythonRunner();
  afterAll(() => run.dispose());

  it('returns stdout with the prelude modules imported', async () => {
    expect(await run('print(2 + 2)\nprint(math.comb(10, 3), fractions.Fraction(6, 8))', { timeoutMs: 10_000 }))
      .toBe('4\n120 3/4');
  });

  it('reports stderr, exit codes and tracebacks like the subprocess runner', async () => {
    expect(await run('import sys\nprint("partial")\nsys.stderr.write("warn\\n")\nsys.exit(3)', { timeoutMs: 10_000 }))
      .toBe('partial\n[stderr]\nwarn\n[exit_code] 3');
    const err = await run('1/0', { timeoutMs: 10_000 });
    expect(err.startsWith('[stderr]\nTraceback (most recent call last):\n  File "<stdin>"')).toBe(true);
    expect(err.endsWith('ZeroDivisionError: division by zero\n[exit_code] 1')).toBe(true);
    expect(await run('x = 1', { timeoutMs: 10_000 })).toBe('[no output]');
  });

  it('starts each run with fresh globals', async () => {
    await run('leak = 5', { timeoutMs: 10_000 });
    expect(await run('print("leak" in globals())', { timeoutMs: 10_000 })).toBe('False');
  });

  it('terminates a runaway loop on timeout and works again afterwards', async () => {
    expect(await run('while True: pass', { timeoutMs: 500 })).toBe('[timeout] Python tool exceeded 0.5 seconds.');
    expect(await run('print(6 * 7)', { timeoutMs: 30_000 })).toBe('42');
  });
});
