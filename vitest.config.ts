import { defineConfig, mergeConfig } from 'vitest/config';
import { playwright } from '@vitest/browser-playwright';
import { lavapipeEnv } from './scripts/lavapipe-env.js';
import viteConfig from './vite.config.ts';

// Node WebGPU tests run Dawn on Mesa 25 lavapipe (scripts/setup-system.sh unpacks it). Set here, before
// the test workers fork, so that `npx vitest` works directly.
Object.assign(process.env, lavapipeEnv());

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
