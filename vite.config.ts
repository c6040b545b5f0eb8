import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';
import { pyodideAssets } from './build/pyodide-plugin.ts';
import { tinySystemAssets } from './build/tiny-system-plugin.ts';

// Cross-origin isolation, so that the engine worker has SharedArrayBuffer and the CPU backend's kernels run on threads
// (src/kernels/matmul/wasm-threads.ts): the dev server and the preview send these on every response, workers included;
// a host serving the build must too (public/_headers says so for hosts that read it). Everything the page fetches from
// other origins (the hub, datasets) is a CORS request, which require-corp allows.
export const ISOLATION_HEADERS = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

export default defineConfig({
  server: { headers: ISOLATION_HEADERS },
  preview: { headers: ISOLATION_HEADERS },
  // pyodideAssets copies the Pyodide runtime next to the built worker (the deliberation Python tool)
  plugins: [svelte(), pyodideAssets(), tinySystemAssets()],
  build: {
    target: 'es2022',
    // the `webgpu` package (Dawn for Node) must never be bundled into the page
    rollupOptions: { external: ['webgpu'], input: { main: 'index.html', bench: 'bench.html', peer: 'peer.html' } },
  },
  // Every dependency the page and its workers import is pre-bundled when the dev server starts. The scanner
  // crawls index.html but not the workers (started by new Worker(new URL(…))), so they are entries too:
  // otherwise the first visit finds @huggingface/transformers in the engine worker, re-optimises and reloads
  // the page under the user (test/e2e/dev-server.test.ts).
  optimizeDeps: {
    entries: ['index.html', 'bench.html', 'peer.html', 'workers/*.worker.ts'],
    exclude: ['webgpu'],
    include: ['comlink', 'pyodide', 'idb-keyval', '@huggingface/transformers', '@huggingface/gguf', 'marked', 'katex'],
  },
  // a test starts the dev server on a cache folder of its own, as a fresh clone has none
  ...(process.env.RMAS_VITE_CACHE_DIR ? { cacheDir: process.env.RMAS_VITE_CACHE_DIR } : {}),
  worker: { format: 'es' },
});
