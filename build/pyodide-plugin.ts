/**
 * A Vite plugin that copies the Pyodide runtime files into the build as `pyodide/…`, unhashed and
 * side by side, where workers/python.worker.ts looks for them outside dev (Pyodide finds its .wasm,
 * stdlib and lock file by name next to pyodide.asm.mjs). Add it to vite.config.ts `plugins`.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Plugin } from 'vite';

export const PYODIDE_FILES = ['pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide-lock.json'];

export function pyodideAssets(): Plugin {
  return {
    name: 'rmas-pyodide-assets',
    apply: 'build',
    generateBundle() {
      const dir = dirname(createRequire(import.meta.url).resolve('pyodide/package.json'));
      for (const f of PYODIDE_FILES) {
        this.emitFile({ type: 'asset', fileName: `pyodide/${f}`, source: readFileSync(join(dir, f)) });
      }
    },
  };
}
