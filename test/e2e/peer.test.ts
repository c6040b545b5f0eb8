/**
 * The peer benchmark's token check (issue 23, item 5): transformers.js, on an ONNX export of each committed tiny
 * model (scripts/peer/export_onnx.py), decodes greedily the same ids as our engine, 1 + 16 of them with EOS off:
 * - in headless Chromium, peer.html itself (ONNX Runtime Web's WebGPU EP and ours, both on SwiftShader), driven
 *   as `npm run bench:peer` drives it;
 * - in Node, onnxruntime-node's WebGPU EP and ours on Dawn, both on Mesa lavapipe.
 * Both engines run f32 arithmetic on the same weights, so any wrong op in either (or in the export) shows up as
 * a different argmax within a few steps. The random tiny Qwen3 repeats one token whatever the prompt; the trained
 * tiny-system models (models/tiny/system: a Qwen3, a Llama, a Qwen2) and llama-tiny give varied ids, which the
 * test requires so that the check keeps its teeth. Timings are the benchmark's business, not asserted here.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensurePeerExports, exportIsCurrent } from '../../bench/peer-export';
import { type PeerPage, openPeerPage } from '../../bench/peer-page';
import { type PeerReport, THEIRS, runPeer } from '../../src/ui/peer-run';

/** Node runs every family we export; Chromium, where each model's first ONNX run compiles for seconds, three. */
const MODELS = ['qwen3-tiny', 'llama-tiny', 'system/planner', 'system/critic', 'system/solver'];
const BROWSER_MODELS = ['qwen3-tiny', 'llama-tiny', 'system/planner'];
const OPTS = { tokens: 16, reps: 0, prompt: 'Once upon a time' };
/** Models whose greedy ids from this prompt must not be one token repeated (seen here: 15 to 42 distinct in 65). */
const VARIED = ['llama-tiny', 'system/planner', 'system/critic', 'system/solver'];

function expectSameIds(report: PeerReport, models: string[]) {
  expect(report.checks.map((c) => c.model)).toEqual(models);
  for (const c of report.checks) {
    const theirs = c.tokens[THEIRS];
    expect(theirs, `${c.model}: transformers.js ids`).toHaveLength(OPTS.tokens + 1);
    expect(c.tokens['ours committed'], `${c.model}: ours (committed weights) against transformers.js`).toEqual(theirs);
    expect(c.tokens['ours export'], `${c.model}: ours (the export's f32 weights) against transformers.js`).toEqual(theirs);
    expect(c.equal).toBe(true);
    if (VARIED.includes(c.model)) expect(new Set(theirs).size, `${c.model}: distinct ids`).toBeGreaterThan(4);
  }
}

beforeAll(() => {
  ensurePeerExports(MODELS);
}, 60_000);

it('the exports are current: their manifests record the sha256 their inputs have now, so none is rebuilt', () => {
  for (const m of MODELS) expect(exportIsCurrent(m), m).toBe(true);
  expect(ensurePeerExports(MODELS)).toEqual([]);
});

describe('transformers.js decodes the same greedy ids as our engine', () => {
  let page: PeerPage | undefined;
  const cacheDir = mkdtempSync(join(tmpdir(), 'rmas-peer-vite-'));
  const errors: string[] = [];
  afterAll(async () => {
    await page?.close();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  it('in Chromium on WebGPU, through peer.html', async () => {
    page = await openPeerPage({ cacheDir, log: (l) => errors.push(l) });
    const report = await page.run({ ...OPTS, models: BROWSER_MODELS });
    expect(report.isFallbackAdapter).toBe(true); // SwiftShader: the only adapter headless Chromium has here
    expectSameIds(report, BROWSER_MODELS);
    // the page shows the same verdicts it returned
    const shown = await page.page.locator('#checks li').allTextContents();
    expect(shown).toHaveLength(BROWSER_MODELS.length);
    for (const line of shown) expect(line).toMatch(/greedy ids identical across engines \(17 ids\)$/);
    expect(errors).toEqual([]);
  }, 300_000); // 26-35 s on 2 idle vCPUs; one CI run, on a machine slower than this one, passed 180 s (cause not seen)

  it('in Node on WebGPU (Dawn for ours, onnxruntime-node for transformers.js)', async () => {
    const { nodeHost } = await import('../../bench/peer-node');
    const host = await nodeHost();
    try {
      expectSameIds(await runPeer(host, { ...OPTS, models: MODELS }), MODELS);
    } finally {
      host.close();
    }
  }, 120_000);
});
