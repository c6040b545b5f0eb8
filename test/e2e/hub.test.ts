/**
 * A released style from the hub to an answer in the page (built app, WebGPU on SwiftShader), from a fresh profile:
 * `?hub=` at the stand-in hub (test/util/hub.ts), sequential_light's tiny released-layout repos
 * (scripts/tiny-system/hub-layout.ts). The plan is shown before anything is fetched; a reload in the middle of the
 * download keeps what was stored and the next ask fetches only the rest; the answer shown is the text `rmas ask --json`
 * writes for the same repos through the same hub. A gated repo shows GatedRepo, a token typed under Environment opens it
 * (and never reaches the CDN); a dropped connection shows DownloadFailed, and asking again goes on.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { buildHubSystem, type HubSystem } from '../../scripts/tiny-system/hub-layout';
import { type StandInHub, startHub } from '../util/hub';
import { rmasInProcess } from '../util/rmas';
import { builtApp, ask, shot, tab, withPage } from './app';

const app = builtApp();
/** Each test loads three agents on SwiftShader, some of them twice: minutes on two busy cores. */
const SLOW = 480_000;
const tmp = mkdtempSync(join(tmpdir(), 'rmas-e2e-hub-'));
const QUESTION = 'What is 2 + 3?';
const LATENT = '4';
let sys: HubSystem;
let hub: StandInHub;
/** The same repos behind a gate. */
let gated: StandInHub;

beforeAll(async () => {
  sys = await buildHubSystem('sequential_light', join(tmp, 'repos'));
  hub = await startHub({ repos: sys.repos, lfsThreshold: 4096 });
  gated = await startHub({ repos: sys.repos.map((r) => ({ ...r, gated: true })), lfsThreshold: 4096 });
}, 120_000);
afterAll(async () => {
  await hub.close();
  await gated.close();
  rmSync(tmp, { recursive: true, force: true });
});

/** What `rmas ask --json` writes as "text" for sequential_light through `h`, as the page asks it (1 round, greedy, the default budget). */
async function runnerText(h: StandInHub, kv: 'f16' | 'f32'): Promise<string> {
  const saved = { ...process.env };
  for (const k of ['HF_HUB_CACHE', 'HF_TOKEN', 'HF_HUB_OFFLINE']) delete process.env[k];
  Object.assign(process.env, { HF_HOME: mkdtempSync(join(tmp, 'home-')), HF_ENDPOINT: h.url }, h === gated ? { HF_TOKEN: h.token } : {});
  try {
    const r = await rmasInProcess('ask', '--style', 'sequential_light', '--question', QUESTION, '--greedy', '--json', '--backend', 'cpu',
      '--num_recursive_rounds', '1', '--latent_length', LATENT, '--kv_dtype', kv);
    expect(r.code, r.err).toBe(0);
    return (JSON.parse(r.out) as { text: string }).text;
  } finally {
    process.env = saved;
  }
}

const pageKv = (page: Page): Promise<'f16' | 'f32'> =>
  page.evaluate(async () => ((await navigator.gpu.requestAdapter())?.features.has('shader-f16') ? 'f16' : 'f32'));

/** The Ask view on a released style (sequential_light unless told), 1 round, greedy, LATENT latent steps. */
async function releasedOneRound(page: Page, style = 'sequential_light') {
  await tab(page, 'ask');
  await page.getByTestId('ask-style').selectOption(style);
  await page.getByTestId('ask-rounds').fill('1');
  await page.getByTestId('ask-beyond').check(); // LATENT is below upstream's slider (8–64), which the page keeps to by default
  await page.getByTestId('ask-latent').fill(LATENT);
  await page.getByTestId('ask-greedy').check();
}

const errorBox = (page: Page) => page.locator('#panel-ask .error-box').first();
/** The page's query that points it at `h`. */
const at = (h: StandInHub) => `?hub=${encodeURIComponent(h.url)}`;

