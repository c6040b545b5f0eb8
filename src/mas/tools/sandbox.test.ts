// The probe's payloads (issue 39, item 1) against the sandbox model-written code runs in: each one is stopped, and
// where none can be made the code is refused by name. Scoring under attack is in src/eval/code.test.ts.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { nodePythonRunner, spawnPython } from './python-node';
import { SANDBOX_LIMITS, SandboxUnavailable } from './sandbox';

const hasPython = spawnSync('python3', ['--version']).status === 0;
const hasBwrap = spawnSync(process.env.RMAS_BWRAP ?? 'bwrap', ['--version']).status === 0;
if (!hasBwrap) console.warn('bwrap not found: the sandbox probe is skipped (sudo bash scripts/setup-system.sh installs it)');

/** Host processes whose command line holds `marker`. */
function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(marker)) found.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

async function gone(marker: string, withinMs: number): Promise<number[]> {
  const t0 = Date.now();
  let left = processesWith(marker);
  while (left.length && Date.now() - t0 < withinMs) {
    await new Promise((r) => setTimeout(r, 50));
    left = processesWith(marker);
  }
  return left;
}

describe.skipIf(!hasPython || !hasBwrap)('the sandbox of model-written code (bubblewrap)', () => {
  const run = nodePythonRunner();
  const outside = mkdtempSync(join(tmpdir(), 'rmas-probe-'));
  afterAll(() => rmSync(outside, { recursive: true, force: true }));

  it("cannot read a secret of the runner's environment, through /proc or its own", async () => {
    // /proc/<pid>/environ shows a process's environment as it was started: the secret is in the runner's from its start
    const secret = `probe-secret-${randomUUID()}`;
    const probe = [
      'import os',
      'hits = []',
      'for pid in (p for p in os.listdir("/proc") if p.isdigit()):',
      '    try:',
      `        if b"${secret}" in open("/proc/%s/environ" % pid, "rb").read(): hits.append(pid)`,
      '    except OSError:',
      '        pass',
      'try:',
      '    open("/proc/%d/environ" % os.getppid(), "rb").read()',
      '    parent = "read"',
      'except OSError as e:',
      '    parent = type(e).__name__',
      'print(hits, parent, sorted(k for k in os.environ if "KEY" in k), os.getuid())',
    ].join('\n');
    const script = `import { nodePythonRunner } from ${JSON.stringify(resolve(import.meta.dirname, 'python-node.ts'))};\n` +
      `process.stdout.write(await nodePythonRunner()(${JSON.stringify(probe)}, { timeoutMs: 20_000 }));`;
    const tsx = resolve(import.meta.dirname, '../../../node_modules/.bin/tsx');
    const r = spawnSync(tsx, ['--input-type=module', '-e', script], {
      env: { ...process.env, API_KEY: secret, TAVILY_API_KEY: secret }, encoding: 'utf8', timeout: 60_000,
    });
    expect(r.stderr).toBe('');
    // the parent is bwrap's init (another uid) or, without one, pid 0 outside the namespace
    expect(r.stdout).toMatch(/^\[\] (PermissionError|FileNotFoundError) \[\] 65534$/);
  });

  it('writes only its work folder: the runner\'s folders, /tmp and the root are out of reach', async () => {
    const id = randomUUID();
    const targets = [join(outside, 'escaped.txt'), `/tmp/rmas-escape-${id}`, `/rmas-escape-${id}`, `/usr/rmas-escape-${id}`];
    onTestFinished(() => targets.forEach((t) => rmSync(t, { force: true }))); // where a run without the sandbox wrote them
    const probe = [
      'import os',
      `for path in ${JSON.stringify(targets)} + ["here.txt"]:`,
      '    try:',
      '        with open(path, "w") as f: f.write("x")',
      '        print(path, "written")',
      '    except OSError as e:',
      '        print(path, type(e).__name__)',
    ].join('\n');
    const out = await run(probe, { timeoutMs: 20_000 });
    const lines = out.split('\n');
    expect(lines).toHaveLength(5);
    for (let i = 0; i < 4; i++) expect(lines[i]).toMatch(new RegExp(`^${targets[i]} (FileNotFoundError|OSError|PermissionError)$`));
    expect(lines[4]).toBe('here.txt written');
    for (const t of targets) expect(existsSync(t)).toBe(false);
  });

  it('has no network: a listener on 127.0.0.1 gets no connection', async () => {
    let connections = 0;
    const server = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    try {
      const probe = [
        'import errno, socket',
        'try:',
        `    socket.create_connection(("127.0.0.1", ${port}), timeout=3).sendall(b"API_KEY=...")`,
        '    print("connected")',
        'except OSError as e:',
        '    print("blocked", errno.errorcode.get(e.errno, e.errno))',
      ].join('\n');
      expect(await run(probe, { timeoutMs: 20_000 })).toMatch(/^blocked (ENETUNREACH|ECONNREFUSED)$/);
      await new Promise((r) => setTimeout(r, 100));
      expect(connections).toBe(0);
    } finally {
      server.close();
    }
  });

  it('a fork()+setsid() daemon dies with its run, at the timeout and when the run ends', async () => {
    for (const [tail, timeoutMs] of [['import time\ntime.sleep(30)', 1500], ['pass', 20_000]] as const) {
      const marker = `4321.${Date.now() % 1_000_000}${Math.floor(Math.random() * 1000)}`;
      const probe = [
        'import os, time',
        'if os.fork() == 0:',
        '    os.setsid()',
        '    if os.fork() == 0:',
        `        os.execv("/bin/sleep", ["sleep", "${marker}"])`,
        '    os._exit(0)',
        'time.sleep(0.5)',
        tail,
      ].join('\n');
      const out = await run(probe, { timeoutMs });
      expect(out).toBe(timeoutMs === 1500 ? '[timeout] Python tool exceeded 1.5 seconds.' : '[no output]');
      expect(await gone(marker, 3000)).toEqual([]);
    }
  });

  it('is bounded in memory, processes and file size, and runs as an unprivileged user', async () => {
    const probe = [
      'import os, time',
      'try:',
      '    b = bytearray(3 * 2**30)',
      '    print("allocated 3 GB")',
      'except MemoryError:',
      '    print("MemoryError")',
      'n = 0',
      'try:',
      '    for _ in range(200):',
      '        if os.fork() == 0:',
      '            time.sleep(3)',
      '            os._exit(0)',
      '        n += 1',
      'except OSError as e:',
      '    print("forks stopped", n < 64, type(e).__name__)',
      'try:',
      '    with open("big.bin", "wb") as f: f.write(b"x" * (100 << 20))',
      '    print("wrote 100 MB")',
      'except OSError as e:',
      '    print("file", os.strerror(e.errno))',
      'print(os.getuid(), os.getgid())',
    ].join('\n');
    expect(await run(probe, { timeoutMs: 20_000 })).toBe(
      'MemoryError\nforks stopped True BlockingIOError\nfile File too large\n65534 65534',
    );
    expect(SANDBOX_LIMITS).toEqual({ addressSpaceBytes: 2 ** 31, fileSizeBytes: 64 * 2 ** 20, processes: 64 });
  });

  it('still runs ordinary code: imports, the prelude, stdin, its own files', async () => {
    const r = await spawnPython({
      args: ['main.py'],
      files: {
        'main.py': 'import sys, json, tempfile\nprint(open("data.txt").read(), sys.stdin.read(), tempfile.gettempdir())',
        'data.txt': 'd',
      },
      stdin: 'in',
      timeoutMs: 20_000,
    });
    expect(r).toEqual({ exitCode: 0, signal: null, stdout: 'd in /sandbox\n', stderr: '', timedOut: false, aborted: false });
    expect(await run('print(math.comb(10, 3), fractions.Fraction(6, 8))', { timeoutMs: 20_000 })).toBe('120 3/4');
  });
});

