/**
 * End-to-end: the built playground in headless Chromium, as a user drives it, on the CPU fallback (a browser
 * without WebGPU): asking (and asking again with the messages shuffled or zeroed), evaluating, training, the
 * checkpoint registry, a full disk, a dead worker. The offline system is tiny_distillation (models/tiny-system.json),
 * whose answers `npm run tiny:eval` recorded in models/tiny/distillation/eval.json with the same engine on the CPU.
 * The page's default backend, WebGPU, is driven by test/e2e/webgpu.test.ts. Screenshots land in .cache/test-output/e2e/.
 */
import { readFileSync } from 'node:fs';
import type { BrowserContext, Page } from 'playwright-core';
import { describe, expect, test } from 'vitest';
import { priceSplit } from '../../src/eval/tiny-prices';
import { importBundle } from '../../src/store/bundle';
import { DEFAULT_ROW } from '../../src/ui/offline';
import { ask, askAgain, builtApp, openPage, shot, tab, tinyOneRound } from './app';

const app = builtApp();
/** The offline system's test split (src/eval/tiny-prices.ts). */
const TEST = priceSplit('test');

/**
 * What `npm run tiny:eval` recorded for a config (1 round, greedy, the style's 4 latent steps, CPU): each test row's
 * text and whether it scored right. shuffled1 sends row i + 1's messages on row i, as the page's shuffle does.
 */
function recorded(config: 'latent1' | 'shuffled1' | 'zeroed1'): { answers: string[]; ok: boolean[] } {
  const file = JSON.parse(readFileSync('models/tiny/distillation/eval.json', 'utf8')) as {
    results: { config: string; answers: string[]; ok: boolean[] }[];
  };
  const r = file.results.find((x) => x.config === config);
  if (!r)
    throw new Error(`models/tiny/distillation/eval.json has no ${config}; write it with npm run tiny:eval -- --json FILE`);
  return r;
}
/** The first export of the trained checkpoint (test 4), re-imported by tests 6 and 7. */
let exported: Buffer | null = null;

const open = (ctx?: BrowserContext) => openPage(app.browser(), app.url(), ctx);

/** Environment → the CPU backend (the checkbox, or the automatic fallback when there is no WebGPU). */
async function useCpu(page: Page): Promise<void> {
  await tab(page, 'env');
  const box = page.getByTestId('use-cpu');
  const fallback = page.getByTestId('webgpu-unavailable');
  await expect.poll(async () => (await box.count()) + (await fallback.count()), { timeout: 30_000 }).toBeGreaterThan(0);
  if (await box.count()) await box.check();
  await expect(page.locator('#panel-env [data-testid=backend]').first().textContent()).resolves.toMatch(/cpu/);
}

/** Ask → the offline tiny system, 1 round, greedy; Ctrl+Enter; waits for the stats line. Returns its text. */
async function askTiny(page: Page, question: string): Promise<string> {
  await tinyOneRound(page);
  return (await ask(page, question))[0]!;
}

/** The states of the ask panel's stage cells (not its rows of texts or hand-offs). */
async function timelineStates(page: Page): Promise<string[]> {
  return page.locator('#panel-ask [data-testid=timeline] td[data-cell]')
    .evaluateAll((tds) => tds.map((td) => td.getAttribute('data-state') ?? ''));
}

/** Names of the checkpoints listed in the Checkpoints view (after it has read the registry). */
async function listed(page: Page): Promise<string[]> {
  await tab(page, 'checkpoints');
  const list = page.locator('#panel-checkpoints');
  await expect
    .poll(async () => (await list.getByTestId('checkpoint-list').count()) + (await list.getByTestId('no-checkpoints').count()), {
      timeout: 20_000,
    })
    .toBeGreaterThan(0);
  return list.locator('[data-testid=checkpoint-list] tbody tr td.name').evaluateAll((tds) => tds.map((td) => td.textContent!.trim()));
}

