import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { pyodideAssets } from './src/mas/tools/pyodide-vite-plugin.ts';
import { tinySystemAssets } from './build/tiny-system-plugin.ts';

export default defineConfig({
  // pyodideAssets copies the Pyodide runtime next to the built worker (the deliberation Python tool)
  plugins: [svelte(), pyodideAssets(), tinySystemAssets()],
  build: {
    target: 'es2022',
    // the `webgpu` package (Dawn for Node) must never be bundled into the page
    rollupOptions: { external: ['webgpu'], input: { main: 'index.html', bench: 'bench.html' } },
  },
  // comlink and pyodide pre-bundled up front, so Vite does not re-optimise in the middle of a browser test run
  optimizeDeps: { exclude: ['webgpu'], include: ['comlink', 'pyodide', 'idb-keyval'] },
  worker: { format: 'es' },
});
