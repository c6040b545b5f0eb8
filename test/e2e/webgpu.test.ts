/**
 * End-to-end on the page's default backend, WebGPU (SwiftShader in headless Chromium), against what the runner
 * computes for the same input: the text the page shows, character for character, is what `rmas ask --json` writes
 * (in latent mode, text mode side by side, with the messages shuffled or zeroed, and in the evaluation table); a
 * style the engine cannot run yet is refused as the runner refuses it, before any download; and the Train view's
 * loop: the offline system's training split, Start, the loss falls, before/after on held-out questions, ask with
 * the trained link, export, and the runner (child processes) reads the exported bundle and writes the answer the
 * page showed. The offline system is tiny_distillation (models/tiny-system.json). Slow (a few minutes on two
 * cores: SwiftShader runs WGSL on the CPU), and run in CI. Screenshots land in .cache/test-output/e2e/.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, describe, expect, test } from 'vitest';
import { priceJsonl, priceSplit } from '../../src/eval/tiny-prices';
import { readLinkFile } from '../../src/mas/upstream';
import { CpuBackend } from '../../src/tensor/cpu';
import { renderMarkdown } from '../../src/ui/markdown';
import { DEFAULT_ROW } from '../../src/ui/offline';
import { runAsk } from '../mas/ask-util';
import { ask, askAgain, builtApp, shot, tab, tinyOneRound, withPage } from './app';

const app = builtApp();
const tmp = mkdtempSync(join(tmpdir(), 'rmas-e2e-webgpu-'));
const cpu = new CpuBackend('f32');
/** The offline system's style, as the runner names it; its test split (src/eval/tiny-prices.ts). */
const STYLE = 'tiny_distillation';
const TEST = priceSplit('test').map((r) => r.question);
/** A question of the test split, neither the one Ask opens with nor its donor. */
const QUESTION = TEST[DEFAULT_ROW + 2]!;

/** `node bin/rmas.js ARGS`, as a user types it (Dawn on lavapipe for --backend webgpu: vitest.config.ts sets its environment). */
const rmas = (args: string[]) => spawnSync(process.execPath, ['bin/rmas.js', ...args], { encoding: 'utf8', timeout: 300_000 });

afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/**
 * The KV-cache dtype the page's engine uses on this adapter: f16 where it has shader-f16 (a real GPU's browser), f32
 * on SwiftShader; the runner is asked for the same cache so that the answers can be compared token for token.
 */
const pageKv = (page: Page): Promise<'f16' | 'f32'> =>
  page.evaluate(async () => ((await navigator.gpu.requestAdapter())?.features.has('shader-f16') ? 'f16' : 'f32'));

/**
 * What `rmas ask --json` writes as "text" for the offline system, 1 round, greedy, with `flags` (in-process, CPU
 * backend), with the KV cache of `page`'s engine.
 */
async function runnerText(page: Page, question: string, flags: Record<string, string | boolean | string[]> = {}): Promise<string> {
  const kv = await pageKv(page);
  const r = await runAsk({ style: STYLE, question, num_recursive_rounds: '1', greedy: true, json: true, kv_dtype: kv, ...flags }, cpu);
  expect(r.error).toBeNull();
  return (JSON.parse(r.out) as { text: string }).text;
}

/** The answer of the run `mode` as the page shows it: the exact text, and the rendered Markdown's HTML. */
async function shown(page: Page, mode: 'latent' | 'text'): Promise<{ text: string; html: string; stats: string }> {
  const run = page.locator(`#panel-ask .run[data-mode=${mode}]`);
  return {
    text: (await run.getByTestId('answer-text').textContent())!,
    html: (await run.locator('.answer .md').innerHTML()).replace(/<!--[^]*?-->/g, ''),
    stats: (await run.getByTestId('ask-stats').textContent())!.replace(/\s+/g, ' ').trim(),
  };
}

/** The page shows exactly `want`: the text as written, and the Markdown rendering of that text, computed on WebGPU with a `kv` cache. */
function expectShown(got: { text: string; html: string; stats: string }, want: string, kv: string) {
  expect(got.text).toBe(want);
  expect(got.html).toBe(renderMarkdown(want));
  expect(got.stats).toMatch(new RegExp(` s total on webgpu \\(${kv} KV cache\\)$`));
}

