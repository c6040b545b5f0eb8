/**
 * peer.html driven headlessly: the Vite dev server on the repository (what `npm start` serves, so the page finds
 * models/tiny and .cache/peer as a person's browser does) and Debian's Chromium through playwright-core
 * (SwiftShader WebGPU). The page runs both engines; this only calls window.rmasPeer.run and returns its report.
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, type Page, chromium } from 'playwright-core';
import type { PeerOptions, PeerReport } from '../src/ui/peer-run';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM_ARGS = ['--no-sandbox', '--enable-unsafe-webgpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export interface PeerPage {
  page: Page;
  url: string;
  run(opts: Partial<PeerOptions>): Promise<PeerReport>;
  close(): Promise<void>;
}

/** The Vite dev server on the repository, its dependency cache in `cacheDir` (so that it never races another server's). */
export async function startPeerServer(cacheDir = join(ROOT, '.cache/peer-vite')): Promise<{ url: string; close(): Promise<void> }> {
  const { createServer } = await import('vite');
  const server = await createServer({
    configFile: join(ROOT, 'vite.config.ts'), root: ROOT, cacheDir,
    logLevel: 'error', server: { host: '127.0.0.1', port: 0, hmr: false, strictPort: false },
  });
  try {
    await server.listen();
  } catch (e) {
    await server.close();
    throw e;
  }
  return { url: server.resolvedUrls!.local[0]!, close: () => server.close() };
}

/** A fresh headless Chromium on `base`peer.html, once the page is ready; closing it closes the browser. */
export async function openPeerPageAt(base: string, log: (line: string) => void = () => {}): Promise<PeerPage & { browser: Browser }> {
  const url = `${base}peer.html`;
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS });
  try {
    const page = await browser.newPage();
    page.on('pageerror', (e) => log(`page error: ${e.message}`));
    page.on('console', (m) => { if (m.type() === 'error') log(`page console: ${m.text()}`); });
    // the engine's overrides (the GEMV, GEMM and row cuts, the batch size), as Node's environment gives them
    for (const name of ['RMAS_GEMV', 'RMAS_GEMM', 'RMAS_ROWS', 'RMAS_MAX_BATCH']) {
      const v = process.env[name];
      if (v) await page.addInitScript(([n, x]) => { (globalThis as Record<string, unknown>)[n!] = x; }, [name, v]);
    }
    await page.goto(url);
    await page.waitForFunction(() => !!window.rmasPeer, null, { timeout: 120_000 });
    return {
      page, url, browser,
      run: (o) => page.evaluate((o2) => window.rmasPeer!.run(o2), o),
      close: () => browser.close(),
    };
  } catch (e) {
    await browser.close();
    throw e;
  }
}

/**
 * Starts the dev server (startPeerServer) and a browser on peer.html; page errors and the page's console errors go
 * to `log`.
 */
export async function openPeerPage(opts: { cacheDir?: string; log?: (line: string) => void } = {}): Promise<PeerPage> {
  const server = await startPeerServer(opts.cacheDir);
  try {
    const p = await openPeerPageAt(server.url, opts.log);
    return {
      ...p,
      async close() {
        await p.close();
        await server.close();
      },
    };
  } catch (e) {
    await server.close();
    throw e;
  }
}
