/**
 * NCCL on the CUDA emulator: the addon's run-time NCCL (native/cuda/src/nccl.cc) loading the emulated one
 * (native/cuda/emu/nccl_emu.cc), and src/dist/nccl.ts's openNccl over an MPI group. Under `mpirun -np 2` and `-np 3`
 * (test/dist/rank-nccl.ts), cuda tensors with rank-dependent values are summed and broadcast, in chunks past one
 * slot, through a view and after a kernel, and every rank must hold the exact results; RMAS_NCCL naming a missing
 * file is DistUnavailable on every rank. Without MPI, plain processes sharing the id through a file show that a wait
 * fails instead of hanging: a peer that exited is ncclRemoteError at once, a peer that never came is ncclSystemError
 * after RMAS_NCCL_EMU_TIMEOUT; bench/cuda.ts's part (i), the two-GPU check, runs on two emulated devices. The
 * nvcc-built addon (when built) loads without NCCL and says why when asked for it. Real NCCL needs GPUs:
 * `npm run test:cuda` runs part (i) on a machine with two.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { which } from '../scripts/build-tools.mjs';
import { singleProcess } from '../src/dist/group';
import { ncclVersionText, openNccl } from '../src/dist/nccl';
import { parseLinkBytes } from '../src/mas/upstream';
import { CpuBackend } from '../src/tensor/cpu';
import { arithmeticRows } from './train/fixtures';
import { mpiAddonBuilt, mpiEnv, mpirunPath } from './util/mpi';

const ROOT = resolve(import.meta.dirname, '..');
const ADDON = join(ROOT, 'native/cuda/build-emu/rmas_cuda.node');
const gxx = which('g++');
const mpiBuilt = mpiAddonBuilt;
/** CI has g++, Open MPI and the MPI addon (scripts/setup-system.sh, npm install): there these tests must run. */
const mustRun = !!process.env.CI;
if (!gxx) console.log('skipped: the emulated NCCL needs g++ to build the CUDA emulator (Debian: apt-get install g++)');
if (!mpirunPath || !mpiBuilt)
  console.log('skipped: openNccl under mpirun needs Open MPI and the MPI addon (npm run setup:system, npm install)');

const dir = mkdtempSync(join(tmpdir(), 'rmas-nccl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ENV = mpiEnv({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RMAS_CUDA') && !k.startsWith('RMAS_NCCL'))),
  RMAS_CUDA_ADDON: ADDON,
});

let built = false;
/** Builds the emulator once for this file (incremental: quick when test/cuda-emu.test.ts built it already). */
function buildEmulator() {
  if (built) return;
  execFileSync(process.execPath, [join(ROOT, 'scripts/build-cuda-emu.mjs')], { cwd: ROOT, stdio: 'inherit', timeout: 900_000 });
  built = true;
}

/** The emulated NCCL's segments in /dev/shm (the ranks unlink theirs once all have joined, or on failure). */
const segments = () => (existsSync('/dev/shm') ? readdirSync('/dev/shm').filter((n) => n.startsWith('rmas-nccl-')) : []);

type Rank = Record<string, any>;
function mpirun(np: number, env: Record<string, string> = {}): Rank[] {
  const r = spawnSync(mpirunPath!, ['-np', String(np), '--oversubscribe', process.execPath, '--import', 'tsx', 'test/dist/rank-nccl.ts'], {
    cwd: ROOT, env: { ...ENV, ...env }, encoding: 'utf8', timeout: 300_000,
  });
  expect(r.status, r.stderr).toBe(0);
  return r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Rank).sort((a, b) => a.rank - b.rank);
}

describe('openNccl without a GPU backend (no build needed)', () => {
  it('refuses a backend other than cuda with DistUnavailable, naming the host path', async () => {
    const e = await openNccl(singleProcess(), new CpuBackend('f32')).catch((x: unknown) => x as Error);
    expect(e).toMatchObject({ name: 'DistUnavailable' });
    expect((e as Error).message).toMatch(/^NCCL cannot be used \(rank 0: NCCL collectives need the cuda backend, this rank runs .*\); /);
    expect((e as Error).message).toMatch(/without NCCL the collectives take the host path \(MPI on host buffers\)$/);
  });

  it("reads NCCL's version codes, both encodings", () => {
    expect([ncclVersionText(22105), ncclVersionText(2708), ncclVersionText(21900)]).toEqual(['2.21.5', '2.7.8', '2.19.0']);
  });
});

