import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';

export default defineConfig({
  plugins: [svelte()],
  // the `webgpu` package (Dawn for Node) must never be bundled into the page
  build: { target: 'es2022', rollupOptions: { external: ['webgpu'] } },
  optimizeDeps: { exclude: ['webgpu'] },
  worker: { format: 'es' },
});
