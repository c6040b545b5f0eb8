#!/usr/bin/env node
// `npx rmas ...`: runs src/runner/cli.ts through tsx in a child Node process, its stderr without Dawn's limit notices
// (bin/dawn-noise.js). The child is needed anyway:
// Dawn needs VK_ICD_FILENAMES, and the Mesa 25 lavapipe (.cache/lavapipe25, scripts/setup-system.sh) its
// own libdrm through LD_LIBRARY_PATH, which the dynamic loader reads only at process start (bench/run.ts
// re-executes itself for the same reason).
import { spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

export { lavapipeEnv };

// run as a program (directly, or through npm's bin link, whose path differs: compare real paths)
const isMain = () => {
  try {
    return !!process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
};
if (isMain()) {
  // tsx resolved from this package, so that `npx rmas` works from any folder
  const tsx = import.meta.resolve('tsx');
  // The child's stderr goes through bin/dawn-noise.js, a process of its own (it outlives this one, so the child's
  // last words get through even if this one is killed), to this one's stderr; the child hears whether that is a
  // terminal (progress then redraws one line).
  const quiet = spawn(process.execPath, [resolve(root, 'bin/dawn-noise.js')], { stdio: ['pipe', 2, 'inherit'] });
  const quietDone = new Promise((done) => quiet.on('close', done));
  // the IPC channel is how the child learns that this process is gone, even killed with SIGKILL (it then exits:
  // src/runner/cli.ts); signals that can be caught are passed on
  const child = spawn(process.execPath, ['--import', tsx, resolve(root, 'src/runner/cli.ts'), ...process.argv.slice(2)], {
    stdio: ['inherit', 'inherit', quiet.stdin, 'ipc'],
    env: { ...lavapipeEnv(), ...(process.stderr.isTTY ? { RMAS_STDERR_TTY: '1' } : {}) },
  });
  // the child holds the pipe now: the filter ends when the child (and anything it started) has closed it
  quiet.stdin.destroy();
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
  child.on('exit', async (code, signal) => {
    // the filter's last lines first, unless a process the child left behind still holds the pipe
    await Promise.race([quietDone, new Promise((done) => setTimeout(done, 2000))]);
    process.exit(code ?? (signal ? 128 + (constants.signals[signal] ?? 1) : 1));
  });
}
