import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { toolLoop } from './loop';
import { formatPythonOutput } from './python-format';
import { nodePythonRunner, spawnPython } from './python-node';

const hasPython = spawnSync('python3', ['--version']).status === 0;
const hasSympy = hasPython && spawnSync('python3', ['-c', 'import sympy']).status === 0;
if (!hasPython) console.warn('python3 not found: the nodePythonRunner tests that run Python are skipped');

describe('formatPythonOutput', () => {
  it('joins stdout, stderr and the exit code on separate lines', () => {
    expect(formatPythonOutput('4\n', '', 0)).toBe('4');
    expect(formatPythonOutput('a', 'oops\n', 2)).toBe('a\n[stderr]\noops\n[exit_code] 2');
    expect(formatPythonOutput('', '', 3)).toBe('[exit_code] 3');
    expect(formatPythonOutput('', '', 0)).toBe('[no output]');
  });
});

describe.skipIf(!hasPython)('nodePythonRunner (python3)', () => {
  const run = nodePythonRunner();

  it('returns stdout, with the prelude modules imported', async () => {
    expect(await run('print(2 + 2)\nprint(math.comb(10, 3), fractions.Fraction(6, 8))', { timeoutMs: 10_000 }))
      .toBe('4\n120 3/4');
  });

  it('reports stderr and a non-zero exit code', async () => {
    const out = await run('import sys\nprint("partial")\nsys.stderr.write("warn\\n")\nsys.exit(3)', { timeoutMs: 10_000 });
    expect(out).toBe('partial\n[stderr]\nwarn\n[exit_code] 3');
    const err = await run('1/0', { timeoutMs: 10_000 });
    expect(err.startsWith('[stderr]\nTraceback (most recent call last):')).toBe(true);
    expect(err.endsWith('ZeroDivisionError: division by zero\n[exit_code] 1')).toBe(true);
  });

  it('says [no output] for silent code, runs in a fresh empty folder with a stripped environment', async () => {
    expect(await run('x = 1', { timeoutMs: 10_000 })).toBe('[no output]');
    const probe = 'import os\nprint(sorted(os.listdir(".")))\nprint(sorted(k for k in os.environ if k in ("PATH", "LANG", "HOME")))';
    expect(await run(probe, { timeoutMs: 10_000 })).toBe("[]\n['LANG', 'PATH']");
  });

  it.skipIf(!hasSympy)('binds sympy as sp (loaded on first use)', async () => {
    const code = 'x = sp.symbols("x")\nprint(sp.solve(x**2 - 4, x), sp.factorint(360))\nimport sympy\nprint(sympy is sp)';
    expect(await run(code, { timeoutMs: 20_000 })).toBe('[-2, 2] {2: 3, 3: 2, 5: 1}\nTrue');
  });

  it('serves the tool loop end to end', async () => {
    const steps = ['<python>print(sum(range(101)))</python>', ' The sum is \\boxed{5050}.'];
    const r = await toolLoop({
      generate: async () => ({ text: steps.shift()!, tokens: 7, stoppedBy: steps.length ? 'tool' : 'eos' }),
      runners: { python: run, search: async () => '' },
      maxNewTokens: 64,
    });
    expect(r.text).toBe('<python>print(sum(range(101)))</python> <result> 5050 </result> The sum is \\boxed{5050}.');
    expect(r).toMatchObject({ tokens: 14, stoppedBy: 'eos' });
  });

  it('kills the process on timeout and names the real limit', async () => {
    const t0 = Date.now();
    expect(await run('import time\nwhile True: time.sleep(0.05)', { timeoutMs: 300 }))
      .toBe('[timeout] Python tool exceeded 0.3 seconds.');
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('kills the process on abort', async () => {
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(), 200);
    expect(await run('import time\ntime.sleep(30)', { timeoutMs: 20_000, signal: ctl.signal }))
      .toBe('[aborted] The Python run was cancelled.');
  });
});

describe.skipIf(!hasPython)('spawnPython (python3)', () => {
  it('writes the files, passes the arguments and stdin, and reports the exit code and streams', async () => {
    const r = await spawnPython({
      args: ['main.py', 'x'],
      files: { 'main.py': 'import sys\nprint(open("data.txt").read(), sys.argv[1:], sys.stdin.read())\nsys.exit(4)', 'data.txt': 'd' },
      stdin: 'in',
      timeoutMs: 10_000,
    });
    expect(r).toEqual({ exitCode: 4, signal: null, stdout: "d ['x'] in\n", stderr: '', timedOut: false, aborted: false });
  });

  it('keeps at most maxOutputChars of a stream (plus the last chunk read) and reports a timeout', async () => {
    const r = await spawnPython({
      args: ['-'],
      stdin: 'print("a" * 10**6, flush=True)\nimport time\ntime.sleep(30)',
      timeoutMs: 500,
      maxOutputChars: 10,
    });
    expect(r.timedOut).toBe(true);
    expect(r.exitCode).toBeNull();
    expect(r.stdout.length).toBeGreaterThanOrEqual(10);
    expect(r.stdout.length).toBeLessThan(1 << 20);
  });
});

describe('nodePythonRunner without an interpreter', () => {
  it('spawnPython rejects with the spawn error', async () => {
    await expect(spawnPython({ python: '/nonexistent/python3', args: ['-'], timeoutMs: 1000 })).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('returns a text saying how to install Python instead of throwing', async () => {
    const run = nodePythonRunner({ python: '/nonexistent/python3' });
    const out = await run('print(1)', { timeoutMs: 1000 });
    expect(out.startsWith('[error] The Python tool is unavailable: the interpreter `/nonexistent/python3` was not found.')).toBe(true);
    expect(out).toContain('apt-get install python3');
  });
});
