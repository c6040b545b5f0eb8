// What the two CUDA addon builds (build-cuda.mjs, build-cuda-emu.mjs) look up: a program on PATH, and the
// headers a Node addon needs: node_api.h (next to the running node, or the system's) and napi.h (node-addon-api).
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { delimiter, dirname, join, resolve } from 'node:path';

/** The path of `cmd` in a folder of PATH, then of `extra`; null when none has it. */
export function which(cmd, extra = []) {
  for (const d of [...(process.env.PATH ?? '').split(delimiter), ...extra]) {
    if (d && existsSync(join(d, cmd))) return join(d, cmd);
  }
  return null;
}

/** { nodeInclude, addonApi } folders, or { missing: why } */
export function nodeHeaders(root) {
  const nodeInclude = [resolve(process.execPath, '../../include/node'), '/usr/include/node', '/usr/local/include/node'].find((d) =>
    existsSync(join(d, 'node_api.h')),
  );
  if (!nodeInclude)
    return { missing: `node_api.h not found next to ${process.execPath} or in /usr/include/node (install the Node.js headers)` };
  try {
    return { nodeInclude, addonApi: dirname(createRequire(join(root, 'package.json')).resolve('node-addon-api/napi.h')) };
  } catch {
    return { missing: 'node-addon-api is not installed (run npm install)' };
  }
}
