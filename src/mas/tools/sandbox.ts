/**
 * The sandbox model-written code runs in (Node only): Debian's bubblewrap with new user, PID, network, IPC and mount
 * namespaces, a read-only root that holds only /usr (with /bin, /lib…), the interpreter's folders and a fresh /proc and
 * /dev, the work folder as the one writable place (at /sandbox), no network, the environment it is given and nothing
 * else, and rlimits on address space, CPU time, file size and processes. The code runs as uid 65534; run as root, the
 * sandbox's user namespace maps that uid to the host's 65534, because root is exempt from RLIMIT_NPROC. Killing the
 * bwrap process kills the namespace's init, and with it every process in the namespace (a setsid() daemon included).
 * Where none can be made the code is refused (SandboxUnavailable) unless the caller allows unsandboxed code.
 */
import { RmasError } from '../../errors';
import { nodeImport } from '../../util/node-import';

/**
 * No sandbox can be made for model-written code (bubblewrap missing, or user namespaces refused), so none was run:
 * install bubblewrap (`apt-get install bubblewrap`), or pass --allow_unsandboxed_code to run it without one.
 */
export class SandboxUnavailable extends RmasError {
  constructor(message: string) {
    super('SandboxUnavailable', message);
  }
}

export interface SandboxOptions {
  /** Run the code without a sandbox where none can be made (the runner's --allow_unsandboxed_code). */
  allowUnsandboxed?: boolean;
  /** The bwrap binary; default the RMAS_BWRAP environment variable, else `bwrap` on PATH. */
  bwrap?: string;
}

/** Bounds on each sandboxed run (the CPU time follows the run's timeout). */
export const SANDBOX_LIMITS = {
  addressSpaceBytes: 2 * 2 ** 30,
  fileSizeBytes: 64 * 2 ** 20,
  processes: 64,
} as const;

/** Where the work folder appears inside the sandbox. */
export const SANDBOX_WORKDIR = '/sandbox';
const NOBODY = 65534;

/** A command line that runs `argv` in the sandbox, and what to do around the spawn. */
export interface SandboxedCommand {
  file: string;
  args: string[];
  /** A user-namespace fd to pass as the child's fd 3 (root only); closed by `release`. */
  fd3?: number;
  /** The uid that must own the work folder (root only). */
  chownTo?: number;
  release(): Promise<void>;
}

type Fs = typeof import('node:fs/promises');

const bwrapOf = (opts: SandboxOptions) => opts.bwrap ?? process.env.RMAS_BWRAP ?? 'bwrap';

/** The folders `exe` needs, asked of it once: its prefixes and its sys.path, each that exists. */
const interpreterDirs = new Map<string, Promise<string[]>>();
function pythonDirs(exe: string): Promise<string[]> {
  let p = interpreterDirs.get(exe);
  if (!p) {
    p = (async () => {
      const [{ execFile }, fs] = await Promise.all([nodeImport('node:child_process'), nodeImport('node:fs/promises')]);
      const code = 'import sys, json; print(json.dumps([sys.executable, sys.prefix, sys.exec_prefix, ' +
        'sys.base_prefix, sys.base_exec_prefix] + sys.path))';
      const out = await new Promise<string>((resolve) =>
        execFile(exe, ['-c', code], { env: { PATH: '/usr/bin:/bin' }, timeout: 20_000 }, (err, o) => resolve(err ? '[]' : String(o))));
      const found = new Set<string>();
      const candidates = [exe, ...(JSON.parse(out) as string[])];
      for (const c of candidates) {
        if (!c || !c.startsWith('/')) continue;
        const st = await fs.stat(c).catch(() => null);
        if (!st) continue;
        const dir = st.isDirectory() ? c : c.slice(0, c.lastIndexOf('/')) || '/';
        found.add(dir);
        const real = await fs.realpath(dir).catch(() => dir);
        found.add(real);
      }
      return [...found];
    })();
    interpreterDirs.set(exe, p);
  }
  return p;
}

/** The folders every sandbox has read-only (merged-/usr systems have /bin, /lib… as links into /usr). */
const SYSTEM = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
const under = (path: string, root: string) => path === root || path.startsWith(root.endsWith('/') ? root : root + '/');

