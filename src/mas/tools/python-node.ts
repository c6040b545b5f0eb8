/**
 * The Python tool in Node: each call is a fresh `python3` process in a fresh temporary folder with
 * a stripped environment, killed (with its process group) on timeout or abort.
 * Node built-ins are imported inside the call so that the folder's index stays importable in a page.
 */
import type { ToolRunners } from './loop';
import { ABORTED_TEXT, formatPythonOutput, PYTHON_PRELUDE, timeoutText } from './python-format';

/** Output kept per stream; beyond it a runaway print loop would only grow memory (results are cut to 6000 chars anyway). */
const MAX_STREAM_CHARS = 1 << 20;

/** Node runner: a fresh `python3` subprocess per call (see the module comment); never throws for tool failures. */
export function nodePythonRunner(opts: { python?: string } = {}): ToolRunners['python'] {
  const python = opts.python ?? 'python3';
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: process.env.LANG ?? 'C.UTF-8' };
  // Version-manager shims (pyenv, asdf) cost about a second per start; the interpreter they lead
  // to is asked for once and started directly afterwards. On any failure `python` itself is used.
  let interpreter: Promise<string> | null = null;
  const resolveInterpreter = (execFile: typeof import('node:child_process').execFile) =>
    (interpreter ??= new Promise<string>((resolve) => {
      execFile(python, ['-c', 'import sys; print(sys.executable)'], { env, timeout: 20_000 }, (err, out) => {
        const exe = String(out ?? '').trim();
        resolve(!err && exe ? exe : python);
      });
    }));

  return async (code, { timeoutMs, signal }) => {
    if (signal?.aborted) return ABORTED_TEXT;
    const [{ spawn, execFile }, fs, os, path] = await Promise.all([
      import('node:child_process'),
      import('node:fs/promises'),
      import('node:os'),
      import('node:path'),
    ]);
    const exe = await resolveInterpreter(execFile);
    if (signal?.aborted) return ABORTED_TEXT;
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'rmas-python-'));
    try {
      return await new Promise<string>((resolve) => {
        // the script goes in on stdin (`python3 -`): no argument-length limit, tracebacks say <stdin>
        const child = spawn(exe, ['-'], {
          cwd: dir,
          env,
          stdio: ['pipe', 'pipe', 'pipe'],
          detached: true, // own process group, so that a kill also reaches anything the code started
        });
        let stdout = '';
        let stderr = '';
        let settled = false;
        const finish = (text: string) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(text);
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
          finish(ABORTED_TEXT);
        };
        const timer = setTimeout(() => {
          kill();
          finish(timeoutText(timeoutMs));
        }, timeoutMs);
        signal?.addEventListener('abort', onAbort, { once: true });

        child.stdout.setEncoding('utf8').on('data', (s: string) => {
          if (stdout.length < MAX_STREAM_CHARS) stdout += s;
        });
        child.stderr.setEncoding('utf8').on('data', (s: string) => {
          if (stderr.length < MAX_STREAM_CHARS) stderr += s;
        });
        child.on('error', (err: NodeJS.ErrnoException) => {
          finish(
            err.code === 'ENOENT'
              ? `[error] The Python tool is unavailable: the interpreter \`${python}\` was not found. ` +
                  'Install Python 3 (for example `apt-get install python3`, or from python.org) ' +
                  'or pass its path as nodePythonRunner({ python: "/path/to/python3" }).'
              : `[error] The Python tool could not start \`${python}\`: ${err.message}`,
          );
        });
        // 'close' waits for the streams to drain, so the output is complete
        child.on('close', (status, sig) => {
          // killed by a signal: Python's subprocess convention, minus the signal number
          const code = status ?? -(sig ? os.constants.signals[sig] : 1);
          finish(formatPythonOutput(stdout, stderr, code));
        });
        child.stdin.on('error', () => {}); // EPIPE when the process exits before reading its script
        child.stdin.end(PYTHON_PRELUDE + code + '\n');
      });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  };
}
