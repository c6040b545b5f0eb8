/**
 * `rmas` as processes under faults: the child that bin/rmas.js starts stops when the wrapper is killed (SIGKILL
 * included), rather than train on unseen to the end; the folder a `.zip` bundle is extracted to goes away when the
 * run is stopped by SIGTERM, SIGINT or its wrapper's death, not only at a normal exit.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { priceJsonl, priceSplit } from '../src/eval/tiny-prices';
import { arithmeticRows } from './train/fixtures';

const ROOT = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'rmas-process-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const rows = join(dir, 'rows.jsonl');
writeFileSync(rows, arithmeticRows(8).map((r) => JSON.stringify(r)).join('\n'));

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
/** The pids whose parent is `pid` (Linux /proc: field 4 of stat, after the parenthesised name). */
const childrenOf = (pid: number) =>
  readdirSync('/proc').filter((n) => /^\d+$/.test(n)).filter((n) => {
    try {
      return Number(readFileSync(`/proc/${n}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]) === pid;
    } catch {
      return false;
    }
  }).map(Number);
const until = async (what: string, ok: () => boolean, ms: number) => {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('the rmas process pair', () => {
  it('killing bin/rmas.js with SIGKILL stops its child: a long training run ends within seconds', async () => {
    const wrapper = spawn(process.execPath, [
      join(ROOT, 'bin/rmas.js'), 'train-inner', '--model_name_or_path', 'models/tiny/qwen3-tiny', '--mas_design', 'sequential',
      '--mas_role', 'planner', '--dataset_name', rows, '--max_steps', '100000', '--backend', 'cpu', '--save_dir', join(dir, 'save'),
      '--save_steps', '0', '--logging_steps', '1',
    ], { cwd: ROOT });
    let err = '';
    wrapper.stderr.on('data', (d: Buffer) => (err += d.toString()));
    await until('the first steps', () => /step 3\//.test(err), 60_000);
    const [child] = childrenOf(wrapper.pid!);
    expect(child && alive(child)).toBe(true);
    wrapper.kill('SIGKILL');
    await until('the child to stop', () => !alive(child!), 10_000);
    expect(err).toContain('rmas: the launching process (bin/rmas.js) is gone; stopping');
    expect(err).not.toMatch(/step 100000\//);
  }, 90_000);

  describe('bundles extracted for --init_outer', () => {
    const bundle = join(dir, 'outer.zip');
    const prices = join(dir, 'prices.jsonl');
    /** train-outer from a bundle, with its own TMPDIR; resolves once it trains, with the wrapper and that TMPDIR. */
    async function start(name: string) {
      const tmp = join(dir, `tmp-${name}`);
      mkdirSync(tmp);
      const wrapper = spawn(process.execPath, [
        join(ROOT, 'bin/rmas.js'), 'train-outer', '--style', 'tiny_distillation', '--init_outer', bundle, '--dataset_name', prices,
        '--max_steps', '100000', '--num_recursive_rounds', '1', '--backend', 'cpu', '--save_dir', join(dir, `save-${name}`),
        '--save_steps', '0', '--logging_steps', '1',
      ], { cwd: ROOT, env: { ...process.env, TMPDIR: tmp, RMAS_TINY_SYSTEM: '' } });
      let err = '';
      wrapper.stderr.on('data', (d: Buffer) => (err += d.toString()));
      await until(`${name}: the first steps`, () => /step 2\//.test(err), 60_000);
      expect(readdirSync(tmp).filter((n) => n.startsWith('rmas-bundle-'))).toHaveLength(1);
      return { wrapper, tmp, err: () => err };
    }

    it('SIGTERM, SIGINT, or the wrapper killed with SIGKILL: the extracted folder is removed', async () => {
      const made = spawnSync(process.execPath, [join(ROOT, 'bin/rmas.js'), 'convert', '--in', 'models/tiny/distillation/outer',
        '--out', bundle], { cwd: ROOT, encoding: 'utf8' });
      expect(made.status, made.stderr).toBe(0);
      writeFileSync(prices, priceJsonl(priceSplit('train').slice(0, 8)));
      for (const sig of ['SIGTERM', 'SIGINT', 'SIGKILL'] as const) {
        const run = await start(sig);
        const child = childrenOf(run.wrapper.pid!)[0]!;
        const exited = new Promise<number | null>((r) => run.wrapper.on('exit', (code, signal) => r(code ?? (signal ? -1 : null))));
        run.wrapper.kill(sig);
        await exited;
        await until(`${sig}: the child to stop`, () => !alive(child), 15_000);
        // (tsx keeps its own cache there)
        expect(readdirSync(run.tmp).filter((n) => n.startsWith('rmas-')), sig).toEqual([]);
      }
    }, 240_000);
  });
});
