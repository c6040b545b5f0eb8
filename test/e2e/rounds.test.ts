/**
 * End-to-end: the Evaluate panel's accuracy-by-rounds plot (issue 40) on the built app, in a fresh profile on the page's
 * default backend, WebGPU (SwiftShader here). The second offline system (tiny recursion, the multi-hop task) is chosen,
 * "Accuracy by rounds" runs RecursiveMAS and text-MAS at 1, 2 and 3 rounds on its first 6 test questions, and each
 * point drawn (accuracy, questions right, generated tokens per question) is what `rmas run --style tiny_recursion
 * --num_recursive_rounds R [--mode text]` computes on the same rows (child processes, CPU backend). The plot also
 * draws the system's recorded eval.json on those questions and the ceiling of each round count. Its screenshot lands
 * in .cache/test-output/e2e/rounds-plot.png (the README's docs/img/playground-rounds.png is a copy of one).
 * Skipped until models/tiny/recursion is built (the build leaves a system not built out of the app).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, test } from 'vitest';
import { hopCeiling, hopSplit } from '../../src/eval/tiny-hops';
import { TINY_RECURSION_ROOT } from '../../src/mas/styles';
import { TINY_RECURSION } from '../../src/ui/offline';
import { tinyTestRows } from '../../src/ui/train';
import { SHOTS, builtApp, openPage, tab } from './app';

const N = 6;
const built = existsSync(join(TINY_RECURSION_ROOT, 'outer'));
const tmp = mkdtempSync(join(tmpdir(), 'rmas-e2e-rounds-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** `rmas run` on the rows, greedy, as a user types it; its per-question records. */
function runnerRun(data: string, mode: 'latent' | 'text', rounds: number): { correct: boolean; tokens: number }[] {
  const out = join(tmp, `${mode}${rounds}.jsonl`);
  const r = spawnSync(process.execPath, [
    'bin/rmas.js', 'run', '--style', 'tiny_recursion', '--dataset', data, '--greedy', '--num_recursive_rounds', String(rounds),
    '--mode', mode, '--backend', 'cpu', '--result_jsonl', out,
  ], { encoding: 'utf8', timeout: 300_000 });
  expect(r.status, r.stderr).toBe(0);
  return readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; correct: boolean; tokens: number })
    .filter((l) => l.type === 'sample');
}

describe.skipIf(!built)('accuracy by rounds on the built app (fresh profile, WebGPU default)', () => {
  const app = builtApp();

  test(`tiny recursion, ${N} test questions: each point drawn is what rmas run --num_recursive_rounds R computes`, async () => {
    const { ctx, page, errors } = await openPage(app.browser(), app.url());
    try {
      await tab(page, 'ask');
      await page.getByTestId('ask-style').selectOption(TINY_RECURSION);
      await page.getByTestId('ask-greedy').check();
      await page.getByTestId('eval-panel').locator('summary').click();
      await expect(page.getByTestId('eval-source').inputValue()).resolves.toBe('tiny');
      await page.getByTestId('eval-limit').fill(String(N));
      const t0 = Date.now();
      await page.getByTestId('rounds-button').click();
      const progress = page.getByTestId('rounds-progress');
      await progress.waitFor({ timeout: 120_000 });
      await expect.poll(() => page.getByTestId('compare-status').textContent(), { timeout: 900_000, interval: 1000 }).toMatch(/^done/);
      console.log(`[e2e rounds] 6 configurations × ${N} questions on WebGPU in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      await expect(progress.getAttribute('value')).resolves.toBe(String(6 * N));
      await expect(progress.getAttribute('max')).resolves.toBe(String(6 * N));
      const plot = page.getByTestId('rounds-plot');
      mkdirSync(SHOTS, { recursive: true });
      await plot.screenshot({ path: join(SHOTS, 'rounds-plot.png') });

      const points = await plot.locator('circle[data-series=latent], circle[data-series=text]').evaluateAll((cs) => cs.map((c) => ({
        series: c.getAttribute('data-series')!, rounds: Number(c.getAttribute('data-rounds')), right: Number(c.getAttribute('data-right')),
        questions: Number(c.getAttribute('data-questions')), accuracy: Number(c.getAttribute('data-accuracy')),
        tokens: Number(c.getAttribute('data-tokens')), seconds: Number(c.getAttribute('data-seconds')),
      })));
      expect(points.map((p) => `${p.series}${p.rounds}`).sort()).toEqual(['latent1', 'latent2', 'latent3', 'text1', 'text2', 'text3']);
      const data = join(tmp, 'test6.jsonl');
      writeFileSync(data, tinyTestRows(N, TINY_RECURSION).map((r) => JSON.stringify(r)).join('\n') + '\n');
      for (const p of points) {
        const recs = runnerRun(data, p.series as 'latent' | 'text', p.rounds);
        const right = recs.filter((r) => r.correct).length;
        const tokens = recs.reduce((a, r) => a + r.tokens, 0) / recs.length;
        console.log(`[e2e rounds] ${p.series}${p.rounds}: page ${p.right}/${p.questions}, ${p.tokens} tokens; rmas run ${right}/${recs.length}, ${tokens}`);
        expect([p.series, p.rounds, p.right, p.questions, p.accuracy, p.tokens]).toEqual([p.series, p.rounds, right, N, right / N, tokens]);
        expect(p.seconds).toBeGreaterThan(0);
        // the tokens and seconds per question stand beside the point
        await expect(plot.locator(`text[data-label="${p.series}${p.rounds}"]`).textContent()).resolves.toBe(
          `${(100 * p.accuracy).toFixed(1)}% · ${p.tokens.toFixed(1)} tok · ${p.seconds.toFixed(3)} s`,
        );
      }
      // the ceiling of each round count on these questions, and the recorded curve when the build has eval.json
      const rows = hopSplit('test').slice(0, N);
      await expect(plot.getByTestId('rounds-ceiling').getAttribute('data-values')).resolves.toBe(
        [1, 2, 3].map((r) => hopCeiling(rows, r)).join(','),
      );
      if (existsSync(join(TINY_RECURSION_ROOT, 'eval.json'))) {
        const recorded = JSON.parse(readFileSync(join(TINY_RECURSION_ROOT, 'eval.json'), 'utf8')) as {
          results: { config: string; ok: boolean[] }[];
        };
        for (const kind of ['latent', 'text'])
          for (const r of [1, 2, 3]) {
            const ok = recorded.results.find((x) => x.config === `${kind}${r}`)!.ok.slice(0, N);
            await expect(plot.locator(`circle[data-series=${kind}-recorded][data-rounds="${r}"]`).getAttribute('data-accuracy'))
              .resolves.toBe(String(ok.filter(Boolean).length / N));
          }
      }
      expect(errors).toEqual([]);
    } finally {
      await ctx.close();
    }
  }, 1_200_000);
});
