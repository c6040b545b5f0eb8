/**
 * One writer per output (issue 39, item 5): the lock file beside each output (src/runner/output-lock.ts). A second
 * writer is refused by name, naming the output and the owner (PID, host), exit 1, before it writes or loads anything;
 * the first goes on to the bytes it would have written alone. The owner is a real `rmas` process (bin/rmas.js), held
 * still with SIGSTOP once its lock exists, so that the second always meets it; the second runs in this process.
 * Stale locks (a dead PID on this host, a PID reused by a later process) are taken over; a lock from another host is
 * refused with what to do; every lock goes when its command ends, also on an error.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { OutputLocked } from '../../src/errors';
import { taskSplit, toJsonl } from '../../src/eval/tiny-task';
import { readLinkFile } from '../../src/mas/upstream';
import { lockOutput, lockPathOf, releaseOutput, type LockOwner } from '../../src/runner/output-lock';
import { arithmeticRows } from '../train/fixtures';
import { rmasInProcess, trainInProcess as train } from '../util/rmas';

const ROOT = resolve(import.meta.dirname, '../..');
const tmp = mkdtempSync(join(tmpdir(), 'rmas-lock-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const rowsFile = join(tmp, 'rows.jsonl');
writeFileSync(rowsFile, arithmeticRows(6).map((r) => JSON.stringify(r)).join('\n'));
const questions = join(tmp, 'questions.jsonl');
writeFileSync(questions, toJsonl(taskSplit('test').slice(0, 4)));
const HOST = hostname();

const owner = (output: string) => JSON.parse(readFileSync(lockPathOf(output), 'utf8')) as LockOwner;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * `rmas ARGS` as its own process, stopped (SIGSTOP) as soon as it holds the lock of `output`: its pid (from the lock
 * file), and `finish()`, which lets it go on and resolves with its exit code and stderr.
 */
async function holder(output: string, args: string[]) {
  const child = spawn(process.execPath, [join(ROOT, 'bin/rmas.js'), ...args], {
    cwd: tmp, env: { ...process.env, RMAS_TINY_SYSTEM: '' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += String(d)));
  const done = new Promise<{ code: number | null; err: string }>((r) => child.on('close', (code) => r({ code, err })));
  for (let i = 0; !existsSync(lockPathOf(output)); i++) {
    if (i > 600 || child.exitCode !== null) throw new Error(`the first run never took its lock: ${err}`);
    await sleep(50);
  }
  // the lock file is written in one call right after its exclusive create: read it once whole
  let o: LockOwner | null = null;
  while (!o) o = await Promise.resolve().then(() => owner(output)).catch(() => sleep(10).then(() => null));
  process.kill(o.pid, 'SIGSTOP');
  return { pid: o.pid, finish: () => (process.kill(o.pid, 'SIGCONT'), done) };
}

const refusal = (flag: string, output: string, pid: number) =>
  `rmas: OutputLocked: --${flag} ${output} is being written by another rmas process: pid ${pid} on host ${HOST}`;

const innerArgs = (save: string) => ['train-inner', '--backend', 'cpu', '--model_name_or_path', join(ROOT, 'models/tiny/qwen3-tiny'),
  '--mas_design', 'sequential', '--mas_role', 'planner', '--dataset_name', rowsFile, '--save_dir', save, '--max_steps', '3',
  '--save_steps', '1', '--batch_size', '2', '--adapter_lr', '1e-2', '--warmup_steps', '1', '--seed', '3'];

describe('a second writer of an output is refused by name', () => {
  it('two train-inner on one --save_dir: the second exits 1 naming the first (pid, host); the first ends as it would alone', async () => {
    const save = join(tmp, 'planner');
    const first = await holder(save, innerArgs(save));
    const second = await rmasInProcess(...innerArgs(save));
    expect(second.code).toBe(1);
    expect(second.err).toContain(refusal('save_dir', save, first.pid));
    expect(second.err).not.toContain('loading rows');
    const r = await first.finish();
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain(`done: 3 steps; saved to ${save}`);
    // the first run's checkpoints are whole and are the bytes of the same run alone
    const alone = join(tmp, 'planner-alone');
    expect((await rmasInProcess(...innerArgs(alone))).code).toBe(0);
    for (const f of ['adapter.safetensors', 'optimizer.safetensors', 'checkpoint-2/adapter.safetensors'])
      expect(readFileSync(join(save, f)).equals(readFileSync(join(alone, f))), f).toBe(true);
    expect((await readLinkFile(join(save, 'adapter.safetensors'))).size).toBeGreaterThan(0);
    expect(existsSync(lockPathOf(save))).toBe(false);
  }, 120_000);

  it('two run --resume on one result file: the second exits 1; the file holds each question once and one summary', async () => {
    const file = join(tmp, 'results.jsonl');
    const run = ['run', '--style', 'tiny_sequential', '--backend', 'cpu', '--dataset', questions, '--greedy', '--num_recursive_rounds',
      '1', '--latent_length', '2', '--max_new_tokens', '12', '--result_jsonl', file];
    // a run cut after its first record, as a kill leaves it
    expect((await rmasInProcess(...run, '--num_samples', '1')).code).toBe(0);
    writeFileSync(file, readFileSync(file, 'utf8').split('\n').slice(0, 2).map((l) => `${l}\n`).join(''));
    const first = await holder(file, [...run, '--resume']);
    const second = await rmasInProcess(...run, '--resume');
    expect(second.code).toBe(1);
    expect(second.err).toContain(refusal('result_jsonl', file, first.pid));
    const r = await first.finish();
    expect(r.code, r.err).toBe(0);
    const recs = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; sample_idx?: number });
    expect(recs.map((x) => x.type)).toEqual(['config', 'sample', 'sample', 'sample', 'sample', 'summary']);
    expect(recs.filter((x) => x.type === 'sample').map((x) => x.sample_idx)).toEqual([0, 1, 2, 3]);
  }, 120_000);

  it('two ask --output_jsonl OUT: the second exits 1; OUT holds the first\'s two records', async () => {
    const out = join(tmp, 'answers.jsonl');
    const ask = ['ask', '--backend', 'cpu', '--greedy', '--num_recursive_rounds', '1', '--latent_length', '2', '--max_new_tokens', '8',
      '-q', 'Tom has 6 pens. He gives away 3. How many pens does Tom have now?', '-q', 'Ann has 2 cats and gets 1 more. How many?',
      '--output_jsonl', out];
    const first = await holder(out, ask);
    const second = await rmasInProcess(...ask);
    expect(second.code).toBe(1);
    expect(second.err).toContain(refusal('output_jsonl', out, first.pid));
    const r = await first.finish();
    expect(r.code, r.err).toBe(0);
    const recs = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { index: number });
    expect(recs.map((x) => x.index)).toEqual([0, 1]);
  }, 120_000);
});