async function importInto(page: Page, name: string, bytes: Buffer): Promise<void> {
  await tab(page, 'checkpoints');
  await page.getByTestId('ckpt-import').setInputFiles({ name, mimeType: 'application/zip', buffer: bytes });
}

/** Clicks export on the row `id` and returns the downloaded file's bytes. */
async function exportRow(page: Page, id: string): Promise<{ bytes: Buffer; name: string }> {
  const [dl] = await Promise.all([
    page.waitForEvent('download', { timeout: 20_000 }),
    page.locator(`tr[data-id="${id}"] [data-action=export]`).click(),
  ]);
  return { bytes: readFileSync((await dl.path())!), name: dl.suggestedFilename() };
}

/** Eight rows in upstream's distillation columns (the expert's note, the learner's answer) at another shop's prices. */
const shop = Array.from({ length: 8 }, (_, i) => {
  const [n, price] = [2 + i, 3 + (i % 4)];
  return JSON.stringify({
    question: `Eva buys ${n} plums. How many coins does she pay?`,
    distill_expert: `${price} coins per plum.`,
    distill_learner: `\\boxed{${n * price}}`,
  });
}).join('\n');

describe.sequential('playground end to end (built app, CPU backend)', () => {
  test('1. ask the offline tiny system: answer, every stage done, timing; again with the messages shuffled and zeroed', async () => {
    const { ctx, page, errors } = await open();
    try {
      await useCpu(page);
      // the question Ask opens with (test split row DEFAULT_ROW): the recorded 1-round latent run (eval.json, the
      // style's 4 latent steps) answers it right; the page, on the same engine's CPU backend, must write the same text
      const [row, next] = [TEST[DEFAULT_ROW]!, TEST[DEFAULT_ROW + 1]!];
      const want = recorded('latent1');
      expect(want.ok[DEFAULT_ROW]).toBe(true);
      await tinyOneRound(page);
      await expect(page.getByRole('textbox', { name: 'question' }).inputValue()).resolves.toBe(row.question);
      const stats = (await ask(page, row.question))[0]!;
      const states = await timelineStates(page);
      expect(states.length).toBe(2); // 1 round × expert, learner
      expect(states.every((s) => s === 'done')).toBe(true);
      const m = /(\d+) tokens .* ([\d.]+) s total/.exec(stats);
      expect(m, stats).not.toBeNull();
      expect(Number(m![1])).toBeGreaterThan(0);
      expect(Number(m![2])).toBeGreaterThan(0);
      expect((await page.locator('#panel-ask .answer .md').textContent())!).toContain(`\\boxed{${row.answer_value}}`);
      console.log(`[e2e] ask: ${stats}`);
      // Ask's device is Environment's choice; the question and its answer are in the page's history until Clear
      await expect(page.getByTestId('ask-device').inputValue()).resolves.toBe('cpu');
      const entry = page.locator('#panel-ask [data-testid=history-entry]');
      expect(await entry.count()).toBe(1);
      await expect(entry.locator('.question').textContent()).resolves.toBe(row.question);
      await expect(entry.locator('.meta').textContent()).resolves.toMatch(
        /tiny distillation \(offline\) · latent · 1 round · 4 latent steps · greedy · cpu$/,
      );
      await expect(entry.getByTestId('history-answer').textContent()).resolves.toBe(String(row.answer_value));
      await expect(entry.getByTestId('history-text').textContent()).resolves.toBe(want.answers[DEFAULT_ROW]);
      await shot(page, 'ask');

      // the same question with the next row's messages, then with zeros: the texts the tiny eval recorded for them
      const shuffled = await askAgain(page, 'shuffled');
      expect(shuffled).toContain(`messages from: ${next.question} ·`);
      await expect(page.getByTestId('run-title').textContent()).resolves.toBe(`latent mode · messages from: ${next.question}`);
      await expect(page.getByTestId('answer-text').textContent()).resolves.toBe(recorded('shuffled1').answers[DEFAULT_ROW]);
      await shot(page, 'ask-shuffled');
      const zeroed = await askAgain(page, 'zeroed');
      expect(zeroed).toContain('4 latent steps · messages zeroed ·');
      await expect(page.getByTestId('answer-text').textContent()).resolves.toBe(recorded('zeroed1').answers[DEFAULT_ROW]);
      console.log(`[e2e] shuffled: ${shuffled}; zeroed: ${zeroed}`);
      expect(await entry.count()).toBe(3);
      await expect(entry.getByTestId('history-ablation').allTextContents()).resolves.toEqual([
        `messages from: ${next.question}`,
        'messages zeroed',
      ]);
      await page.getByTestId('history-clear').click();
      await expect.poll(() => entry.count()).toBe(0);
      expect(errors).toEqual([]);
    } finally {
      await ctx.close();
    }
  });

  test('1b. evaluate the offline tiny system on its first 3 test questions, as the tiny eval recorded them', async () => {
    const { ctx, page, errors } = await open();
    try {
      await useCpu(page);
      await tinyOneRound(page);
      await page.getByTestId('eval-panel').locator('summary').click();
      await page.getByTestId('eval-source').selectOption('tiny');
      await page.getByTestId('eval-limit').fill('3');
      await page.getByTestId('eval-button').click();
      const score = page.getByTestId('eval-score');
      await expect.poll(() => score.textContent(), { timeout: 150_000, interval: 500 }).toMatch(/a question/);
      // models/tiny/distillation/eval.json: `npm run tiny:eval`, 1 round, latent, greedy, the style's 4 latent steps
      const want = recorded('latent1');
      const rows = await page.locator('[data-testid=eval-table] tbody tr').evaluateAll((trs) => trs.map((tr) => ({
        text: tr.getAttribute('title'), cells: [...tr.querySelectorAll('td')].map((td) => td.textContent),
      })));
      expect(rows.map((r) => r.cells[1])).toEqual(TEST.slice(0, 3).map((r) => r.question));
      expect(rows.map((r) => r.text)).toEqual(want.answers.slice(0, 3));
      expect(rows.map((r) => r.cells[4])).toEqual(want.ok.slice(0, 3).map((ok) => (ok ? '✓' : '✗')));
      const right = want.ok.slice(0, 3).filter(Boolean).length;
      expect(await score.textContent()).toContain(`(${right}/3)`);
      console.log(`[e2e] evaluate: ${(await score.textContent())!.replace(/\s+/g, ' ').trim()}`);
      await shot(page, 'evaluate');
      expect(errors).toEqual([]);
    } finally {
      await ctx.close();
    }
  });

  test('2–5. train 10 steps, reload and find the checkpoint, export/import equal bytes, delete', async () => {
    const { ctx, page, errors } = await open();
    try {
      // 2. train the learner's inner link of the tiny system for 10 steps on the CPU backend
      await useCpu(page);
      await tab(page, 'train');
      await page.getByTestId('train-style').selectOption('tiny');
      await page.getByTestId('train-loop').selectOption('inner');
      await expect.poll(() => page.getByTestId('train-role').locator('option').count(), { timeout: 20_000 }).toBeGreaterThan(0);
      await page.getByTestId('train-role').selectOption('learner');
      await page
        .getByTestId('train-upload')
        .setInputFiles({ name: 'shop.jsonl', mimeType: 'application/json', buffer: Buffer.from(shop) });
      await expect.poll(() => page.getByTestId('data-summary').textContent()).toMatch(/shop\.jsonl: 8 rows, 8 usable for learner/);
      await page.getByTestId('train-max-steps').fill('10');
      await page.getByTestId('train-warmup').fill('2');
      await page.getByTestId('train-save-every').fill('5');
      const t0 = Date.now();
      await page.getByTestId('train-start').click();
      const status = page.getByTestId('train-status');
      await expect
        .poll(async () => (await status.textContent())?.trim(), { timeout: 150_000, interval: 500 })
        .toMatch(/saved “.*” at step 10$/);
      console.log(`[e2e] train: 10 steps and saves in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      const loss = page.locator('[data-testid=curves] figure[data-series=loss]');
      expect(await loss.getAttribute('data-points')).toBe('10');
      expect(await loss.locator('svg').getAttribute('aria-label')).toBe('loss over 10 steps');
      const d = (await loss.locator('path').getAttribute('d'))!;
      expect(d.match(/[ML]/g)?.length).toBe(10);
      await expect(page.locator('[data-testid=curves] figure[data-series=loss] .range span').nth(2).textContent()).resolves.toBe(
        'step 1–10',
      );
      await shot(page, 'train');
      const trained = /saved “(.*)” at step 10$/.exec((await status.textContent())!.trim())![1]!;

      // 3. after a reload the checkpoint (final, step 10) is in the registry; the step-5 one was replaced
      await page.reload();
      await page.locator('#tab-ask').waitFor();
      expect(await listed(page)).toEqual([trained]);
      const row = page.locator('[data-testid=checkpoint-list] tbody tr').first();
      const id = (await row.getAttribute('data-id'))!;
      await expect(row.locator('td').nth(3).textContent()).resolves.toBe('10');
      await expect(row.locator('td').nth(2).textContent()).resolves.toBe('tiny / learner');
      await shot(page, 'checkpoints');

      // 4. export; the file imported back is the checkpoint listed already (no second copy); deleted and imported again,
      // the copy exports the same bytes
      const first = await exportRow(page, id);
      expect(first.bytes.subarray(0, 4).toString('hex')).toBe('504b0304');
      await importInto(page, first.name, first.bytes);
      await expect.poll(() => page.getByTestId('ckpt-status').textContent(), { timeout: 20_000 })
        .toBe(`${first.name} is in the list already, as “${trained}”`);
      expect(await listed(page)).toEqual([trained]);
      const remove = async (x: string) => {
        await page.locator(`tr[data-id="${x}"] [data-action=delete]`).click();
        await page.locator(`tr[data-id="${x}"] [data-action=confirm-delete]`).click();
        await expect.poll(() => page.locator(`tr[data-id="${x}"]`).count(), { timeout: 10_000 }).toBe(0);
      };
      await remove(id);
      await importInto(page, first.name, first.bytes);
      await expect.poll(() => page.getByTestId('ckpt-status').textContent(), { timeout: 20_000 }).toBe(`imported ${first.name}`);
      const ids = await page
        .locator('[data-testid=checkpoint-list] tbody tr')
        .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-id')!));
      expect(ids.length).toBe(1);
      const copy = ids[0]!;
      expect(copy).not.toBe(id);
      const second = await exportRow(page, copy);
      expect(second.bytes.length).toBe(first.bytes.length);
      expect(Buffer.compare(second.bytes, first.bytes)).toBe(0);
      const a = await importBundle(new Uint8Array(first.bytes), first.name);
      const b = await importBundle(new Uint8Array(second.bytes), second.name);
      expect(Object.keys(b.files).sort()).toEqual(Object.keys(a.files).sort());
      expect(a.meta).toMatchObject({ kind: 'inner', style: 'tiny', role: 'learner', step: 10 });
      for (const n of Object.keys(a.files)) expect(Buffer.compare(Buffer.from(b.files[n]!), Buffer.from(a.files[n]!)), n).toBe(0);
      exported = first.bytes;

      // 5. delete the copy (confirm), and after a reload it is gone
      await remove(copy);
      await page.reload();
      await page.locator('#tab-ask').waitFor();
      expect(await listed(page)).toEqual([]);
      await expect(page.getByTestId('no-checkpoints').isVisible()).resolves.toBe(true);
      expect(errors).toEqual([]);
    } finally {
      await ctx.close();
    }
  });

  test('6. a full disk (QuotaExceededError) shows QuotaExceeded and loses nothing stored', async () => {
    expect(exported, 'test 2–5 exports the bundle this test imports').not.toBeNull();
    const { ctx, page } = await open();
    try {
      await importInto(page, 'kept.zip', exported!);
      await expect.poll(() => page.getByTestId('ckpt-status').textContent(), { timeout: 20_000 }).toBe('imported kept.zip');
      expect(await listed(page)).toEqual(['kept']);
      // writes to the checkpoint registry's database now fail as a full disk makes them fail
      await page.evaluate(() => {
        const put = IDBObjectStore.prototype.put;
        IDBObjectStore.prototype.put = function (this: IDBObjectStore, ...args: Parameters<IDBObjectStore['put']>) {
          if (this.transaction.db.name === 'rmas-ckpt-checkpoints')
            throw new DOMException('simulated: the quota is exhausted', 'QuotaExceededError');
          return put.apply(this, args);
        };
      });
      // another checkpoint (the same files would be the one listed, and write nothing): the shipped learner's inner link
      await importInto(page, 'adapter.pt', readFileSync('models/tiny/distillation/learner/adapter.pt'));
      const box = page.locator('#panel-checkpoints .error-box');
      await box.waitFor({ timeout: 20_000 });
      expect(await box.getAttribute('data-error-name')).toBe('QuotaExceeded');
      await expect(box.textContent()).resolves.toMatch(/storage is full.*Delete models or checkpoints.*nothing stored was changed/s);
      await expect(box.locator('.hint').textContent()).resolves.toMatch(
        /delete cached models in Environment or old checkpoints in Checkpoints/,
      );
      expect(await listed(page)).toEqual(['kept']);
      await shot(page, 'quota');
      await page.reload(); // the patch lives in the old document only
      await page.locator('#tab-ask').waitFor();
      expect(await listed(page)).toEqual(['kept']);
    } finally {
      await ctx.close();
    }
  });

  test('7. a dead engine worker: the banner says a new one was started, asking works again, checkpoints kept', async () => {
    expect(exported, 'test 2–5 exports the bundle this test imports').not.toBeNull();
    const { ctx, page } = await open();
    try {
      await importInto(page, 'kept.zip', exported!);
      await expect.poll(() => page.getByTestId('ckpt-status').textContent(), { timeout: 20_000 }).toBe('imported kept.zip');
      await useCpu(page);
      await tab(page, 'ask');
      const engine = page.workers().find((w) => /engine/.test(w.url()));
      expect(engine, page.workers().map((w) => w.url()).join(', ')).toBeDefined();
      // an uncaught error inside the worker: its 'error' event reaches the page, as a crash does
      await engine!.evaluate(() => void setTimeout(() => { throw new Error('simulated engine crash'); }, 0));
      const banner = page.getByTestId('engine-banner');
      await banner.waitFor({ timeout: 20_000 });
      await expect(banner.textContent()).resolves.toMatch(/EngineRestarted.*crashed.*a new one was started.*intact.*dismiss/s);
      await shot(page, 'engine-lost');
      await banner.getByRole('button', { name: 'dismiss' }).click();
      await expect.poll(() => banner.count()).toBe(0);
      const stats = await askTiny(page, 'Mia buys 3 zorps. How many coins does she pay?');
      expect((await timelineStates(page)).every((s) => s === 'done')).toBe(true);
      console.log(`[e2e] ask after the restart: ${stats}`);
      expect(await listed(page)).toEqual(['kept']);
    } finally {
      await ctx.close();
    }
  });

  test('8. the Environment view', async () => {
    const { ctx, page, errors } = await open();
    try {
      await tab(page, 'env');
      await expect
        .poll(async () => (await page.getByTestId('use-cpu').count()) + (await page.getByTestId('webgpu-unavailable').count()), {
          timeout: 30_000,
        })
        .toBeGreaterThan(0);
      await page.getByTestId('storage-usage').waitFor({ timeout: 20_000 });
      await expect(page.locator('#panel-env').textContent()).resolves.toMatch(/running in a worker/);
      await shot(page, 'environment');
      expect(errors).toEqual([]);
    } finally {
      await ctx.close();
    }
  });
});
