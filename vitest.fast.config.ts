// `npm run test:fast`: the unit and CPU-parity tests in one Node project, in under a minute on two cores. Which files
// and why: test/util/fast-set.ts. `npm test` (vitest.config.ts) runs everything, these included.
import { fileURLToPath } from 'node:url';
import { defineConfig, mergeConfig } from 'vitest/config';
import { fastTestFiles } from './test/util/fast-set.ts';
import viteConfig from './vite.config.ts';

export default mergeConfig(viteConfig, defineConfig({
  test: {
    name: 'fast',
    include: fastTestFiles(fileURLToPath(new URL('.', import.meta.url))),
    environment: 'node',
    pool: 'forks',
    // the files of a worker share loaded modules, which takes a third of the time off; `npm test` isolates each file.
    // A test that passes alone but fails here leaks state into the next file: fix the leak, not the order.
    isolate: false,
    setupFiles: ['test/util/fast-guard.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
}));
