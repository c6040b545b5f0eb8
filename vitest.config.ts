import { defineConfig, mergeConfig } from 'vitest/config';
import { playwright } from '@vitest/browser-playwright';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import viteConfig from './vite.config.ts';

// Node WebGPU tests run Dawn on Mesa 25 lavapipe (scripts/setup-system.sh unpacks it). Set here, before
// the test workers fork, so that `npx vitest` works without sourcing scripts/env.sh.
const lvp = resolve('.cache/lavapipe25');
if (!process.env.VK_ICD_FILENAMES && existsSync(`${lvp}/lvp_icd.json`)) {
  process.env.VK_ICD_FILENAMES = `${lvp}/lvp_icd.json`;
  process.env.LD_LIBRARY_PATH = [`${lvp}/usr/lib/x86_64-linux-gnu`, process.env.LD_LIBRARY_PATH].filter(Boolean).join(':');
}

// Flags that give headless Debian Chromium a WebGPU adapter (SwiftShader) without network noise.
const chromiumArgs = ['--no-sandbox', '--enable-unsafe-webgpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export default mergeConfig(viteConfig, defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'node',
          include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: ['**/*.browser.test.ts', 'node_modules/**'],
          environment: 'node',
          pool: 'forks',
        },
      },
      {
        extends: true,
        test: {
          name: 'browser',
          include: ['src/**/*.browser.test.ts', 'test/**/*.browser.test.ts'],
          browser: {
            enabled: true,
            headless: true,
            instances: [{ browser: 'chromium' }],
            provider: playwright({ launchOptions: { executablePath: '/usr/bin/chromium', args: chromiumArgs } }),
          },
        },
      },
    ],
  },
}));