/** Asks QUESTION of sequential_light as releasedOneRound sets it, and waits for the error it shows: its name and message. */
async function askUntilError(page: Page, timeout = 60_000, style?: string): Promise<{ name: string | null; message: string | null }> {
  await releasedOneRound(page, style);
  await page.getByRole('textbox', { name: 'question' }).fill(QUESTION);
  await page.getByTestId('ask-button').click();
  await errorBox(page).waitFor({ timeout });
  return { name: await errorBox(page).getAttribute('data-error-name'), message: await errorBox(page).locator('.msg').textContent() };
}
const shownText = (page: Page) => page.locator('#panel-ask .run[data-mode=latent]').getByTestId('answer-text').textContent();
/** The URLs the page's model cache (IndexedDB 'rmas-models', shared with its worker) holds complete. */
const storedComplete = (page: Page): Promise<string[]> =>
  page.evaluate(async () => {
    // opening a database that does not exist yet would create it without the cache's object store: only look
    if (!(await indexedDB.databases()).some((d) => d.name === 'rmas-models')) return [];
    return new Promise<string[]>((resolve, reject) => {
      const open = indexedDB.open('rmas-models');
      open.onerror = () => reject(open.error);
      open.onsuccess = () => {
        const db = open.result;
        if (!db.objectStoreNames.contains('files')) return resolve([]);
        const out: string[] = [];
        const cursor = db.transaction('files').objectStore('files').openCursor();
        cursor.onsuccess = () => {
          const c = cursor.result;
          if (!c) return resolve(out);
          const v = c.value as { url?: string; complete?: boolean };
          if (String(c.key).startsWith('m|') && v.complete && v.url) out.push(v.url);
          c.continue();
        };
      };
    });
  });

