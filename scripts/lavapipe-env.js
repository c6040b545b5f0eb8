// The environment with Dawn pointed at the Mesa 25 lavapipe that scripts/setup-system.sh unpacks into
// .cache/lavapipe25, unless the caller already chose a Vulkan driver. LD_LIBRARY_PATH (for lavapipe's own
// libdrm) is read by the dynamic loader only at process start, so callers apply this to a child process
// (bin/rmas.js, bench/run.ts) or before test workers fork (vitest.config.ts).
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** @param {NodeJS.ProcessEnv} env */
export function lavapipeEnv(env = process.env) {
  const lvp = resolve(root, '.cache/lavapipe25');
  if (env.VK_ICD_FILENAMES || !existsSync(`${lvp}/lvp_icd.json`)) return env;
  return {
    ...env,
    VK_ICD_FILENAMES: `${lvp}/lvp_icd.json`,
    LD_LIBRARY_PATH: [`${lvp}/usr/lib/x86_64-linux-gnu`, env.LD_LIBRARY_PATH].filter(Boolean).join(':'),
  };
}