describe('stale and foreign locks', () => {
  /** A pid that was alive a moment ago and is gone now. */
  const deadPid = () => spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
  const lockFor = (output: string, o: Partial<LockOwner>) => {
    mkdirSync(join(output, '..'), { recursive: true });
    writeFileSync(lockPathOf(output), JSON.stringify({
      pid: 1, host: HOST, command: 'train-inner', since: '2026-01-01T00:00:00.000Z', proc_start: null, token: 'old', ...o,
    }));
  };

  it('a lock whose process died (same host) is taken over: the run trains and the lock goes at its end', async () => {
    const save = join(tmp, 'stale');
    lockFor(save, { pid: Number(deadPid()) });
    const r = await train('inner', { model_name_or_path: 'models/tiny/qwen3-tiny', mas_design: 'sequential', mas_role: 'planner',
      dataset_name: rowsFile, save_dir: save, max_steps: '1', batch_size: '2' });
    expect(r.error).toBeNull();
    expect(r.out).toContain('"steps":1');
    expect(existsSync(lockPathOf(save))).toBe(false);
  });

  it('a PID now used by a later process is stale; a live owner here, or any owner on another host, is not', () => {
    const out = join(tmp, 'plain.jsonl');
    // this very process, but started at another time: the owner is gone and its PID reused
    lockFor(out, { pid: process.pid, proc_start: '1' });
    const file = lockOutput('output_jsonl', out, 'ask');
    expect(owner(out).pid).toBe(process.pid);
    expect(owner(out).token).not.toBe('old');
    // held by this process now: a second taker is refused, naming it
    expect(() => lockOutput('output_jsonl', out, 'ask')).toThrow(new OutputLocked(`--output_jsonl ${out} is being written by another ` +
      `rmas process: pid ${process.pid} on host ${HOST} (ask, since ${owner(out).since}). Wait for it to finish or stop it, or give ` +
      'another --output_jsonl; nothing was written'));
    releaseOutput(file);
    expect(existsSync(file)).toBe(false);
    lockFor(out, { pid: Number(deadPid()), host: 'elsewhere' });
    let e: Error | null = null;
    try {
      lockOutput('output_jsonl', out, 'ask');
    } catch (x) {
      e = x as Error;
    }
    expect(e).toBeInstanceOf(OutputLocked);
    expect(e!.message).toMatch(new RegExp('on host elsewhere \\(train-inner, since 2026-01-01T00:00:00.000Z\\)\\. .*' +
      'If that process is gone, ' +
      `delete ${lockPathOf(out).replaceAll('.', '\\.')} \\(a lock from another host cannot be checked from here\\)$`));
    expect(owner(out).host).toBe('elsewhere');
  });

  it('a lock goes when its command fails, and the next run takes the output', async () => {
    const save = join(tmp, 'fails');
    const bad = await train('inner', { model_name_or_path: join(tmp, 'no-model'), mas_design: 'sequential', mas_role: 'planner',
      dataset_name: rowsFile, save_dir: save, max_steps: '1', batch_size: '2' });
    expect(bad.error?.name).toBe('MissingCheckpoint');
    expect(existsSync(lockPathOf(save))).toBe(false);
  });
});