async function mountArgs(fs: Fs, exe: string, workDir: string): Promise<string[]> {
  const args: string[] = [];
  for (const p of SYSTEM) {
    const st = await fs.lstat(p).catch(() => null);
    if (!st) continue;
    if (st.isSymbolicLink()) args.push('--symlink', await fs.readlink(p), p);
    else args.push('--ro-bind', p, p);
  }
  for (const f of ['/etc/ld.so.cache', '/etc/localtime']) {
    if (await fs.stat(f).catch(() => null)) args.push('--ro-bind', f, f);
  }
  // the interpreter's folders outside /usr (pyenv, a venv), their parents made 0755 (bwrap copies a 0700 /root)
  const dirs = (await pythonDirs(exe)).filter((d) => !SYSTEM.some((s) => under(d, s))).sort();
  const made = new Set<string>();
  for (const d of dirs) {
    if (dirs.some((o) => o !== d && under(d, o))) continue;
    const parts = d.split('/').filter(Boolean);
    for (let i = 1; i < parts.length; i++) {
      const a = '/' + parts.slice(0, i).join('/');
      if (!made.has(a)) args.push('--perms', '0755', '--dir', a);
      made.add(a);
    }
    args.push('--ro-bind', d, d);
  }
  args.push('--proc', '/proc', '--dev', '/dev', '--bind', workDir, SANDBOX_WORKDIR, '--chdir', SANDBOX_WORKDIR);
  return args;
}

/** prlimit's flags for one run (inside the sandbox, so that they bind the code and not bwrap). */
function limitArgs(timeoutMs: number): string[] {
  const cpu = Math.max(1, Math.ceil(timeoutMs / 1000) + 1);
  const L = SANDBOX_LIMITS;
  return [
    '/usr/bin/prlimit', `--as=${L.addressSpaceBytes}`, `--cpu=${cpu}`, `--fsize=${L.fileSizeBytes}`,
    `--nproc=${L.processes}`, '--core=0', '--',
  ];
}

/**
 * Root's sandbox user namespace: uid and gid 0 and 65534 mapped to themselves, so that bwrap (as root) can bind what
 * it reads and the code then runs as the host's 65534, to which RLIMIT_NPROC applies. A held `unshare --user` makes
 * it; the fd keeps it after that process is gone.
 */
async function rootUserNamespace(fs: Fs): Promise<import('node:fs/promises').FileHandle> {
  const { spawn } = await nodeImport('node:child_process');
  const holder = spawn('unshare', ['--user', '--', 'sleep', '60'], { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } });
  try {
    const pid = await new Promise<number>((resolve, reject) => {
      holder.once('error', reject);
      holder.once('spawn', () => resolve(holder.pid!));
    });
    const own = await fs.readlink('/proc/self/ns/user');
    const t0 = Date.now();
    while ((await fs.readlink(`/proc/${pid}/ns/user`).catch(() => own)) === own) {
      if (Date.now() - t0 > 5000 || holder.exitCode !== null) throw new Error('`unshare --user` made no user namespace');
      await new Promise((r) => setTimeout(r, 2));
    }
    const map = `0 0 1\n${NOBODY} ${NOBODY} 1\n`;
    await fs.writeFile(`/proc/${pid}/uid_map`, map);
    await fs.writeFile(`/proc/${pid}/gid_map`, map);
    return await fs.open(`/proc/${pid}/ns/user`, 'r');
  } finally {
    holder.kill('SIGKILL');
  }
}

/**
 * The bwrap command line that runs `argv` (an absolute interpreter path first) in a fresh sandbox around `workDir`
 * with the environment `env`. Does not check that it works (sandboxAvailable does).
 */
export async function sandboxCommand(
  argv: string[], opts: { workDir: string; env: Record<string, string>; timeoutMs: number; bwrap?: string },
): Promise<SandboxedCommand> {
  const fs = await nodeImport('node:fs/promises');
  const root = process.getuid?.() === 0;
  const env = Object.entries({ ...opts.env, TMPDIR: SANDBOX_WORKDIR }).flatMap(([k, v]) => ['--setenv', k, v]);
  const common = [
    '--die-with-parent', '--new-session', ...(await mountArgs(fs, argv[0]!, opts.workDir)),
    '--remount-ro', '/', '--clearenv', ...env,
  ];
  const file = bwrapOf(opts);
  if (!root) {
    return {
      file,
      args: [
        '--unshare-all', '--unshare-user', '--disable-userns', '--uid', `${NOBODY}`, '--gid', `${NOBODY}`, '--as-pid-1',
        ...common, '--', ...limitArgs(opts.timeoutMs), ...argv,
      ],
      release: async () => {},
    };
  }
  const ns = await rootUserNamespace(fs);
  const drop = [
    '/usr/bin/setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--inh-caps=-all', '--bounding-set=-all',
  ];
  return {
    file,
    args: [
      '--userns', '3', '--unshare-pid', '--unshare-net', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try',
      '--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID', ...common, '--', ...drop, ...limitArgs(opts.timeoutMs), ...argv,
    ],
    fd3: ns.fd,
    chownTo: NOBODY,
    release: () => ns.close(),
  };
}