describe.sequential('playground end to end on WebGPU (built app, SwiftShader)', () => {
  test('ask: the answer shown is the text rmas ask --json writes, on the WebGPU backend', async () => {
    await withPage(app, async (page) => {
      await tinyOneRound(page);
      const latent = await page.getByTestId('ask-latent').inputValue();
      await ask(page, QUESTION);
      const want = await runnerText(page, QUESTION, { latent_length: latent });
      expectShown(await shown(page, 'latent'), want, await pageKv(page));
      // the stats say where the time went, and the status where the system ran
      const time = (await page.getByTestId('ask-time').textContent())!;
      expect(time).toMatch(
        /^of the [\d.]+ s: stages [\d.]+ s · latent-message lens [\d.]+ s \(1 message kept, each read on request\) · answer retry [\d.]+ s · other [\d.]+ s; \d+ GPU kernels compiled on first use, inside these; before it, loading the system [\d.]+ s \(downloads, weights to the GPU\)$/,
      );
      // the lens takes under 10 % of the ask: it only keeps the message; its reading comes after the answer, on request
      const [total, lens] = [/^of the ([\d.]+) s/, /latent-message lens ([\d.]+) s/].map((re) => Number(re.exec(time)![1]));
      expect(lens).toBeLessThan(0.1 * total);
      await expect(page.getByTestId('lens-note').first().textContent()).resolves.toMatch(/read as near uniform/);
      const reads = (await page.getByTestId('lens-reads').textContent())!.replace(/\s+/g, ' ').trim();
      expect(reads).toMatch(/^1 message; the lens reads one when it is opened: 1 read in [\d.]+ s\.$/);
      console.log(`[e2e webgpu] ask ${total} s, lens in it ${lens} s; ${reads}`);
      console.log(`[e2e webgpu] ask: ${(await shown(page, 'latent')).stats}`);
      await shot(page, 'ask-webgpu');
    });
  });

  test('both, side by side: the latent and the text run each show what rmas ask writes in that mode', async () => {
    await withPage(app, async (page) => {
      await tinyOneRound(page, 'both');
      await ask(page, QUESTION, 2);
      const kv = await pageKv(page);
      expectShown(await shown(page, 'latent'), await runnerText(page, QUESTION), kv);
      expectShown(await shown(page, 'text'), await runnerText(page, QUESTION, { mode: 'text' }), kv);
      await shot(page, 'ask-both');
    });
  });

  test('ask again with the messages shuffled, then zeroed: the text rmas ask --messages_from / --zero_messages writes', async () => {
    await withPage(app, async (page) => {
      await tinyOneRound(page);
      const latent = await page.getByTestId('ask-latent').inputValue();
      const kv = await pageKv(page);
      // the question Ask opens with; its messages are replaced by those the system sends for the next test row
      const [q, donor] = [TEST[DEFAULT_ROW]!, TEST[DEFAULT_ROW + 1]!];
      await expect(page.getByRole('textbox', { name: 'question' }).inputValue()).resolves.toBe(q);
      await ask(page, q);
      /** `rmas ask --json` of the offline system on WebGPU (a child process), as the page was set, with `flags`. */
      const runner = (flags: string[]) => {
        const r = rmas([
          'ask', '--style', STYLE, '--question', q, ...flags, '--greedy', '--num_recursive_rounds', '1', '--latent_length', latent,
          '--backend', 'webgpu', '--kv_dtype', kv, '--json',
        ]);
        expect(r.status, r.stderr).toBe(0);
        return JSON.parse(r.stdout) as { text: string; messages: string };
      };

      const shuffledStats = await askAgain(page, 'shuffled');
      await expect(page.getByTestId('run-title').textContent()).resolves.toBe(`latent mode · messages from: ${donor}`);
      expect(shuffledStats).toContain(`· messages from: ${donor} ·`);
      const shuffled = runner(['--messages_from', donor]);
      expect(shuffled.messages).toBe(`from: ${donor}`);
      expectShown(await shown(page, 'latent'), shuffled.text, kv);
      const time = page.getByTestId('ask-time');
      await expect(time.textContent()).resolves.toMatch(/; before it, the donor question's run [\d.]+ s \(its messages\)$/);
      await shot(page, 'ask-shuffled-webgpu');

      const zeroedStats = await askAgain(page, 'zeroed');
      await expect(page.getByTestId('run-title').textContent()).resolves.toBe('latent mode · messages zeroed');
      expect(zeroedStats).toContain('· messages zeroed ·');
      const zeroed = runner(['--zero_messages']);
      expect(zeroed.messages).toBe('zeroed');
      expectShown(await shown(page, 'latent'), zeroed.text, kv);
      console.log(`[e2e webgpu] shuffled: ${JSON.stringify(shuffled.text)}; zeroed: ${JSON.stringify(zeroed.text)}`);

      // the history keeps which answer had which messages
      await expect(page.getByTestId('history-ablation').allTextContents()).resolves.toEqual([`messages from: ${donor}`, 'messages zeroed']);
    });
  });

  test('evaluate: each row of the table holds the text rmas ask writes for its question', async () => {
    await withPage(app, async (page) => {
      await tinyOneRound(page);
      await page.getByTestId('eval-panel').locator('summary').click();
      await page.getByTestId('eval-source').selectOption('tiny');
      await page.getByTestId('eval-limit').fill('3');
      await page.getByTestId('eval-button').click();
      await expect.poll(() => page.getByTestId('eval-score').textContent(), { timeout: 300_000, interval: 1000 }).toMatch(/a question/);
      const rows = await page.locator('[data-testid=eval-table] tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('title')));
      expect(rows).toEqual(await Promise.all(TEST.slice(0, 3).map((q) => runnerText(page, q))));
      await shot(page, 'evaluate-webgpu');
    });
  });

  test('a released style with the hub out of reach: the hub named unreachable, the style\'s size, no weights asked for', async () => {
    await withPage(app, async (page) => {
      // every released style's backbones are runnable; offline, the hub's files cannot be had
      const remote: string[] = [];
      await page.route((u) => !u.href.startsWith(app.url()), (route) => {
        remote.push(route.request().url());
        return route.abort('internetdisconnected');
      });
      await tab(page, 'ask');
      await page.getByTestId('ask-style').selectOption('sequential_scaled');
      await page.getByRole('textbox', { name: 'question' }).fill(QUESTION);
      await page.getByTestId('ask-button').click();
      const box = page.locator('#panel-ask .error-box').first();
      await box.waitFor({ timeout: 60_000 });
      // the planner's config.json is the first file the plan reads: asked three times (the hub client's two network
      // retries), then nothing more once it fails
      const first = 'https://huggingface.co/RecursiveMAS/Sequential-Scaled-Planner-Gemma3-4B/resolve/main/config.json';
      expect(await box.getAttribute('data-error-name')).toBe('DownloadFailed');
      // what is out of reach, how large the style is, and the ways on; no status, plan line or timeline left behind
      await expect(box.locator('.msg').textContent()).resolves.toBe(
        `the model hub cannot be reached (${first}: network error (Failed to fetch) after 3 attempt(s); check the connection and ` +
          'run again). sequential_scaled downloads about 20.5 GiB on first use (11.0 billion parameters in bf16). Check the ' +
          "connection or the hub's address (Environment → Model hub), or ask the offline system, which needs no hub.",
      );
      await expect(page.getByTestId('ask-status').textContent()).resolves.toBe('not loaded');
      await expect(page.getByTestId('ask-plan').textContent()).resolves.toBe('');
      expect(await page.locator('#panel-ask .run').count()).toBe(0);
      expect(remote).toEqual([first, first, first]);
    });
  });

  test('train: the tiny split, Start, the loss falls, before/after, ask with it, export; the runner reads the bundle', async () => {
    await withPage(app, async (page) => {
      // the Train view opens on the offline tiny system with its own training split loaded: the inner loop, a role, then Start
      await tab(page, 'train');
      await page.getByTestId('train-loop').selectOption('inner');
      await expect.poll(() => page.getByTestId('data-summary').textContent(), { timeout: 20_000 })
        .toBe('tiny task, training split (offline): 1000 rows, 1000 usable for expert');
      // the learner, who answers: a fine-tune of its shipped inner link
      await page.getByTestId('train-role').selectOption('learner');
      await expect.poll(() => page.getByTestId('data-summary').textContent())
        .toBe('tiny task, training split (offline): 1000 rows, 1000 usable for learner');
      await expect(page.getByTestId('train-init').inputValue()).resolves.toBe('system');
      await expect(page.getByTestId('train-max-steps').inputValue()).resolves.toBe('40');
      await page.getByTestId('train-max-steps').fill('10'); // a short run: 10 take about 35 s on SwiftShader (two busy cores)
      const t0 = Date.now();
      await page.getByTestId('train-start').click();
      const status = page.getByTestId('train-status');
      await expect
        .poll(async () => (await status.textContent())?.trim(), { timeout: 300_000, interval: 1000 })
        .toMatch(/^saved “.*” at step 10$/);
      console.log(
        `[e2e webgpu] train: 10 steps in ${((Date.now() - t0) / 1000).toFixed(1)} s; ${await page.locator('.figures').textContent()}`,
      );
      await expect(page.locator('.figures').textContent()).resolves.toMatch(/^1000 samples on webgpu/);
      const trend = page.getByTestId('loss-trend');
      const [first, last] = [Number(await trend.getAttribute('data-first')), Number(await trend.getAttribute('data-last'))];
      expect(last).toBeLessThan(first);
      await expect(trend.textContent()).resolves.toMatch(/mean of the first 5 steps [\d.]+ → last 5 [\d.]+/);
      await shot(page, 'train-webgpu');

      // before / after on two held-out questions
      await page.getByTestId('try-n').fill('2');
      await page.getByTestId('try-compare').click();
      for (const side of ['try-before', 'try-after']) {
        await expect
          .poll(() => page.getByTestId(side).textContent(), { timeout: 300_000, interval: 1000 })
          .toMatch(/^\d\/2 correct, [\d.]+ tokens a question$/);
      }
      await expect(page.getByTestId('try-compare').isEnabled()).resolves.toBe(true);
      console.log(
        `[e2e webgpu] before ${await page.getByTestId('try-before').textContent()}; after ${await page.getByTestId('try-after').textContent()}`,
      );

      // export: the bundle the runner reads
      const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20_000 }), page.getByTestId('try-export').click()]);
      const zip = join(tmp, dl.suggestedFilename());
      writeFileSync(zip, readFileSync((await dl.path())!));
      await expect(page.getByTestId('try-cli').textContent()).resolves.toContain(
        `--style ${STYLE} --ckpt_override learner=${dl.suggestedFilename()}`,
      );
      await shot(page, 'train-try');

      // ask with it: the Ask view with the trained learner link
      await page.getByTestId('try-ask').click();
      // the role pickers in stage order: the expert's, then the learner's
      const pickers = page.locator('#panel-ask details.links select');
      await expect.poll(() => pickers.nth(1).inputValue()).not.toBe('released');
      await expect(pickers.first().inputValue()).resolves.toBe('released');
      await page.getByTestId('ask-rounds').fill('1');
      await page.getByTestId('ask-greedy').check();
      await ask(page, QUESTION);
      const onPage = await shown(page, 'latent');

      // the runner, as a user types it, reads the bundle and writes the answer the page showed
      const r = rmas([
        'ask',
        '--style',
        STYLE,
        '--question',
        QUESTION,
        '--num_recursive_rounds',
        '1',
        '--greedy',
        '--json',
        '--backend',
        'cpu',
        '--ckpt_override',
        `learner=${zip}`,
        '--kv_dtype',
        await pageKv(page),
      ]);
      expect(r.status, r.stderr).toBe(0);
      expectShown(onPage, (JSON.parse(r.stdout) as { text: string }).text, await pageKv(page));
      // and starts a training run from it: with a learning rate of 0, its one step saves the bundle's link unchanged
      const data = join(tmp, 'rows.jsonl');
      writeFileSync(data, priceJsonl(priceSplit('train').slice(0, 4)));
      const save = join(tmp, 'from-bundle');
      const t = rmas(['train-inner', '--style', STYLE, '--role', 'learner', '--init_adapter', zip, '--dataset_name', data,
        '--save_dir', save, '--max_steps', '1', '--adapter_lr', '0', '--backend', 'cpu']);
      expect(t.status, t.stderr).toBe(0);
      const { importBundle } = await import('../../src/store/bundle');
      const { files } = await importBundle(new Uint8Array(readFileSync(zip)), zip);
      const name = Object.keys(files).find((f) => /^adapter\.(safetensors|pt)$/.test(f))!;
      writeFileSync(join(tmp, name), files[name]!);
      const [exported, saved] = [await readLinkFile(join(tmp, name)), await readLinkFile(join(save, 'adapter.safetensors'))];
      expect([...saved.keys()].sort()).toEqual([...exported.keys()].sort());
      for (const [k, v] of exported) expect(Array.from(saved.get(k)!.data), k).toEqual(Array.from(v.data));
    });
  }, 400_000); // training, two evaluations and the runner: about 55 s on two busy cores, its waits allow 300 s
});
