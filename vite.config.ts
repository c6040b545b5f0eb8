import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';

export default defineConfig({
  plugins: [svelte()],
  build: {
    target: 'es2022',
    // the `webgpu` package (Dawn for Node) must never be bundled into the page
    rollupOptions: { external: ['webgpu'], input: { main: 'index.html', bench: 'bench.html' } },
  },
  // comlink pre-bundled up front, so Vite does not re-optimise in the middle of a browser test run
  optimizeDeps: { exclude: ['webgpu'], include: ['comlink'] },
  worker: { format: 'es' },
});
