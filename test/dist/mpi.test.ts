/**
 * Data-parallel training and sharded evaluation under Open MPI's mpirun, on the CPU backend and the committed
 * tiny models (docs/distributed.md): the process group's collectives across 3 ranks; `rmas train-inner` and
 * `train-outer` over 2 ranks with --batch_size B against one process with 2B (links within 1e-6, the same
 * losses, batches and token counts); rank 0 alone writes --save_dir; a rank killed mid-run stops the job with
 * RankLost naming the checkpoint, and --resume continues it, at 2 ranks bit for bit as an uninterrupted run, at
 * 1 rank within 1e-6; `rmas run` over 2 ranks writes the records of one process, and takes in the part files of
 * an interrupted sharded run.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { singleProcess } from '../../src/dist/group';
import { launcherWorld, openProcessGroup } from '../../src/dist/mpi';
import { priceJsonl, priceSplit } from '../../src/eval/tiny-prices';
import { readLinkFile } from '../../src/mas/upstream';
import { rankDevices } from '../../src/runner/dist';
import { taskSplit, toJsonl } from '../../src/eval/tiny-task';
import { bashLines, words } from '../util/markdown';
import { mpiAddonBuilt, mpiEnv, mpirunPath } from '../util/mpi';
import { arithmeticRows } from '../train/fixtures';

const ROOT = resolve(import.meta.dirname, '../..');
const RMAS = join(ROOT, 'bin/rmas.js');
const dir = mkdtempSync(join(tmpdir(), 'rmas-dist-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const addonBuilt = mpiAddonBuilt;
/** CI installs Open MPI (scripts/setup-system.sh) and builds the addon (npm install): there these tests must run. */
const mustRun = !!process.env.CI;
const ENV = mpiEnv({ ...process.env, RMAS_TINY_SYSTEM: '' });