describe.skipIf(!hasPython)('where no sandbox can be made', () => {
  const missing = '/nonexistent/bwrap';

  it('refuses to run model code by name, saying what to install or pass', async () => {
    const err = await spawnPython({ args: ['-c', 'print(1)'], timeoutMs: 5000, sandbox: { bwrap: missing } }).catch((e) => e);
    expect(err).toBeInstanceOf(SandboxUnavailable);
    expect(err.name).toBe('SandboxUnavailable');
    expect(err.message).toBe(
      'model-written code was not run: no sandbox can be made for it (`/nonexistent/bwrap` was not found). Install ' +
        'bubblewrap (`apt-get install bubblewrap`, or `sudo bash scripts/setup-system.sh`; user namespaces must be ' +
        'allowed), or pass --allow_unsandboxed_code to run it without one, with access to your files, network and secrets.',
    );
    await expect(nodePythonRunner({ sandbox: { bwrap: missing } })('print(1)', { timeoutMs: 5000 }))
      .rejects.toMatchObject({ name: 'SandboxUnavailable' });
  });

  it('reads the bwrap path from RMAS_BWRAP', async () => {
    const before = process.env.RMAS_BWRAP;
    process.env.RMAS_BWRAP = missing;
    try {
      await expect(nodePythonRunner()('print(1)', { timeoutMs: 5000 })).rejects.toThrow('`/nonexistent/bwrap` was not found');
    } finally {
      if (before === undefined) delete process.env.RMAS_BWRAP;
      else process.env.RMAS_BWRAP = before;
    }
  });

  it('runs it unsandboxed only when allowed', async () => {
    const run = nodePythonRunner({ sandbox: { bwrap: missing, allowUnsandboxed: true } });
    expect(await run('import os\nprint(6 * 7, os.getcwd().startswith("/sandbox"))', { timeoutMs: 10_000 })).toBe('42 False');
  });
});
