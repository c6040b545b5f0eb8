// Where the headers a Node addon build needs are: node_api.h (next to the running node, or the system's) and
// napi.h (the node-addon-api package). Shared by build-cuda.mjs and build-cuda-emu.mjs.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';

/** { nodeInclude, addonApi } folders, or { missing: why } */
export function nodeHeaders(root) {
  const nodeInclude = [resolve(process.execPath, '../../include/node'), '/usr/include/node', '/usr/local/include/node'].find((d) =>
    existsSync(join(d, 'node_api.h')),
  );
  if (!nodeInclude) return { missing: `node_api.h not found next to ${process.execPath} or in /usr/include/node (install the Node.js headers)` };
  try {
    return { nodeInclude, addonApi: dirname(createRequire(join(root, 'package.json')).resolve('node-addon-api/napi.h')) };
  } catch {
    return { missing: 'node-addon-api is not installed (run npm install)' };
  }
}