describe.sequential('a released style from the hub in the page (built app, WebGPU)', () => {
  test('plan, download, a reload mid-way that keeps what was stored, the answer rmas ask writes for the same repos', async () => {
    await withPage(app, async (page) => {
      // the largest file comes slowly, so that the reload lands in the middle of the download
      const files = sys.repos.flatMap((r) => readdirSync(r.dir).map((f) => ({ repo: r.id, f, size: statSync(join(r.dir, f)).size })));
      const big = files.reduce((a, b) => (b.size > a.size ? b : a));
      hub.fault({ kind: 'slow', file: big.f, repo: big.repo, bytesPerSecond: 20_000, times: 4 });
      await releasedOneRound(page);
      await page.getByRole('textbox', { name: 'question' }).fill(QUESTION);
      const from = hub.log.length;
      await page.getByTestId('ask-button').click();
      await expect.poll(() => page.getByTestId('ask-plan').textContent(), { timeout: 60_000 })
        .toMatch(/^will download [\d.]+ (KiB|MiB) · needs about [\d.]+ (KiB|MiB) of GPU memory$/);
      await expect.poll(() => hub.log.slice(from).some((q) => q.file === big.f && q.repo === big.repo && q.server === 'cdn' && q.bytes > 0),
        { timeout: 60_000 }).toBe(true);
      // what the model cache holds complete when the page goes away
      await expect.poll(async () => (await storedComplete(page)).length, { timeout: 60_000 }).toBeGreaterThan(0);
      const kept = await storedComplete(page);
      await shot(page, 'hub-downloading');
      await page.reload();
      await page.locator('#tab-ask').waitFor();

      // the settings came back from the URL; asked again, no file stored before the reload is fetched again (the plan's
      // one-byte size probes of the others aside)
      await releasedOneRound(page);
      const again = hub.log.length;
      await ask(page, QUESTION);
      const refetched = hub.log.slice(again)
        .filter((q) => q.method === 'GET' && q.bytes > 1 && kept.includes(`${hub.url}/${q.repo}/resolve/main/${q.file}`));
      expect(refetched.map((q) => q.file)).toEqual([]);
      expect((await storedComplete(page)).length).toBeGreaterThan(kept.length);
      const shown = await shownText(page);
      expect(shown).toBe(await runnerText(hub, await pageKv(page)));
      // the browser never sent a token (none is set), and the large files came from the CDN
      expect(hub.log.every((q) => q.authorization === null)).toBe(true);
      expect(hub.log.some((q) => q.server === 'cdn')).toBe(true);
      await shot(page, 'hub-answer');

      // cache only: after a reload (a fresh engine), the same question asks nothing of the hub; a style never fetched is HubOffline
      await tab(page, 'env');
      await page.getByTestId('hub-cache-only').check();
      await expect.poll(() => page.getByTestId('hub-status').textContent()).toMatch(/, cache only\./);
      await page.reload();
      await page.locator('#tab-ask').waitFor();
      const quiet = hub.log.length;
      await releasedOneRound(page);
      await ask(page, QUESTION);
      expect(await shownText(page)).toBe(shown);
      expect(hub.log.length).toBe(quiet);
      const offline = await askUntilError(page, 60_000, 'mixture');
      expect(offline.name).toBe('HubOffline');
      expect(offline.message).toMatch(/^offline mode is on \(HF_HUB_OFFLINE, or the page's cache-only mode\): .* was not requested$/);
      expect(hub.log.length).toBe(quiet);
    }, at(hub));
  }, SLOW);

  test('a gated repo shows GatedRepo; the token typed under Environment opens it and never reaches the CDN', async () => {
    await withPage(app, async (page) => {
      const repo = sys.repos[0]!.id;
      expect(await askUntilError(page)).toEqual({
        name: 'GatedRepo',
        message: `${repo} is gated or private (HTTP 401): accept its terms on ${gated.url}/${repo} with your account, then give an ` +
          'access token that can read it (HF_TOKEN for the runner, the token field under Environment in the page)',
      });

      await tab(page, 'env');
      await page.getByTestId('hub-token').fill(gated.token);
      await page.getByTestId('hub-token').press('Enter');
      await expect.poll(() => page.getByTestId('hub-status').textContent()).toMatch(/with an access token.*token saved\.$/s);
      const from = gated.log.length;
      await releasedOneRound(page);
      await ask(page, QUESTION);
      expect(await shownText(page)).toBe(await runnerText(gated, await pageKv(page)));
      const seen = gated.log.slice(from).filter((q) => q.method !== 'OPTIONS');
      expect(seen.filter((q) => q.server === 'hub').every((q) => q.authorization === `Bearer ${gated.token}`)).toBe(true);
      expect(seen.filter((q) => q.server === 'cdn').map((q) => q.authorization)).toEqual(
        seen.filter((q) => q.server === 'cdn').map(() => null),
      );
      expect(seen.some((q) => q.server === 'cdn')).toBe(true);
      // the token is nowhere on the page
      expect(await page.content()).not.toContain(gated.token);
    }, at(gated));
  }, SLOW);

  test('a connection dropped once is asked again unseen; dropped three times it is DownloadFailed, and asking again goes on', async () => {
    await withPage(app, async (page) => {
      const [critic, solver] = [sys.repos[1]!.id, sys.repos[2]!.id];
      hub.fault({ kind: 'drop', file: 'tokenizer.json', repo: critic, afterBytes: 1000 });
      hub.fault({ kind: 'drop', file: 'tokenizer.json', repo: solver, afterBytes: 1000, times: 3 });
      const shown = await askUntilError(page, 120_000);
      expect(shown.name).toBe('DownloadFailed');
      expect(shown.message).toMatch(new RegExp(
        `^${hub.url}/${solver}/resolve/main/tokenizer\\.json: the connection dropped while reading bytes 0-\\d+ \\(.*\\); ` +
          'load again: the chunks read so far are kept$',
      ));
      // requests that stopped at the drop's 1000 bytes although more was asked for
      const asked = (range: string | null) =>
        (range ? Number(/-(\d+)$/.exec(range)?.[1] ?? Infinity) - Number(/=(\d+)/.exec(range)![1]) + 1 : Infinity);
      const cut = (repo: string) =>
        hub.log.filter((q) => q.repo === repo && q.file === 'tokenizer.json' && q.bytes === 1000 && asked(q.range) > 1000).length;
      expect([cut(critic), cut(solver)]).toEqual([1, 3]);
      await ask(page, QUESTION);
      expect(await shownText(page)).toBe(await runnerText(hub, await pageKv(page)));
    }, at(hub));
  }, SLOW);
});
