/**
 * Set up before every file of `npm run test:fast` (vitest.fast.config.ts): starting a process or loading Dawn fails
 * the test with what to do, so a test that needs either cannot stay in the fast set unnoticed, even when it reaches
 * them through the library (the runner's default backend is WebGPU where Dawn loads). test/test-fast.test.ts checks
 * the same statically, in `npm test`.
 */
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import { vi } from 'vitest';

const refuse = (what: string) => () => {
  throw new Error(`npm run test:fast runs no ${what}: name the test *.gpu.test.ts, or move it out of the fast set (test/util/fast-set.ts)`);
};

for (const name of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork'] as const)
  Object.assign(childProcess, { [name]: refuse(`child processes (${name})`) });
syncBuiltinESMExports(); // so that `import { spawn } from 'node:child_process'` sees the refusal too

// src/gpu/device.ts loads Dawn through this package; a plain Error (not WebGpuUnavailable) so that no caller falls
// back to the CPU quietly
vi.mock('webgpu', () => ({ globals: {}, create: refuse('WebGPU (Dawn)') }));