describe.skipIf(!mustRun && !(gxx && mpirunPath && mpiBuilt))('openNccl on the CUDA emulator under mpirun', () => {
  beforeAll(buildEmulator, 920_000);

  it('g++, Open MPI and the MPI addon are installed', () => {
    expect({ gxx: !!gxx, mpirun: !!mpirunPath, mpiAddon: mpiBuilt }).toEqual({ gxx: true, mpirun: true, mpiAddon: true });
  });

  for (const np of [2, 3]) {
    it(`${np} ranks: all-reduce and broadcast give every rank the exact sums and root's values`, () => {
      const before = segments();
      const ranks = mpirun(np);
      expect(ranks.map((x) => [x.rank, x.size])).toEqual(Array.from({ length: np }, (_, r) => [r, np]));
      // Σ_r of rank r's values; k = Σ_r (r + 1)
      const k = (np * (np + 1)) / 2;
      const sum = [2 * k, -2 * np * (np - 1), np, 2 * (2 ** np - 1)];
      for (const x of ranks) {
        expect(x.open).toBeUndefined();
        expect(x.probe).toEqual({ loaded: true, path: join(ROOT, 'native/cuda/build-emu/libnccl_emu.so'), version: 21900, error: null });
        expect(x.description).toBe(`NCCL 2.19.0 (${x.probe.path}) on cuda:0, rank ${x.rank} of ${np}`);
        expect(x.sum).toEqual(sum);
        expect(x.sumThenAdd).toEqual(sum.map((v) => v + 1));
        // 300000 values in two chunks of the emulator's slots: (i mod 7)·k everywhere
        expect(x.big).toEqual({ mismatches: 0, samples: [2, 6, 1, 2, 6].map((m) => m * k) });
        // a view over elements 64..127: summed there (Σ_r i + 1000 r), this rank's own values before it
        const thousands = (1000 * np * (np - 1)) / 2;
        expect(x.view).toEqual({ before: [1000 * x.rank, 63 + 1000 * x.rank], inside: [64 * np + thousands, 127 * np + thousands] });
        expect(x.bcast).toEqual([0, 1, 2, 3, 4].map((i) => 10 * (np - 1) + i));
        expect(x.bigBcastMismatches).toBe(0);
        expect(x.i32.name).toBe('InvalidArgument');
        expect(x.i32.message).toMatch(/^allReduceSum: Tensor#\d+\(cuda, \[2\], i32\) is i32; NCCL collectives here take f32 tensors only$/);
        expect(x.badRoot.message).toBe(`broadcast: root ${np} is not a rank of this group (0..${np - 1})`);
        expect(x.closed.message).toBe('allReduceSum: the NCCL communicator was closed');
      }
      expect(segments()).toEqual(before);
    }, 300_000);
  }

  it('RMAS_NCCL naming a missing file: the probe says why, and openNccl is DistUnavailable on every rank', () => {
    const missing = join(dir, 'no-such-libnccl.so.2');
    const ranks = mpirun(2, { RMAS_NCCL: missing });
    for (const x of ranks) {
      expect(x.probe).toMatchObject({ loaded: false, path: null, version: null });
      expect(x.probe.error).toContain(missing);
      expect(x.open.name).toBe('DistUnavailable');
      expect(x.open.message).toMatch(/^NCCL cannot be used \(ranks 0, 1: NCCL does not load: NCCL not found/);
      expect(x.open.message).toMatch(/RMAS_NCCL must name a loadable libnccl\.so\.2 \(NVIDIA's libnccl2\)/);
      expect(x.open.message).toMatch(/without NCCL the collectives take the host path/);
    }
  }, 300_000);

  describe('rmas train-inner --backend cuda over 2 ranks (one emulated GPU each)', () => {
    const rows = join(dir, 'rows.jsonl');
    const train = (np: number, save: string, batch: number, env: Record<string, string> = {}) => {
      const argv = [join(ROOT, 'bin/rmas.js'), 'train-inner', '--model_name_or_path', 'models/tiny/qwen3-tiny', '--mas_design',
        'sequential', '--mas_role', 'planner', '--dataset_name', rows, '--max_steps', '3', '--adapter_lr', '1e-2', '--warmup_steps', '1',
        '--seed', '3', '--backend', 'cuda', '--save_steps', '0', '--batch_size', String(batch), '--save_dir', save];
      const cmd = np > 1 ? [mpirunPath!, ['-np', String(np), '--oversubscribe', process.execPath, ...argv]] as const
        : [process.execPath, argv] as const;
      const all = { ...ENV, RMAS_CUDA_EMU_DEVICES: '2', ...env };
      return spawnSync(cmd[0], cmd[1], { cwd: ROOT, env: all, encoding: 'utf8', timeout: 300_000 });
    };
    const values = (file: string) =>
      [...parseLinkBytes(new Uint8Array(readFileSync(file)), file).values()].flatMap((t) => Array.from(t.data));

    it('gradients summed by the emulated NCCL, or on the host, give the links of one process with the whole batch', () => {
      writeFileSync(rows, arithmeticRows(12).map((r) => JSON.stringify(r)).join('\n'));
      const one = train(1, join(dir, 'cuda-1'), 4);
      expect(one.status, one.stderr).toBe(0);
      const want = values(join(dir, 'cuda-1', 'adapter.safetensors'));
      for (const [name, env] of [['nccl', {}], ['host', { RMAS_COLLECTIVES: 'host' }]] as const) {
        const r = train(2, join(dir, `cuda-2-${name}`), 2, env);
        expect(r.status, r.stderr).toBe(0);
        if (name === 'nccl') expect(r.stderr).toMatch(/gradients summed by NCCL 2\.19\.0 \(.*libnccl_emu\.so\) on cuda:0, rank 0 of 2/);
        else expect(r.stderr).not.toContain('gradients summed by NCCL');
        const got = values(join(dir, `cuda-2-${name}`, 'adapter.safetensors'));
        expect(Math.max(...got.map((x, i) => Math.abs(x - want[i]!)))).toBeLessThan(1e-6);
      }
    }, 600_000);

    it('a rank that fails before the first collective stops the job at once (it leaves without MPI_Finalize)', () => {
      // one emulated GPU for two ranks: rank 1 has no device 1
      const t0 = Date.now();
      const r = train(2, join(dir, 'cuda-fail'), 2, { RMAS_CUDA_EMU_DEVICES: '1' });
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/rmas: \[rank 1\] CudaUnavailable: CUDA device 1 does not exist \(1 device found\)/);
      expect(Date.now() - t0).toBeLessThan(120_000);
    }, 300_000);
  });
});

/**
 * A rank as a plain process (no MPI): rank 0 writes the unique id to `idFile`, the others wait for it; then it
 * joins, and (unless `leave`) sums [rank + 1] once. Prints one JSON line.
 */
const RANK_SCRIPT = `
const fs = require('node:fs');
const [idFile, rank, n, leave] = process.argv.slice(1);
const a = require(${JSON.stringify(ADDON)});
a.init(0);
const out = { rank: Number(rank) };
let id;
if (rank === '0') {
  id = a.ncclUniqueId();
  fs.writeFileSync(idFile + '.part', id);
  fs.renameSync(idFile + '.part', idFile);
} else {
  while (!fs.existsSync(idFile)) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
  id = new Uint8Array(fs.readFileSync(idFile));
}
const t0 = Date.now();
try {
  const comm = a.ncclCommInit(id, Number(n), Number(rank));
  if (leave === 'leave') process.exit(0);
  const p = a.malloc(4);
  a.upload(p, new Uint8Array(new Float32Array([Number(rank) + 1]).buffer));
  a.ncclAllReduce(comm, p, 1);
  out.sum = new Float32Array(a.download(p, 4).buffer)[0];
} catch (e) {
  out.error = { message: e.message, ncclResult: e.ncclResult };
}
out.seconds = (Date.now() - t0) / 1000;
process.stdout.write(JSON.stringify(out) + '\\n');
`;

function rankProcess(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((done) => {
    const p = spawn(process.execPath, ['-e', RANK_SCRIPT, ...args], { env: { ...ENV, ...env } });
    let [out, err] = ['', ''];
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('close', (code) => done({ code, out, err }));
  });
}

describe.skipIf(!mustRun && !gxx)('the emulated NCCL between plain processes: waits fail, never hang', () => {
  beforeAll(buildEmulator, 920_000);

  it('two processes sum through a file-shared id; a peer that exited is ncclRemoteError at once, naming it', async () => {
    const before = segments();
    const ok = await Promise.all([0, 1].map((r) => rankProcess([join(dir, 'id-ok'), String(r), '2'])));
    expect(ok.map((x) => JSON.parse(x.out).sum)).toEqual([3, 3]);
    const [r0, r1] = await Promise.all([
      rankProcess([join(dir, 'id-left'), '0', '2']),
      rankProcess([join(dir, 'id-left'), '1', '2', 'leave']),
    ]);
    expect(r1.code).toBe(0);
    const got = JSON.parse(r0.out);
    expect(got.error.ncclResult).toBe(6);
    expect(got.error.message).toMatch(
      /^ncclAllReduce failed: ncclRemoteError \(6\): .*rank 0 of 2: ncclAllReduce: rank 1 \(pid \d+\) has exited$/,
    );
    expect(got.seconds).toBeLessThan(10);
    expect(segments()).toEqual(before);
  }, 120_000);

  it('a peer that never joins: ncclCommInit fails with ncclSystemError after RMAS_NCCL_EMU_TIMEOUT, and leaves no segment', async () => {
    const before = segments();
    const r = await rankProcess([join(dir, 'id-alone'), '0', '2'], { RMAS_NCCL_EMU_TIMEOUT: '1' });
    const got = JSON.parse(r.out);
    expect(got.error.ncclResult).toBe(2);
    expect(got.error.message).toMatch(
      /^ncclCommInitRank \(rank 0 of 2\) failed: ncclSystemError \(2\): .*did not arrive within 1 s \(never joined: rank 1\)/,
    );
    expect(got.seconds).toBeGreaterThanOrEqual(1);
    expect(got.seconds).toBeLessThan(10);
    expect(segments()).toEqual(before);
  }, 120_000);

  it("bench/cuda.ts part (i) on two emulated devices: two processes, values exact, the bus bandwidth printed", () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/cuda.ts'], {
      cwd: ROOT, env: { ...ENV, RMAS_CUDA_ONLY: 'nccl', RMAS_CUDA_EMU_DEVICES: '2' }, encoding: 'utf8', timeout: 300_000,
    });
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    expect(r.stdout).toMatch(
      /^\(i\) nccl 2\.19\.0 \(\S+libnccl_emu\.so\), 2 processes on cuda:0 and cuda:1: .* every value exact on both ranks$/m,
    );
    expect(r.stdout).toMatch(/^\(i\) nccl all-reduce of 4 MiB: \d+ µs, bus bandwidth [\d.]+ GB\/s$/m);
    expect(r.stdout).toMatch(/^all cuda checks passed$/m);
  }, 300_000);
});

