/**
 * Python in Node: each run is a fresh `python3` process in a fresh temporary folder with a stripped
 * environment, inside the sandbox of sandbox.ts (refused where none can be made, unless allowed), killed with the
 * whole sandbox on timeout or abort. `spawnPython` is that core, shared by the tool runner here and the
 * code-benchmark scoring in src/eval/code.ts.
 * Node built-ins are imported inside the call so that the folder's index stays importable in a page.
 */
import { nodeImport } from '../../util/node-import';
import type { ToolRunners } from './loop';
import { SandboxUnavailable, sandboxCommand, type SandboxOptions } from './sandbox';
import { ABORTED_TEXT, formatPythonOutput, PYTHON_PRELUDE, timeoutText } from './python-format';

/** Output kept per stream by default; beyond it a runaway print loop would only grow memory (tool results are cut to 6000 chars anyway). */
const MAX_STREAM_CHARS = 1 << 20;

export interface SpawnPythonOptions {
  /** Interpreter command or path; default `python3`. */
  python?: string;
  /** Command-line arguments after the interpreter, e.g. `['-']` or `['main.py']`. */
  args: string[];
  /** Files written into the fresh working folder before the start (name → UTF-8 text). */
  files?: Record<string, string>;
  /** Text written to the process's stdin, which is then closed. */
  stdin?: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Characters kept per stream; default 1 Mi. */
  maxOutputChars?: number;
  /** Where no sandbox can be made: refuse (the default, SandboxUnavailable) or run unsandboxed. */
  sandbox?: SandboxOptions;
}

