/**
 * `npm start` on a fresh clone: the dev server starts with no dependency cache (a new RMAS_VITE_CACHE_DIR, as a
 * clone has no node_modules/.vite), the user opens the page and asks as soon as it shows (within seconds), on WebGPU,
 * and the answer arrives: the page never reloads under them (vite.config.ts pre-bundles what the page and its
 * workers import) and the dev server never re-optimises. The answer is the one rmas ask --json writes for the
 * page's offline system (style tiny_distillation, models/tiny-system.json) on the same question.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, describe, expect, test } from 'vitest';
import { priceSplit } from '../../src/eval/tiny-prices';
import { CpuBackend } from '../../src/tensor/cpu';
import { runAsk } from '../mas/ask-util';
import { launch, openPage, tinyOneRound } from './app';

const cache = mkdtempSync(join(tmpdir(), 'rmas-vite-cache-'));
let vite: ChildProcess | null = null;
let browser: Browser | null = null;
let log = '';
/** The page's offline system, as the runner names it, and a question of its task's test split (src/eval/tiny-prices.ts). */
const STYLE = 'tiny_distillation';
const QUESTION = priceSplit('test')[0]!.question;

afterAll(async () => {
  await browser?.close();
  vite?.kill();
  rmSync(cache, { recursive: true, force: true });
});

function withoutColor(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { FORCE_COLOR: _force, ...rest } = env;
  return rest;
}

const plain = (s: string): string => s.replace(/\u001b\[[0-9;]*m/g, '');

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

describe('the dev server on a fresh clone', () => {
  test('the first visit is the last load: ask as soon as it shows, the answer arrives, no reload', async () => {
    const port = await freePort();
    vite = spawn(process.execPath, ['node_modules/vite/bin/vite.js', '--host', '127.0.0.1', '--port', String(port), '--strictPort'], {
      env: { ...withoutColor(process.env), NO_COLOR: '1', RMAS_VITE_CACHE_DIR: cache },
    });
    // CI's environment may force colours: the log is read without its escape codes, so that /Local:/ and the
    // reload patterns below see the words vite wrote
    vite.stdout!.on('data', (d) => (log += plain(String(d))));
    vite.stderr!.on('data', (d) => (log += plain(String(d))));
    await expect.poll(() => log, { timeout: 60_000, interval: 200 }).toMatch(/Local:/);
    browser = await launch();
    const { ctx, page, errors } = await openPage(browser, `http://127.0.0.1:${port}/`);
    const loaded = Date.now(); // openPage returns once the page has loaded and shows its tabs
    try {
      // a reload would start a new document: no second load event, and this document's mark survives
      let loads = 0;
      page.on('load', () => loads++);
      await page.evaluate(() => ((globalThis as { rmasFirstDocument?: boolean }).rmasFirstDocument = true));
      await tinyOneRound(page);
      await page.getByRole('textbox', { name: 'question' }).fill(QUESTION);
      await page.getByRole('textbox', { name: 'question' }).press('Control+Enter');
      // the ask goes in while the dev server could still be discovering what the page imports (its re-optimisation
      // and reload came within seconds of the first load before vite.config.ts pre-bundled); the steps above take
      // under a second on an idle machine and 2.7 s were seen under CI's load: the bound says "as soon as the page
      // shows", not how fast the machine is
      expect(Date.now() - loaded).toBeLessThan(5_000);
      const stats = page.locator('#panel-ask [data-testid=ask-stats]');
      await expect
        .poll(async () => `${await stats.textContent()} | ${await page.getByTestId('ask-status').textContent()}`, {
          timeout: 150_000,
          interval: 500,
        })
        .toMatch(/s total on webgpu/);
      const want = await runAsk(
        {
          style: STYLE,
          question: QUESTION,
          num_recursive_rounds: '1',
          greedy: true,
          json: true,
        },
        new CpuBackend('f32'),
      );
      expect(want.error).toBeNull();
      expect(await page.getByTestId('answer-text').textContent()).toBe((JSON.parse(want.out) as { text: string }).text);
      expect(loads).toBe(0);
      expect(await page.evaluate(() => (globalThis as { rmasFirstDocument?: boolean }).rmasFirstDocument)).toBe(true);
      expect(log).not.toMatch(/reloading|new dependencies optimized|optimized dependencies changed/);
      expect(errors).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 240_000);
});
