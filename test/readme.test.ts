/**
 * The README's commands run as written: every `npx rmas` line of its fenced bash blocks, in order, in a folder with
 * the tiny task's splits under data/ (what the README's `build.ts task --out data` writes) and the repository's
 * models/, on the default backend (WebGPU here). Each must exit 0 and leave what it says it makes.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { priceList } from '../src/eval/tiny-prices';
import { taskSplit, toJsonl } from '../src/eval/tiny-task';
import { bashLines, words } from './util/markdown';

const ROOT = resolve(import.meta.dirname, '..');

const lines = bashLines(readFileSync(join(ROOT, 'README.md'), 'utf8'), 'npx rmas ');
const dir = mkdtempSync(join(tmpdir(), 'rmas-readme-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the README', () => {
  it('the line reader splits quoted words and finds the commands', () => {
    expect(words(`npx rmas ask --question "Tom has 6 pens. He said \\"hi\\"." --greedy`)).toEqual([
      'npx',
      'rmas',
      'ask',
      '--question',
      'Tom has 6 pens. He said "hi".',
      '--greedy',
    ]);
    expect(bashLines('x\n```bash\nnpx rmas a\n  npx rmas b --c\nls\n```\n```ts\nnpx rmas d\n```\n', 'npx rmas ')).toEqual([
      'npx rmas a',
      'npx rmas b --c',
    ]);
    // one example of each command of its table
    expect(lines.map((l) => words(l)[2])).toEqual([
      'ask',
      'ask',
      'run',
      'train-inner',
      'train-outer',
      'convert',
      'forward',
      'generate',
      'plan-memory',
      'healthcheck',
    ]);
  });

  it('stays a front door: at most 10,000 bytes, with the two commands and the map on it', () => {
    const text = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(10_000);
    expect(text).toContain('npm install && npm start');
    expect(text).toContain('npm install && npm test');
    expect(text).toContain('## The repository');
  });

  it('every rmas line runs as written on the tiny system', () => {
    mkdirSync(join(dir, 'data'));
    for (const split of ['train', 'test'] as const) writeFileSync(join(dir, 'data', `${split}.jsonl`), toJsonl(taskSplit(split)));
    symlinkSync(join(ROOT, 'models'), join(dir, 'models'));
    for (const line of lines) {
      const r = spawnSync(process.execPath, [join(ROOT, 'bin/rmas.js'), ...words(line).slice(2)], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 300_000,
      });
      expect(r.status, `${line}\n${r.stderr.slice(-2000)}`).toBe(0);
      // the sequential example's answer (6 - 3 + 1); the distillation example prices 3 glims at a zorp's price, the
      // donor question's, which its messages carry
      if (line.startsWith('npx rmas ask')) {
        const want = line.includes('--messages_from') ? 3 * priceList().get('zorp')! : 4;
        expect(r.stdout).toContain(`\\boxed{${want}}`);
      }
    }
    for (const made of [
      'out/test.jsonl',
      'out/planner/adapter.pt',
      'out/outer/outerlink_config.json',
      'out/planner.zip',
      'out/hidden.safetensors',
    ]) {
      expect(existsSync(join(dir, made)), made).toBe(true);
    }
  }, 900_000);
});
