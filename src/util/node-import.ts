/**
 * Modules only Node loads (its built-ins, Dawn), imported lazily by code that also runs in a page. The
 * name reaches import() as a parameter, so bundlers (Vite) neither resolve nor bundle it for the browser;
 * the page only fails if it calls the Node-only path.
 */
interface NodeModules {
  'node:child_process': typeof import('node:child_process');
  'node:crypto': typeof import('node:crypto');
  'node:fs/promises': typeof import('node:fs/promises');
  'node:os': typeof import('node:os');
  'node:path': typeof import('node:path');
  'node:url': typeof import('node:url');
  'node:zlib': typeof import('node:zlib');
  webgpu: typeof import('webgpu');
}

/** `await nodeImport('node:fs/promises')` is `await import('node:fs/promises')`, hidden from bundlers. */
export function nodeImport<K extends keyof NodeModules>(name: K): Promise<NodeModules[K]> {
  return import(/* @vite-ignore */ name) as Promise<NodeModules[K]>;
}