const REAL_ADDON = join(ROOT, 'native/cuda/build/rmas_cuda.node');
if (!existsSync(REAL_ADDON)) console.log(`skipped: the nvcc-built addon's NCCL loading needs ${REAL_ADDON} (npm run build:cuda)`);

describe.skipIf(!existsSync(REAL_ADDON) || !gxx)('the nvcc-built addon: NCCL is opened on first use only', () => {
  beforeAll(buildEmulator, 920_000);
  /** ncclProbe() and what asking for a unique id and a communicator gives, in a process with RMAS_NCCL=`lib`. */
  const withLibrary = (lib: string) => {
    const body = `const a = require(${JSON.stringify(REAL_ADDON)});
      const tryIt = (f) => { try { return f(); } catch (e) { return { error: e.message }; } };
      const id = tryIt(() => a.ncclUniqueId().length);
      const comm = tryIt(() => a.ncclCommInit(new Uint8Array(128), 2, 0));
      process.stdout.write(JSON.stringify({ probe: a.ncclProbe(), id, comm }));`;
    const r = spawnSync(process.execPath, ['-e', body], { env: { ...ENV, RMAS_NCCL: lib }, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    return JSON.parse(r.stdout) as { probe: Record<string, unknown>; id: number | { error: string }; comm: { error: string } };
  };

  it('RMAS_NCCL naming a missing file: the addon loads; the probe and a unique id say why', () => {
    const missing = join(dir, 'missing-libnccl.so.2');
    const got = withLibrary(missing);
    expect(got.probe).toMatchObject({ loaded: false, path: null, version: null });
    expect(got.probe.error).toMatch(new RegExp(`^NCCL not found \\(${missing.replace(/[.]/g, '\\.')}: cannot open shared object file`));
    expect(got.id).toEqual({ error: `ncclUniqueId: ${got.probe.error}` });
  });

  it('RMAS_NCCL naming a library that is not NCCL: refused with the symbols it lacks, and nothing of it is used', () => {
    const other = join(ROOT, 'native/cuda/build-emu/libcublasLt_emu.so');
    const got = withLibrary(other);
    expect(got.probe).toMatchObject({ loaded: false, path: null, version: null });
    expect(got.probe.error).toBe(`NCCL not found (${other} lacks ncclGetVersion, ncclGetUniqueId, ncclCommInitRank, ncclCommDestroy, ` +
      'ncclAllReduce, ncclBroadcast, ncclGetErrorString); RMAS_NCCL must name a loadable libnccl.so.2 (NVIDIA\'s libnccl2), or be unset');
  });

  it('the emulated NCCL through RMAS_NCCL: our declarations find every entry point; a communicator needs an open device', () => {
    const lib = join(ROOT, 'native/cuda/build-emu/libnccl_emu.so');
    const got = withLibrary(lib);
    expect(got.probe).toEqual({ loaded: true, path: lib, version: 21900, error: null });
    expect(got.id).toBe(128);
    expect(got.comm.error).toBe('ncclCommInit: call init(device) first');
  });
});
