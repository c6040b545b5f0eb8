/**
 * Fuzzing training data (JSON, JSONL, the rows API's pages), the page's upload of a data file and the prompt-set
 * JSON; test/fuzz/harness.ts has the property. Below, the regression cases.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InvalidArgument, PromptSlotMissing } from '../../src/errors';
import { loadPromptSet } from '../../src/mas/prompts';
import { readPrompts } from '../../src/runner/ask-cmd';
import { cachePath, loadRows } from '../../src/train/data/rows';
import { fuzzReader, fuzzTimeout } from './harness';
import { deepJson } from './mutate';

describe('fuzz: training data and prompts', () => {
  it('a JSON data file: rows or a named error naming the file', async () => {
    expect(await fuzzReader('data.ts', 'trainingJson', 500)).toEqual([]);
  }, fuzzTimeout());

  it('a JSONL data file', async () => {
    expect(await fuzzReader('data.ts', 'trainingJsonl', 800)).toEqual([]);
  }, fuzzTimeout());

  it("the rows API's pages (a fake datasets-server), with the cache written and read back", async () => {
    expect(await fuzzReader('data.ts', 'rowsApi', 800)).toEqual([]);
  }, fuzzTimeout());

  it("the page's upload of a data file (TrainView, EvalPanel)", async () => {
    expect(await fuzzReader('data.ts', 'pageDataUpload', 800)).toEqual([]);
  }, fuzzTimeout());

  it('a prompt-set JSON (--prompts, a style\'s prompts.json)', async () => {
    expect(await fuzzReader('data.ts', 'promptSet', 600)).toEqual([]);
  }, fuzzTimeout());
});

describe('training data and prompts: regressions', () => {
  /** A datasets-server that answers these page bodies in turn. */
  const server = (...pages: unknown[]) => {
    let k = 0;
    const body = (p: unknown) => (typeof p === 'string' ? p : JSON.stringify(p));
    return (async () => new Response(body(pages[Math.min(k++, pages.length - 1)]), { status: 200 })) as unknown as typeof fetch;
  };
  const page = (rows: unknown[], total = rows.length) => ({ rows, num_rows_total: total });
  const load = (f: typeof fetch, cacheDir?: string) => loadRows({ datasetName: 'o/d' }, { fetch: f, ...(cacheDir ? { cacheDir } : {}) });

  it('the rows API: a null row item, truncated cells that are objects, a row too deep to cache: InvalidArgument naming the ' +
    'dataset (found by the fuzzer: two TypeErrors and a RangeError)', async () => {
    await expect(load(server(page([null])))).rejects.toThrow(new InvalidArgument(
      'the rows API sent a malformed row at offset 0 of o/d; pass a local file instead'));
    await expect(load(server(page([{ row: { q: 1 }, truncated_cells: [{ toString: 1 }, 'answer'] }])))).rejects.toThrow(
      /^the rows API truncated the cells \{"toString":1\}, answer of row 0 of o\/d, so its text is incomplete/);
    const dir = mkdtempSync(join(tmpdir(), 'rmas-fuzz-rows-'));
    try {
      const deep = `{"rows": [{"row": {"q": ${deepJson(100_000)}}}], "num_rows_total": 1}`;
      await expect(load(server(deep), dir)).rejects.toThrow(
        /^the rows API sent row 0 of o\/d in a shape that cannot be stored \(Maximum call stack size exceeded\)/);
      expect(existsSync(cachePath(dir, 'o/d', 'default', 'train'))).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('loadPromptSet names the file it is given in every error (the messages named no file)', () => {
    expect(() => loadPromptSet('{"templates": {"chain.judge.first": "x"}}', 'my/prompts.json')).toThrow(
      /^my\/prompts\.json: unknown prompt template key 'chain\.judge\.first'/);
    expect(() => loadPromptSet('{', 'my/prompts.json')).toThrow(/^my\/prompts\.json: prompt file is not valid JSON/);
    const e = (() => {
      try {
        loadPromptSet('{"templates": {"chain.planner.feedback": "{question}"}}', 'p.json');
      } catch (x) {
        return x;
      }
    })();
    expect(e).toBeInstanceOf(PromptSlotMissing);
    expect((e as Error).message).toMatch(/^p\.json: prompt template 'chain\.planner\.feedback' lacks the slot/);
  });

  it('a --prompts file is named in its errors (readPrompts, which ask, run and the trainers use)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rmas-fuzz-prompts-'));
    try {
      const file = join(dir, 'prompts.json');
      writeFileSync(file, '{"templates": {"chain.judge.first": "x"}}');
      expect(() => readPrompts(file)).toThrow(`${file}: unknown prompt template key 'chain.judge.first'`);
      expect(() => readPrompts(join(dir, 'none.json'))).toThrow(`--prompts ${join(dir, 'none.json')}: cannot read it`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