interface Ran { code: number | null; out: string; err: string }
function mpirun(np: number, argv: string[]): Ran {
  const r = spawnSync(mpirunPath!, ['-np', String(np), '--oversubscribe', process.execPath, ...argv], {
    cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 180_000,
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
function one(argv: string[]): Ran {
  const r = spawnSync(process.execPath, argv, { cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 180_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** The largest difference between two link files' values (same names and shapes asserted). */
async function linkDiff(a: string, b: string): Promise<number> {
  const [x, y] = [await readLinkFile(a), await readLinkFile(b)];
  expect([...x.keys()].sort()).toEqual([...y.keys()].sort());
  let worst = 0;
  for (const [k, t] of x) {
    const u = y.get(k)!;
    expect(u.shape).toEqual(t.shape);
    for (let i = 0; i < t.data.length; i++) worst = Math.max(worst, Math.abs(t.data[i]! - u.data[i]!));
  }
  return worst;
}
const jsonl = (file: string) => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
/** A step log without its clock readings. */
const steps = (file: string) => jsonl(file).map(({ elapsed_s: _e, tokens_per_sec: _t, ...rest }) => rest);

describe('launcher environment and device shares (no MPI needed)', () => {
  it('reads the rank and world size that Open MPI, Hydra or a RANK/WORLD_SIZE launcher set', () => {
    expect(launcherWorld({})).toBeNull();
    expect(launcherWorld({ OMPI_COMM_WORLD_RANK: '1', OMPI_COMM_WORLD_SIZE: '4', OMPI_COMM_WORLD_LOCAL_RANK: '1' }))
      .toEqual({ rank: 1, size: 4, localRank: 1, source: 'OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE' });
    expect(launcherWorld({ PMI_RANK: '2', PMI_SIZE: '3' })).toEqual({ rank: 2, size: 3, localRank: 2, source: 'PMI_RANK/PMI_SIZE' });
    expect(launcherWorld({ RANK: '0', WORLD_SIZE: '2', LOCAL_RANK: '0' })?.size).toBe(2);
    expect(() => launcherWorld({ RANK: '0' })).toThrow(/WORLD_SIZE is set but|RANK is set but WORLD_SIZE is not/);
    expect(() => launcherWorld({ RANK: '2', WORLD_SIZE: '2' })).toThrow(/must be below the world size/);
    expect(() => launcherWorld({ RANK: 'x', WORLD_SIZE: '2' })).toThrow(/expected a non-negative integer/);
  });

  it('without a launcher (or in a world of 1) a process is single; several ranks without the addon are DistUnavailable', async () => {
    for (const env of [{}, { RANK: '0', WORLD_SIZE: '1' }]) {
      const g = openProcessGroup(env);
      expect([g.rank, g.size, g.description]).toEqual([0, 1, 'single process']);
      const x = Float32Array.of(1, 2);
      expect(await g.allReduce(x)).toBe(x);
    }
    expect(await singleProcess().allGather(Uint8Array.of(3))).toEqual([Uint8Array.of(3)]);
    const env = { OMPI_COMM_WORLD_RANK: '0', OMPI_COMM_WORLD_SIZE: '2', RMAS_MPI_ADDON: join(dir, 'none.node') };
    expect(() => openProcessGroup(env)).toThrow(
      expect.objectContaining({ name: 'DistUnavailable', message: expect.stringMatching(/MPI addon is not built.*npm run build:mpi/) }),
    );
  });

  it('each rank of a machine takes its equal share of --devices', () => {
    expect(rankDevices([0, 1, 2, 3], 'cuda', { localRank: 1, localSize: 2 })).toEqual([2, 3]);
    expect(rankDevices([5], 'cuda', { localRank: 0, localSize: 1 })).toEqual([5]);
    expect(rankDevices(undefined, 'cuda', { localRank: 3, localSize: 4 })).toEqual([3]);
    expect(rankDevices(undefined, 'cpu', { localRank: 1, localSize: 2 })).toBeUndefined();
    expect(() => rankDevices([0, 1, 2], 'cuda', { localRank: 0, localSize: 2 })).toThrow(/give a multiple of 2 devices/);
  });
});

describe.skipIf(!mustRun && !(mpirunPath && addonBuilt))('under mpirun', () => {
  it('Open MPI and the MPI addon are installed (scripts/setup-system.sh, then npm install builds native/mpi)', () => {
    expect({ mpirun: !!mpirunPath, addon: addonBuilt }).toEqual({ mpirun: true, addon: true });
  });

  it('the collectives give every rank the same reductions, broadcasts and gathers (3 ranks)', () => {
    const r = mpirun(3, ['--import', 'tsx', 'test/dist/rank-collectives.ts']);
    expect(r.code, r.err).toBe(0);
    const ranks = r.out.trim().split('\n').map((l) => JSON.parse(l) as Record<string, any>).sort((a, b) => a.rank - b.rank);
    expect(ranks.map((x) => [x.rank, x.size, x.localRank, x.localSize])).toEqual([[0, 3, 0, 3], [1, 3, 1, 3], [2, 3, 2, 3]]);
    const size = ranks[0].grad.length;
    for (const x of ranks) {
      expect(x.sum).toEqual([6, -6, 1.5]);
      expect(x.max).toEqual([2, 0]);
      expect(x.min).toEqual([0.25]);
      expect(x.bcast).toEqual([2, 3, 4]);
      expect(x.gather).toEqual([[], [11], [12, 12]]);
      expect(x.json).toEqual([{ r: 0, text: '' }, { r: 1, text: 'é' }, { r: 2, text: 'éé' }]);
      expect(x.bjson).toEqual({ from: 0, list: [1, 2, 3] });
      expect(x.fromRoot).toEqual({ picked: 0 });
      expect(x.params).toEqual([0, 1, 2, 3, 4, 5]);
      expect(x.digestAfter).toBe(ranks[0].digestAfter);
      // Σ_r (i + 1)(r + 1) = 6 (i + 1)
      expect(x.grad).toEqual(Array.from({ length: size }, (_, i) => 6 * (i + 1)));
      expect(x.diverged.name).toBe('RanksDiverged');
      expect(x.diverged.message).toMatch(/after a rank changed its values: rank 0 holds links with digest \w{16}, rank 2 \w{16}/);
    }
    expect(new Set(ranks.map((x) => x.digestBefore)).size).toBe(3);
    expect(ranks[0].fromRootError).toEqual({ name: 'RangeError', message: 'only rank 0 knows', echoed: 'undefined' });
    expect(ranks[1].fromRootError).toEqual({ name: 'RangeError', message: '(rank 0) only rank 0 knows', echoed: 'number' });
  });

  it('RANK/WORLD_SIZE from a launcher that does not start MPI jobs is DistUnavailable, not a silent single process', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'test/dist/rank-collectives.ts'], {
      cwd: ROOT, env: { ...ENV, RANK: '0', WORLD_SIZE: '2' }, encoding: 'utf8', timeout: 60_000,
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/DistUnavailable: RANK\/WORLD_SIZE say rank 0 of 2, but MPI formed rank 0 of 1.*launch with mpirun -np 2/);
  });

  const rows = join(dir, 'rows.jsonl');
  writeFileSync(rows, arithmeticRows(12).map((r) => JSON.stringify(r)).join('\n'));
  const inner = (steps: number, save: string, batch: number, extra: string[] = []) => [
    RMAS, 'train-inner', '--model_name_or_path', 'models/tiny/qwen3-tiny', '--mas_design', 'sequential', '--mas_role', 'planner',
    '--dataset_name', rows, '--max_steps', String(steps), '--adapter_lr', '1e-2', '--warmup_steps', '1', '--seed', '3', '--backend', 'cpu',
    '--save_steps', '2', '--batch_size', String(batch), '--save_dir', save, ...extra,
  ];

  it('train-inner over 2 ranks of batch 2 equals one process of batch 4; rank 0 alone writes the save_dir', async () => {
    const single = join(dir, 'inner-1');
    const a = one(inner(3, single, 4, ['--log_jsonl', `${single}.jsonl`]));
    expect(a.code, a.err).toBe(0);
    // rank 1 is given another --save_dir (MPMD launch), which must stay unwritten
    const two = join(dir, 'inner-2');
    const other = join(dir, 'inner-2-rank1');
    const args = (save: string) => [process.execPath, ...inner(3, save, 2, ['--log_jsonl', `${save}.jsonl`])];
    const r = spawnSync(mpirunPath!, ['--oversubscribe', '-np', '1', ...args(two), ':', '-np', '1', ...args(other)], {
      cwd: ROOT, env: ENV, encoding: 'utf8', timeout: 180_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/data parallel over 2 ranks: 2 samples per rank and micro-batch, 4 in all/);
    expect(existsSync(other)).toBe(false);
    expect(existsSync(`${other}.jsonl`)).toBe(false);
    expect(readdirSync(two).sort()).toEqual(readdirSync(single).sort());
    expect(readdirSync(join(two, 'checkpoint-2')).sort()).toEqual(readdirSync(join(single, 'checkpoint-2')).sort());
    expect(await linkDiff(join(single, 'adapter.safetensors'), join(two, 'adapter.safetensors'))).toBeLessThan(1e-6);
    const [s1, s2] = [steps(`${single}.jsonl`), steps(`${two}.jsonl`)];
    expect(s2.map((s) => [s.step, s.batches, s.tokens, s.lr])).toEqual(s1.map((s) => [s.step, s.batches, s.tokens, s.lr]));
    s1.forEach((s, i) => {
      expect(Math.abs((s.loss as number) - (s2[i]!.loss as number))).toBeLessThan(1e-6);
      expect(Math.abs((s.grad_norm as number) - (s2[i]!.grad_norm as number))).toBeLessThan(1e-6);
    });
    expect(JSON.parse(r.stdout.trim())).toEqual({ steps: 3, save_dir: two, skipped: {}, dropped: {} });
  });

  it('train-outer over 2 ranks equals one process with the whole batch (tiny_distillation, 2 rounds)', async () => {
    const data = join(dir, 'prices.jsonl');
    writeFileSync(data, priceJsonl(priceSplit('train').slice(0, 16)));
    const outer = (save: string, batch: number) => [
      RMAS, 'train-outer', '--style', 'tiny_distillation', '--dataset_name', data, '--max_steps', '3', '--num_recursive_rounds', '2',
      '--outer_lr', '1e-3', '--warmup_steps', '0', '--backend', 'cpu', '--max_latent_tokens', '4', '--batch_size', String(batch),
      '--save_dir', save, '--log_jsonl', `${save}.jsonl`,
    ];
    const a = one(outer(join(dir, 'outer-1'), 4));
    expect(a.code, a.err).toBe(0);
    const b = mpirun(2, outer(join(dir, 'outer-2'), 2));
    expect(b.code, b.err).toBe(0);
    for (const link of ['outer_el.pt', 'outer_le.pt']) {
      expect(await linkDiff(join(dir, 'outer-1', link), join(dir, 'outer-2', link))).toBeLessThan(1e-6);
    }
    const [s1, s2] = [steps(join(dir, 'outer-1.jsonl')), steps(join(dir, 'outer-2.jsonl'))];
    expect(s2.map((s) => [s.batches, s.tokens])).toEqual(s1.map((s) => [s.batches, s.tokens]));
    s1.forEach((s, i) => expect(Math.abs((s.loss as number) - (s2[i]!.loss as number))).toBeLessThan(1e-6));
  });

  it('a killed rank stops the job with RankLost naming the checkpoint; --resume continues it at 2 ranks or 1', async () => {
    const run = join(dir, 'killed');
    const log = `${run}.jsonl`;
    const child = spawn(mpirunPath!, ['-np', '2', '--oversubscribe', process.execPath, ...inner(30, run, 2, ['--log_jsonl', log])], {
      cwd: ROOT, env: ENV,
    });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
    // once step 3 is logged (checkpoint-2 saved), rank 1 is killed
    const t0 = Date.now();
    while (!(existsSync(log) && readFileSync(log, 'utf8').split('\n').length > 3)) {
      if (Date.now() - t0 > 120_000) throw new Error(`no third step within 120 s:\n${err}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    const pid = Number(/rank 1 of 2 \(local 1 of 2\): pid (\d+)/.exec(err)?.[1]);
    expect(pid).toBeGreaterThan(0);
    process.kill(pid, 'SIGKILL');
    const code = await exited;
    expect(code).not.toBe(0);
    const lost = /rmas: (?:\[rank 0\] )?RankLost: rank 0 of 2 .*/.exec(err)?.[0] ?? err;
    expect(lost).toMatch(
      new RegExp(`the last checkpoint is ${run}/checkpoint-\\d+; run the same command with --resume ${run} to continue`),
    );
    const at = Number(/checkpoint-(\d+)/.exec(lost)![1]);
    expect(at).toBeGreaterThanOrEqual(2);
    expect(at).toBeLessThan(30);

    // the same run uninterrupted, at 2 ranks and at 1
    const full2 = join(dir, 'full-2');
    expect(mpirun(2, inner(30, full2, 2)).code).toBe(0);
    const full1 = join(dir, 'full-1');
    expect(one(inner(30, full1, 4)).code).toBe(0);
    // a copy resumes at 1 rank (the whole batch in one process)
    const copy = join(dir, 'killed-copy');
    expect(spawnSync('cp', ['-r', run, copy]).status).toBe(0);
    const r2 = mpirun(2, inner(30, run, 2, ['--resume', run]));
    expect(r2.code, r2.err).toBe(0);
    expect(r2.err).toMatch(new RegExp(`resuming from ${run}/checkpoint-${at} at step ${at}`));
    expect(readFileSync(join(run, 'adapter.safetensors'))).toEqual(readFileSync(join(full2, 'adapter.safetensors')));
    const r1 = one(inner(30, copy, 4, ['--resume', copy]));
    expect(r1.code, r1.err).toBe(0);
    expect(await linkDiff(join(copy, 'adapter.safetensors'), join(full1, 'adapter.safetensors'))).toBeLessThan(1e-6);
  });

  describe('rmas run', () => {
    const data = join(dir, 'test-prices.jsonl');
    writeFileSync(data, priceJsonl(priceSplit('test').slice(0, 9)));
    const runArgs = (file: string, extra: string[] = []) => [
      RMAS, 'run', '--style', 'tiny_distillation', '--dataset', data, '--greedy', '--num_recursive_rounds', '2', '--backend', 'cpu',
      '--result_jsonl', file, ...extra,
    ];
    /** Records and summary without clock readings. */
    const records = (file: string) => jsonl(file).map(({ seconds: _s, seconds_mean: _m, ...rest }) => rest);
    const single = join(dir, 'run-1.jsonl');

    it('2 ranks write the records and summary of one process, and leave no part file', () => {
      const a = one(runArgs(single));
      expect(a.code, a.err).toBe(0);
      const file = join(dir, 'run-2.jsonl');
      const b = mpirun(2, runArgs(file));
      expect(b.code, b.err).toBe(0);
      expect(b.err).toMatch(/sharded over 2 ranks: rank 0 asks 5 of the 9 questions left/);
      expect(records(file)).toEqual(records(single));
      expect(records(file).map((r) => r.type)).toEqual(['config', ...Array(9).fill('sample'), 'summary']);
      expect(b.out).toBe(a.out);
      expect(readdirSync(dir).filter((n) => n.includes('.rank-'))).toEqual([]);
    });

    it('--resume takes in the part files of an interrupted sharded run and asks only what is left', () => {
      const recs = readFileSync(single, 'utf8').trim().split('\n');
      const [config, samples] = [recs[0]!, recs.slice(1, -1)];
      const file = join(dir, 'run-resumed.jsonl');
      // the interrupted run: 2 records in the file, 3 more in rank 1's part
      writeFileSync(file, `${config}\n${samples[0]}\n${samples[2]}\n`);
      writeFileSync(`${file}.rank-1`, `${config}\n${samples[1]}\n${samples[3]}\n${samples[5]}\n`);
      const refused = mpirun(2, runArgs(file));
      expect(refused.code).not.toBe(0);
      expect(refused.err).toMatch(/part files of an interrupted sharded run .*pass --resume/);
      const r = mpirun(2, runArgs(file, ['--resume']));
      expect(r.code, r.err).toBe(0);
      expect(r.err).toMatch(/took in 3 records of the part files/);
      expect(r.err).toMatch(/resuming .*: 5 of 9 questions recorded/);
      expect(r.err).toMatch(/rank 0 asks 2 of the 4 questions left/);
      const got = records(file);
      // the file holds its records in the order they came; as a set they are the single run's
      const byIdx = (xs: Record<string, unknown>[]) =>
        xs.filter((x) => x.type === 'sample').sort((x, y) => (x.sample_idx as number) - (y.sample_idx as number));
      expect(byIdx(got)).toEqual(byIdx(records(single)));
      expect(got.at(-1)).toEqual(records(single).at(-1));
      expect(existsSync(`${file}.rank-1`)).toBe(false);
    });
  });

  it('the README\'s mpirun lines run as written (npx rmas as bin/rmas.js) and give what one process gives', () => {
    const lines = bashLines(readFileSync(join(ROOT, 'README.md'), 'utf8'), 'mpirun ');
    expect(lines.map((l) => words(l).slice(0, 6).join(' '))).toEqual(['mpirun -np 2 npx rmas train-inner', 'mpirun -np 2 npx rmas run']);
    const cwd = join(dir, 'readme');
    mkdirSync(join(cwd, 'data'), { recursive: true });
    for (const split of ['train', 'test'] as const) writeFileSync(join(cwd, 'data', `${split}.jsonl`), toJsonl(taskSplit(split)));
    symlinkSync(join(ROOT, 'models'), join(cwd, 'models'));
    for (const line of lines) {
      const w = words(line);
      const argv = [...w.slice(1, 3), '--oversubscribe', process.execPath, RMAS, ...w.slice(5)];
      const r = spawnSync(mpirunPath!, argv, { cwd, env: ENV, encoding: 'utf8', timeout: 300_000 });
      expect(r.status, `${line}\n${r.stderr.slice(-2000)}`).toBe(0);
      // the same command in one process, with the whole batch (train-inner) or every question (run)
      const solo = w.slice(5).map((x) => x.replace(/-dp\b/, '-solo'));
      if (w[5] === 'train-inner') solo.push('--batch_size', '4');
      const s1 = spawnSync(process.execPath, [RMAS, ...solo], { cwd, env: ENV, encoding: 'utf8', timeout: 300_000 });
      expect(s1.status, s1.stderr.slice(-2000)).toBe(0);
    }
    const records = (f: string) => jsonl(join(cwd, f)).map(({ seconds: _s, seconds_mean: _m, ...rest }) => rest);
    expect(records('out/test-dp.jsonl')).toEqual(records('out/test-solo.jsonl'));
    expect(records('out/test-dp.jsonl').filter((r) => r.type === 'sample')).toHaveLength(6);
    return linkDiff(join(cwd, 'out/planner-dp/adapter.pt'), join(cwd, 'out/planner-solo/adapter.pt'))
      .then((d) => expect(d).toBeLessThan(1e-6));
  });
});
