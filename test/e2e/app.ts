/**
 * End-to-end harness: the built app (vite build) served by a plain static server on 127.0.0.1, opened in
 * real headless Debian Chromium through playwright-core (SwiftShader WebGPU), as a user would open it.
 * Screenshots go to .cache/test-output/e2e/ for a person to look at.
 */
import { mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { extname, join, normalize, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, expect } from 'vitest';
import { ISOLATION_HEADERS } from '../../vite.config';

export const SHOTS = resolve('.cache/test-output/e2e');
/**
 * Where this test process builds the app: a folder of its own, since e2e files run in parallel processes and a build
 * empties its folder first (a shared one would vanish under another file's server). A build takes about 3 s.
 */
const DIST = resolve(`.cache/e2e-dist/${process.pid}`);
let built: Promise<string> | null = null;

/** Builds the app once per test process into .cache/e2e-dist/<pid>, removed when the process exits. */
export function buildApp(): Promise<string> {
  built ??= (async () => {
    const { build } = await import('vite');
    await build({ configFile: resolve('vite.config.ts'), logLevel: 'warn', build: { outDir: DIST, emptyOutDir: true } });
    process.once('exit', () => rmSync(DIST, { recursive: true, force: true }));
    return DIST;
  })();
  return built;
}

const MIME: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.svg': 'image/svg+xml', '.png': 'image/png', '.woff2': 'font/woff2', '.zip': 'application/zip',
};

/**
 * Serves `dir` on 127.0.0.1 (a free port); missing files are 404 (not index.html, unlike Vite's dev server). Every
 * response carries the cross-origin isolation headers a host of the build must send (vite.config.ts), so the page's
 * CPU backend runs on threads here as it does there.
 */
export async function serve(dir: string): Promise<{ url: string; close(): Promise<void> }> {
  const root = resolve(dir);
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    let file = normalize(join(root, path));
    if (!file.startsWith(root)) return void res.writeHead(403).end();
    try {
      if (statSync(file).isDirectory()) file = join(file, 'index.html');
      const body = readFileSync(file);
      const type = MIME[extname(file)] ?? 'application/octet-stream';
      res.writeHead(200, { ...ISOLATION_HEADERS, 'content-type': type, 'content-length': body.length });
      res.end(body);
    } catch {
      res.writeHead(404).end('not found');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/`, close: () => new Promise((r) => server.close(() => r())) };
}

const ARGS = [
  '--no-sandbox',
  '--enable-unsafe-webgpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: ARGS, headless: true });
}

/** A screenshot of the page under SHOTS/<name>.png. */
export async function shot(page: Page, name: string): Promise<string> {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** The built app served and a browser launched around a test file's tests (its beforeAll / afterAll). */
export function builtApp(): { browser: () => Browser; url: () => string } {
  let browser: Browser | undefined;
  let server: Awaited<ReturnType<typeof serve>> | undefined;
  beforeAll(async () => {
    server = await serve(await buildApp());
    browser = await launch();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });
  return { browser: () => browser!, url: () => server!.url };
}

/**
 * `body` on a page of a fresh context of the app (at `search`, a query such as `?hub=…`); then no uncaught page error may
 * have happened. The context closes.
 */
export async function withPage(app: ReturnType<typeof builtApp>, body: (page: Page) => Promise<void>, search = ''): Promise<void> {
  const { ctx, page, errors } = await openPage(app.browser(), `${app.url()}${search}`);
  try {
    await body(page);
    expect(errors).toEqual([]);
  } finally {
    await ctx.close();
  }
}

/** A page of a fresh context (own IndexedDB) at `url`, collecting uncaught page errors. */
export async function openPage(
  browser: Browser,
  url: string,
  ctx?: BrowserContext,
): Promise<{ ctx: BrowserContext; page: Page; errors: string[] }> {
  ctx ??= await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  const page = await ctx.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await page.locator('#tab-ask').waitFor();
  return { ctx, page, errors };
}

export const tab = (page: Page, t: 'ask' | 'train' | 'checkpoints' | 'env') => page.locator(`#tab-${t}`).click();

/** The Ask view set to the offline tiny system, 1 round, greedy (and `mode`). */
export async function tinyOneRound(page: Page, mode: 'latent' | 'text' | 'both' = 'latent'): Promise<void> {
  await tab(page, 'ask');
  await page.getByTestId('ask-style').selectOption('tiny');
  await page.getByTestId('ask-rounds').fill('1');
  await page.getByTestId('ask-greedy').check();
  await page.getByTestId('ask-mode').selectOption(mode);
}

/** Asks `question` in the Ask view as it is set (Ctrl+Enter) and waits until every run shows its stats; returns them. */
export async function ask(page: Page, question: string, runs = 1): Promise<string[]> {
  await page.getByRole('textbox', { name: 'question' }).fill(question);
  await page.getByRole('textbox', { name: 'question' }).press('Control+Enter');
  return answered(page, runs);
}

/**
 * After a latent answer, "Ask again with the messages shuffled / zeroed"; waits for the one latent run it gives to
 * show its stats, and returns them.
 */
export async function askAgain(page: Page, kind: 'shuffled' | 'zeroed'): Promise<string> {
  await page.getByTestId(`ask-${kind}`).click();
  // the run of the ablated ask names its ablation; the earlier runs (and their stats) are gone by then
  await expect
    .poll(() => page.locator('#panel-ask [data-testid=run-title]').allTextContents(), { timeout: 20_000 })
    .toEqual([expect.stringMatching(kind === 'zeroed' ? /messages zeroed$/ : /messages from: /)]);
  return (await answered(page, 1))[0]!;
}

/** Waits until `runs` runs of the Ask view show their stats and the status says done; returns the stats. */
async function answered(page: Page, runs: number): Promise<string[]> {
  const stats = page.locator('#panel-ask [data-testid=ask-stats]');
  await expect
    .poll(async () => (await stats.allTextContents()).filter((t) => /s total/.test(t)).length, { timeout: 300_000, interval: 500 })
    .toBe(runs);
  await expect.poll(() => page.getByTestId('ask-status').textContent(), { timeout: 10_000 }).toBe('done');
  return (await stats.allTextContents()).map((t) => t.replace(/\s+/g, ' ').trim());
}