export interface PythonProcessResult {
  /** null when the process was killed by a signal (then `signal` says which) or never finished. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  aborted: boolean;
}

type ChildProcess = typeof import('node:child_process');

// Version-manager shims (pyenv, asdf) cost about a second per start; the interpreter they lead to is
// asked for once per command and started directly afterwards. On any failure the command itself is used.
const interpreters = new Map<string, Promise<string>>();
const stripEnv = () => ({ PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: process.env.LANG ?? 'C.UTF-8' });

function resolveInterpreter(python: string, execFile: ChildProcess['execFile']): Promise<string> {
  let p = interpreters.get(python);
  if (!p) {
    p = new Promise<string>((resolve) => {
      execFile(python, ['-c', 'import sys; print(sys.executable)'], { env: stripEnv(), timeout: 20_000 }, (err, out) => {
        const exe = String(out ?? '').trim();
        resolve(!err && exe ? exe : python);
      });
    });
    interpreters.set(python, p);
  }
  return p;
}

type Mode = { sandboxed: true } | { sandboxed: false; why: string };
const modes = new Map<string, Promise<Mode>>();

/**
 * Whether code runs sandboxed: asked once per bwrap and interpreter by running `print("sandbox ok")` in a sandbox.
 * Throws SandboxUnavailable where it fails and unsandboxed code is not allowed.
 */
export async function sandboxMode(python = 'python3', opts: SandboxOptions = {}): Promise<Mode> {
  const { execFile } = await nodeImport('node:child_process');
  const exe = await resolveInterpreter(python, execFile);
  const bwrap = opts.bwrap ?? process.env.RMAS_BWRAP ?? 'bwrap';
  const key = `${bwrap}\0${exe}`;
  let p = modes.get(key);
  if (!p) {
    p = runProcess(exe, { args: ['-c', 'print("sandbox ok")'], timeoutMs: 20_000, sandbox: { bwrap } }, true)
      .then((r): Mode => (r.stdout === 'sandbox ok\n'
        ? { sandboxed: true }
        : { sandboxed: false, why: r.stderr.trim() || `exit code ${r.exitCode}` }))
      .catch((e: NodeJS.ErrnoException): Mode => ({
        sandboxed: false, why: e.code === 'ENOENT' ? `\`${bwrap}\` was not found` : e.message,
      }));
    modes.set(key, p);
  }
  const mode = await p;
  if (!mode.sandboxed && !opts.allowUnsandboxed) {
    throw new SandboxUnavailable(
      `model-written code was not run: no sandbox can be made for it (${mode.why}). Install bubblewrap ` +
        '(`apt-get install bubblewrap`, or `sudo bash scripts/setup-system.sh`; user namespaces must be allowed), ' +
        'or pass --allow_unsandboxed_code to run it without one, with access to your files, network and secrets.',
    );
  }
  return mode;
}

/**
 * Runs Python once in a fresh temporary folder (removed afterwards) with only PATH and LANG in its
 * environment: in the sandbox (sandbox.ts) where one can be made, else, where opts.sandbox allows it, as a
 * plain process in its own process group. The sandbox or the group is killed on timeout or abort. Rejects
 * with SandboxUnavailable (see sandboxMode), or when the process cannot start (the spawn error, `code`
 * 'ENOENT' for a missing interpreter).
 */
export async function spawnPython(opts: SpawnPythonOptions): Promise<PythonProcessResult> {
  const python = opts.python ?? 'python3';
  if (opts.signal?.aborted) return notRun();
  const [{ execFile }, fs] = await Promise.all([nodeImport('node:child_process'), nodeImport('node:fs/promises')]);
  const exe = await resolveInterpreter(python, execFile);
  // as the spawn would say it, before the sandbox's probe blames the sandbox for it
  const found = exe.startsWith('/') && (await fs.access(exe, fs.constants.X_OK).then(() => true, () => false));
  if (!found) throw Object.assign(new Error(`spawn ${python} ENOENT`), { code: 'ENOENT', path: python });
  const mode = await sandboxMode(python, opts.sandbox);
  return runProcess(exe, opts, mode.sandboxed);
}

const notRun = (): PythonProcessResult =>
  ({ exitCode: null, signal: null, stdout: '', stderr: '', timedOut: false, aborted: true });

async function runProcess(exe: string, opts: SpawnPythonOptions, sandboxed: boolean): Promise<PythonProcessResult> {
  const { signal, timeoutMs } = opts;
  const cap = opts.maxOutputChars ?? MAX_STREAM_CHARS;
  const [{ spawn }, fs, path, os] = await Promise.all([
    nodeImport('node:child_process'),
    nodeImport('node:fs/promises'),
    nodeImport('node:path'),
    nodeImport('node:os'),
  ]);
  if (signal?.aborted) return notRun();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'rmas-python-'));
  const cmd = sandboxed
    ? await sandboxCommand([exe, ...opts.args], { workDir: dir, env: stripEnv(), timeoutMs, bwrap: opts.sandbox?.bwrap })
    : { file: exe, args: opts.args, release: async () => {} } as const;
  try {
    for (const [name, text] of Object.entries(opts.files ?? {})) await fs.writeFile(path.join(dir, name), text, 'utf8');
    if ('chownTo' in cmd && cmd.chownTo !== undefined) {
      for (const name of ['', ...Object.keys(opts.files ?? {})]) await fs.chown(path.join(dir, name), cmd.chownTo, cmd.chownTo);
    }
    return await new Promise<PythonProcessResult>((resolve, reject) => {
      const fd3 = 'fd3' in cmd && cmd.fd3 !== undefined ? [cmd.fd3] : [];
      const child = spawn(cmd.file, cmd.args, {
        cwd: dir,
        env: stripEnv(),
        stdio: ['pipe', 'pipe', 'pipe', ...fd3],
        detached: true, // own process group, so that a kill also reaches anything the code started
      });
      let stdout = '';
      let stderr = '';
      let settled = false;
      const settle = () => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      const finish = (r: Pick<PythonProcessResult, 'exitCode' | 'signal' | 'timedOut' | 'aborted'>) => {
        if (settle()) resolve({ ...r, stdout, stderr });
      };
      const kill = () => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
        } catch {
          child.kill('SIGKILL');
        }
      };
      const onAbort = () => {
        kill();
        finish({ exitCode: null, signal: 'SIGKILL', timedOut: false, aborted: true });
      };
      const timer = setTimeout(() => {
        kill();
        finish({ exitCode: null, signal: 'SIGKILL', timedOut: true, aborted: false });
      }, timeoutMs);
      signal?.addEventListener('abort', onAbort, { once: true });

      child.stdout!.setEncoding('utf8').on('data', (s: string) => {
        if (stdout.length < cap) stdout += s;
      });
      child.stderr!.setEncoding('utf8').on('data', (s: string) => {
        if (stderr.length < cap) stderr += s;
      });
      child.on('error', (err) => {
        if (settle()) reject(err);
      });
      // 'close' waits for the streams to drain, so the output is complete
      child.on('close', (status, sig) => finish({ exitCode: status, signal: sig, timedOut: false, aborted: false }));
      child.stdin!.on('error', () => {}); // EPIPE when the process exits before reading all its input
      child.stdin!.end(opts.stdin ?? '');
    });
  } finally {
    await cmd.release();
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/**
 * Node runner: a fresh `python3` subprocess per call (see the module comment); never throws for tool failures, but
 * rejects with SandboxUnavailable where no sandbox can be made and `sandbox.allowUnsandboxed` is not set.
 */
export function nodePythonRunner(opts: { python?: string; sandbox?: SandboxOptions } = {}): ToolRunners['python'] {
  const python = opts.python ?? 'python3';
  return async (code, { timeoutMs, signal }) => {
    let r: PythonProcessResult;
    try {
      // the script goes in on stdin (`python3 -`): no argument-length limit, tracebacks say <stdin>
      r = await spawnPython({ python, args: ['-'], stdin: PYTHON_PRELUDE + code + '\n', timeoutMs, signal, sandbox: opts.sandbox });
    } catch (e) {
      if (e instanceof SandboxUnavailable) throw e;
      const err = e as NodeJS.ErrnoException;
      return err.code === 'ENOENT'
        ? `[error] The Python tool is unavailable: the interpreter \`${python}\` was not found. ` +
            'Install Python 3 (for example `apt-get install python3`, or from python.org) ' +
            'or pass its path as nodePythonRunner({ python: "/path/to/python3" }).'
        : `[error] The Python tool could not start \`${python}\`: ${err.message}`;
    }
    if (r.aborted) return ABORTED_TEXT;
    if (r.timedOut) return timeoutText(timeoutMs);
    const os = await nodeImport('node:os');
    // killed by a signal: Python's subprocess convention, minus the signal number
    const status = r.exitCode ?? -(r.signal ? os.constants.signals[r.signal] : 1);
    return formatPythonOutput(r.stdout, r.stderr, status);
  };
}
