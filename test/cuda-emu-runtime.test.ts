/**
 * The CUDA emulator's own checks (native/cuda/emu: emu.h, runtime.cc, cublaslt_emu.cc), shown to fire.
 *
 * The emulator exists to run the cuda backend's kernels without a GPU and to catch the bugs a GPU hides or
 * hangs on. This file proves those checks can fail: native/cuda/emu/selftest.cu registers (in the emulator
 * build only) correct reference kernels and deliberately buggy ones -- a divergent barrier, a shuffle over
 * exited lanes, an off-by-one write, dynamic shared memory without the opt-in, a missing __syncthreads --
 * and every test asserts the exact outcome, values or error code and reason.
 *
 * Sticky errors (cudaErrorLaunchFailure, cudaErrorIllegalAddress) poison the process, and the runtime reads
 * its RMAS_CUDA_EMU_* configuration once, so those cases run in a child `node -e` that prints JSON.
 * The main process runs the defaults: 1 device, 16 GiB, forward fiber order.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { which } from '../scripts/build-tools.mjs';
import type { CudaAddon, CudaProbe } from '../src/gpu/cuda-addon';

const root = resolve(fileURLToPath(import.meta.url), '../..');
const buildDir = join(root, 'native/cuda/build-emu');
const addonFile = join(buildDir, 'rmas_cuda.node');
const ltFile = join(buildDir, 'libcublasLt_emu.so');

const gxx = which('g++');
if (!gxx) console.log('skipped: cuda emulator checks need g++ (C++17) to build native/cuda/build-emu');

/** What the addon throws, reduced to what the tests compare (null: the call did not throw). */
interface Failure {
  code: number;
  cudaError: string;
  message: string;
}
function failure(f: () => unknown): Failure | null {
  try {
    f();
    return null;
  } catch (e) {
    const x = e as Failure;
    return { code: x.code, cudaError: x.cudaError, message: x.message };
  }
}

/** The same helper inside a child (CommonJS `node -e`). */
const childPrelude = `
const a = require(${JSON.stringify(addonFile)});
const out = {};
const failure = (f) => { try { f(); return null; } catch (e) { return { code: e.code, cudaError: e.cudaError, message: e.message }; } };
const f32 = (xs) => new Uint8Array(new Float32Array(xs).buffer);
const floats = (p, n) => Array.from(new Float32Array(a.download(p, n * 4).buffer));
`;

/**
 * Runs `body` (which fills `out`) in a fresh node with exactly `env` for RMAS_CUDA_EMU_* (inherited ones
 * dropped), and returns `out`.
 */
function child(env: Record<string, string>, body: string): Record<string, any> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RMAS_CUDA_EMU_')));
  const r = spawnSync(process.execPath, ['-e', `${childPrelude}\n${body}\nprocess.stdout.write(JSON.stringify(out));`], {
    env: { ...base, ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`child exited with ${r.status} (${r.signal ?? 'no signal'}): ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, any>;
}

const f32 = (xs: readonly number[]): Uint8Array => new Uint8Array(new Float32Array(xs).buffer);

// x[i] = (i % 13) / 2 - 2: halves, so every partial sum is exact in f32 whatever the summation order
const sumInput = (n: number): number[] => Array.from({ length: n }, (_, i) => (i % 13) / 2 - 2);
const exactSum = (n: number): number => sumInput(n).reduce((s, v) => s + v, 0);

describe.skipIf(!gxx)('cuda emulator runtime (native/cuda/emu, selftest kernels)', () => {
  let a: CudaAddon;
  const floats = (p: bigint, n: number): number[] => Array.from(new Float32Array(a.download(p, n * 4).buffer));

  beforeAll(() => {
    execFileSync(process.execPath, [join(root, 'scripts/build-cuda-emu.mjs')], { cwd: root, stdio: 'inherit', timeout: 900_000 });
    // the main process runs the emulator's defaults, whatever the caller's environment says
    for (const k of Object.keys(process.env)) if (k.startsWith('RMAS_CUDA_EMU_')) delete process.env[k];
    a = createRequire(import.meta.url)(addonFile) as CudaAddon;
    a.init(0);
  }, 920_000);

  describe('in this process (1 device, 16 GiB, forward order)', () => {
    it('registers the selftest kernels (emulator build only) in name order', () => {
      const k = a.kernels();
      expect(k.filter((n) => n.startsWith('emu_selftest_'))).toEqual([
        'emu_selftest_block_sum',
        'emu_selftest_copy',
        'emu_selftest_divergent_barrier',
        'emu_selftest_dyn_smem',
        'emu_selftest_exited_lanes',
        'emu_selftest_missing_sync',
        'emu_selftest_read_at',
        'emu_selftest_shared_unwritten',
        'emu_selftest_split_barrier',
        'emu_selftest_write_past_end',
      ]);
      expect([...k].sort()).toEqual(k);
      const p = a.probe();
      expect(p.code).toBe(0);
      expect(p.devices.map((d) => [d.index, d.name, d.major, d.minor, d.totalMem])).toEqual([
        [0, 'rmas CUDA emulator (CPU) 0', 9, 0, 16 * 2 ** 30],
      ]);
      expect(p.cublasLt).toBe(ltFile);
    });

    it('upload / download round trip, whole and at an offset inside the allocation', () => {
      const bytes = Uint8Array.from({ length: 1000 }, (_, i) => (i * 37 + 11) & 0xff);
      const p = a.malloc(1000);
      a.upload(p, bytes);
      expect(Array.from(a.download(p, 1000))).toEqual(Array.from(bytes));
      expect(Array.from(a.download(p + 100n, 50))).toEqual(Array.from(bytes.subarray(100, 150)));
      a.upload(p + 998n, Uint8Array.of(1, 2));
      expect(Array.from(a.download(p + 996n, 4))).toEqual([bytes[996], bytes[997], 1, 2]);
      a.free(p);
    });

    it('memInfo: 16 GiB total, free drops by exactly an allocation and comes back at free', () => {
      const before = a.memInfo();
      expect(before.total).toBe(16 * 2 ** 30);
      const p = a.malloc(3000);
      const during = a.memInfo();
      expect(before.free - during.free).toBe(3000);
      expect(during.poolUsed - before.poolUsed).toBe(3000);
      a.free(p);
      expect(a.memInfo().free).toBe(before.free);
    });

    it('memInfo().poolUsedHigh keeps the peak until resetPeak() restarts it from what is in use', () => {
      a.resetPeak();
      const base = a.memInfo().poolUsed;
      expect(a.memInfo().poolUsedHigh).toBe(base);
      const p = a.malloc(5000), q = a.malloc(7000);
      a.free(p);
      a.free(q);
      const r = a.malloc(1000);
      expect(a.memInfo().poolUsedHigh - base).toBe(12000);
      a.resetPeak();
      expect(a.memInfo().poolUsedHigh - base).toBe(1000);
      a.free(r);
    });

    it('a correct block reduction (shared memory, __syncthreads, __shfl_xor_sync) sums exactly for 1 to 32 warps', () => {
      const n = 1000;
      const x = a.malloc(n * 4);
      const out = a.malloc(4);
      a.upload(x, f32(sumInput(n)));
      const want = exactSum(n);
      expect(want).toBe(997); // 76 periods of 13 (sum 13 each) and 0..11 (sum 9)
      for (const threads of [32, 64, 256, 1024]) {
        a.memset(out, 4, 0);
        a.launch('emu_selftest_block_sum', [x, out], [n, threads], []);
        expect(floats(out, 1)).toEqual([want]);
      }
      a.free(x);
      a.free(out);
    });

    it('gemm_lt refuses leading dims, strides and overlapping C batches that do not fit, naming them, before any work', () => {
      const A = a.malloc(64 * 4), B = a.malloc(64 * 4), C = a.malloc(64 * 4);
      a.memset(C, 64 * 4, 0);
      // ints [M, N, K, batch, transA, transB, lda, ldb, ldc, sA, sB, sC, dtA, dtB, accumulate, split]
      const gemm = (ints: number[]) => failure(() => a.launch('gemm_lt', [A, B, C, 0n], ints, [1]));
      const ok = [2, 3, 4, 2, 0, 0, 4, 3, 3, 8, 12, 6, 0, 0, 0, 0];
      expect(gemm(ok)).toBeNull();
      const ldc = gemm(ok.map((v, i) => (i === 8 ? 2 : v)));
      expect(ldc).toMatchObject({ code: 1, cudaError: 'cudaErrorInvalidValue' });
      expect(ldc!.message).toContain('gemm_lt: lda 4, ldb 3, ldc 2 or a batch stride (8, 12, 6) does not fit M 2, N 3, K 4');
      const overlap = gemm(ok.map((v, i) => (i === 11 ? 5 : v)));
      expect(overlap!.message).toContain('gemm_lt: strideC 5 makes the 2 batches of C [2, 3] (ldc 3) overlap');
      expect(gemm(ok.map((v, i) => (i === 15 ? 2 : v)))!.message).toContain('or split 2 is not 0/1');
      [A, B, C].forEach((p) => a.free(p));
    });

    it('a block of 2048 threads (or 0) is cudaErrorInvalidConfiguration, not sticky: the next launch works', () => {
      const n = 300;
      const x = a.malloc(n * 4);
      const out = a.malloc(4);
      a.upload(x, f32(sumInput(n)));
      a.memset(out, 4, 0);
      const big = failure(() => a.launch('emu_selftest_block_sum', [x, out], [n, 2048], []));
      expect(big).toMatchObject({ code: 9, cudaError: 'cudaErrorInvalidConfiguration' });
      expect(big!.message).toContain(
        'block (2048, 1, 1) is over the limits (1024 threads; 1024, 1024, 64) (emulator; kernel block_sum_kernel)',
      );
      const zero = failure(() => a.launch('emu_selftest_block_sum', [x, out], [n, 0], []));
      expect(zero).toMatchObject({ code: 9, cudaError: 'cudaErrorInvalidConfiguration' });
      expect(zero!.message).toContain('a zero grid or block dimension');
      // nothing ran
      expect(floats(out, 1)).toEqual([0]);
      a.launch('emu_selftest_block_sum', [x, out], [n, 1024], []);
      expect(floats(out, 1)).toEqual([exactSum(n)]);
      a.free(x);
      a.free(out);
    });

    it('dynamic shared memory: 48 KiB runs; 64 KiB needs cudaFuncSetAttribute; over the 227 KiB opt-in limit fails', () => {
      const p = a.malloc(66 * 1024);
      const reversed = (count: number) => Array.from({ length: count }, (_, i) => count - 1 - i);
      // exactly the default limit: no opt-in needed
      a.launch('emu_selftest_dyn_smem', [p], [48 * 1024, 0], []);
      expect(floats(p, 12 * 1024)).toEqual(reversed(12 * 1024));
      // 64 KiB without the opt-in: refused, nothing ran
      a.memset(p, 66 * 1024, 0);
      const without = failure(() => a.launch('emu_selftest_dyn_smem', [p], [64 * 1024, 0], []));
      expect(without).toMatchObject({ code: 1, cudaError: 'cudaErrorInvalidValue' });
      // the emulator says why, instead of the runtime's bare "invalid argument"
      expect(without!.message).toMatch(/65536 bytes of dynamic shared memory without cudaFuncSetAttribute/);
      expect(floats(p, 4)).toEqual([0, 0, 0, 0]);
      // an opt-in past the device's limit (227 KiB on cc 9.0) is refused by cudaFuncSetAttribute itself
      expect(failure(() => a.launch('emu_selftest_dyn_smem', [p], [228 * 1024, 1], []))).toMatchObject({
        code: 1,
        cudaError: 'cudaErrorInvalidValue',
      });
      expect(floats(p, 4)).toEqual([0, 0, 0, 0]);
      // with the opt-in: runs, and every thread sees what the others wrote to shared memory
      a.launch('emu_selftest_dyn_smem', [p], [64 * 1024, 1], []);
      expect(floats(p, 16 * 1024)).toEqual(reversed(16 * 1024));
      // the attribute stays set for the kernel (as in CUDA): 64 KiB now runs without asking again, 65 KiB does not
      a.launch('emu_selftest_dyn_smem', [p], [64 * 1024, 0], []);
      expect(floats(p, 16 * 1024)).toEqual(reversed(16 * 1024));
      expect(failure(() => a.launch('emu_selftest_dyn_smem', [p], [65 * 1024, 0], []))).toMatchObject({
        code: 1,
        cudaError: 'cudaErrorInvalidValue',
      });
      a.free(p);
    });

    it('new memory is poisoned with 0xff: a kernel copying a never-written buffer outputs NaN', () => {
      const n = 40;
      const src = a.malloc(n * 4);
      expect(Array.from(a.download(src, 16))).toEqual(new Array(16).fill(0xff));
      const dst = a.malloc(n * 4);
      a.memset(dst, n * 4, 0);
      a.launch('emu_selftest_copy', [src, dst], [n], []);
      // the kernel ran (dst was zeros) and copied the poison: every value NaN, every byte 0xff
      expect(floats(dst, n).every(Number.isNaN)).toBe(true);
      expect(Array.from(a.download(dst, n * 4)).every((b) => b === 0xff)).toBe(true);
      // the control: once src is written, the copy gives its values
      const xs = Array.from({ length: n }, (_, i) => i * 0.25 - 3);
      a.upload(src, f32(xs));
      a.launch('emu_selftest_copy', [src, dst], [n], []);
      expect(floats(dst, n)).toEqual(xs);
      a.free(src);
      a.free(dst);
    });

    it('the off-by-one kernel runs cleanly when its output really has n + 1 floats (the control for the guard check)', () => {
      const n = 10;
      const p = a.malloc((n + 1) * 4);
      a.launch('emu_selftest_write_past_end', [p], [n], []);
      expect(floats(p, n + 1)).toEqual(Array.from({ length: n + 1 }, (_, i) => i));
      a.free(p);
      // and the process is still healthy
      expect(a.memInfo().total).toBe(16 * 2 ** 30);
    });
  });

  describe('in a child process (sticky errors, other RMAS_CUDA_EMU_* settings)', () => {
    it('a write one element past the end: cudaErrorIllegalAddress, sticky: every later call fails with it', () => {
      const r = child({}, `
        a.init(0);
        const x = a.malloc(128);
        const good = a.malloc(4);
        a.upload(good, f32([7]));
        out.before = floats(good, 1);
        const p = a.malloc(40);
        out.launch = failure(() => a.launch('emu_selftest_write_past_end', [p], [10], []));
        out.download = failure(() => a.download(good, 4));
        out.malloc = failure(() => a.malloc(16));
        out.memset = failure(() => a.memset(good, 4, 0));
        out.relaunch = failure(() => a.launch('emu_selftest_block_sum', [x, good], [32, 32], []));
        out.sync = failure(() => a.sync());
        out.memInfo = failure(() => a.memInfo());
      `);
      expect(r.before).toEqual([7]);
      expect(r.launch).toMatchObject({ code: 700, cudaError: 'cudaErrorIllegalAddress' });
      expect(r.launch.message).toMatch(
        /^kernel emu_selftest_write_past_end failed: cudaErrorIllegalAddress \(700\): illegal address \(emulator\): kernel write_past_end_kernel wrote outside the 40-byte allocation at 0x[0-9a-f]+ on device 0$/,
      );
      for (const k of ['download', 'malloc', 'memset', 'relaunch', 'sync', 'memInfo']) {
        expect(r[k], k).toMatchObject({ code: 700, cudaError: 'cudaErrorIllegalAddress' });
        expect(r[k].message, k).toContain('kernel write_past_end_kernel wrote outside the 40-byte allocation');
      }
    });

    it('__syncthreads in a branch half the warp skips: cudaErrorLaunchFailure "barrier deadlock", sticky', () => {
      const r = child({}, `
        a.init(0);
        const x = a.malloc(128), o = a.malloc(4);
        a.upload(x, f32(new Array(32).fill(1)));
        out.launch = failure(() => a.launch('emu_selftest_divergent_barrier', [x, o], [], []));
        out.after = failure(() => a.download(o, 4));
      `);
      expect(r.launch).toMatchObject({ code: 719, cudaError: 'cudaErrorLaunchFailure' });
      expect(r.launch.message).toContain(
        'barrier deadlock in kernel divergent_barrier_kernel: 16 thread(s) wait at __syncthreads, 16 in a warp shuffle, 0 exited (a barrier under divergent control flow)',
      );
      expect(r.after).toMatchObject({ code: 719, cudaError: 'cudaErrorLaunchFailure' });
      expect(r.after.message).toContain('barrier deadlock');
    });

    it('a read far past an allocation faults on its no-access page: sticky cudaErrorIllegalAddress naming the allocation', () => {
      const r = child({}, `
        a.init(0);
        const src = a.malloc(1000 * 4), o = a.malloc(32 * 4);
        a.upload(src, f32(Array.from({ length: 1000 }, (_, i) => i)));
        a.launch('emu_selftest_read_at', [src, o], [900], []);
        out.inBounds = Array.from(new Float32Array(a.download(o, 128).buffer));
        out.far = failure(() => a.launch('emu_selftest_read_at', [src, o], [1000 + 64], []));
        out.after = failure(() => a.download(o, 4));
      `);
      expect(r.inBounds).toEqual(Array.from({ length: 32 }, (_, i) => 900 + i));
      expect(r.far).toMatchObject({ code: 700, cudaError: 'cudaErrorIllegalAddress' });
      // 4000 bytes end 96 guard bytes before the no-access page (bytes 4096 on); thread 0 runs first and reads
      // element 1064, byte 4256
      expect(r.far.message).toMatch(
        /illegal address \(emulator\): kernel read_at_kernel read byte 4256 of the 4000-byte allocation at 0x[0-9a-f]+ on device 0 \(past its end\)/,
      );
      expect(r.after).toMatchObject({ code: 700 });
    });

    it('a __syncthreads on each side of a branch: cudaErrorLaunchFailure naming both barriers', () => {
      const r = child({}, `
        a.init(0);
        const o = a.malloc(256);
        out.launch = failure(() => a.launch('emu_selftest_split_barrier', [o], [], []));
      `);
      expect(r.launch).toMatchObject({ code: 719, cudaError: 'cudaErrorLaunchFailure' });
      expect(r.launch.message).toMatch(
        /divergent __syncthreads in kernel split_barrier_kernel: thread 1 waits at \S*selftest\.cu:(\d+), others at \S*selftest\.cu:(\d+)/,
      );
      const [, a1, a2] = /selftest\.cu:(\d+), others at \S*selftest\.cu:(\d+)/.exec(r.launch.message)!;
      expect(Number(a1)).toBeGreaterThan(Number(a2)); // the odd branch's barrier comes after the even one's
    });

    it('a static __shared__ array is poisoned per block: read before written, every block reads NaN', () => {
      const r = child({}, `
        a.init(0);
        const o = a.malloc(256);
        a.launch('emu_selftest_shared_unwritten', [o], [1], []);
        out.written = Array.from(new Float32Array(a.download(o, 256).buffer));
        a.launch('emu_selftest_shared_unwritten', [o], [0], []);
        out.unwritten = Array.from(new Float32Array(a.download(o, 256).buffer)).map((v) => Number.isNaN(v) ? 'NaN' : v);
      `);
      // written: block b, thread t reads what thread 31 - t of the same block wrote
      expect(r.written).toEqual(Array.from({ length: 64 }, (_, i) => Math.floor(i / 32) * 32 + 31 - (i % 32)));
      // not written: NaN in both blocks, not the previous launch's or block's values
      expect(r.unwritten).toEqual(new Array(64).fill('NaN'));
    });

    it('a full-mask shuffle in a block of 48 threads (a partial warp): cudaErrorLaunchFailure naming the partial warp', () => {
      const r = child({}, `
        a.init(0);
        const x = a.malloc(256), o = a.malloc(4);
        a.memset(x, 256, 0);
        out.launch = failure(() => a.launch('emu_selftest_block_sum', [x, o], [48, 48], []));
      `);
      expect(r.launch).toMatchObject({ code: 719, cudaError: 'cudaErrorLaunchFailure' });
      expect(r.launch.message).toContain(
        'a full-mask warp shuffle in kernel block_sum_kernel with a partial warp of 16 threads (blockDim not a multiple of 32)',
      );
    });

    describe('RMAS_CUDA_EMU_ORDER: forward (default) vs reverse', () => {
      // the same script in both orders; the exited-lanes launch is sticky, so it comes last
      const script = `
        a.init(0);
        const o = a.malloc(4);
        a.launch('emu_selftest_missing_sync', [o], [0], []);
        out.race = floats(o, 1)[0];
        a.launch('emu_selftest_missing_sync', [o], [1], []);
        out.fixed = floats(o, 1)[0];
        const n = 777, x = a.malloc(n * 4);
        a.upload(x, f32(Array.from({ length: n }, (_, i) => (i % 13) / 2 - 2)));
        a.launch('emu_selftest_block_sum', [x, o], [n, 256], []);
        out.sum = floats(o, 1)[0];
        out.exited = failure(() => a.launch('emu_selftest_exited_lanes', [x, o], [], []));
      `;
      let fwd: Record<string, any>;
      let rev: Record<string, any>;
      beforeAll(() => {
        fwd = child({}, script);
        rev = child({ RMAS_CUDA_EMU_ORDER: 'reverse' }, script);
      });

      it('a missing __syncthreads gives different results in the two orders (thread 0 reads before / after thread 31 writes)', () => {
        expect(fwd.race).toBe(-1);
        expect(rev.race).toBe(31);
        expect(fwd.race).not.toBe(rev.race);
      });

      it('with the barrier in place both orders agree, and the correct block sum is order-independent', () => {
        expect([fwd.fixed, rev.fixed]).toEqual([31, 31]);
        expect([fwd.sum, rev.sum]).toEqual([exactSum(777), exactSum(777)]);
      });

      it('lanes that return before a full-mask __shfl_xor_sync: cudaErrorLaunchFailure about exited lanes, in either order', () => {
        for (const r of [fwd, rev]) expect(r.exited).toMatchObject({ code: 719, cudaError: 'cudaErrorLaunchFailure' });
        // forward: lanes 0..15 wait in the shuffle when lane 16 exits; reverse: lanes 31..16 exit first
        expect(fwd.exited.message).toContain('a warp shuffle in kernel exited_lanes_kernel names a lane that has exited (thread 16)');
        expect(rev.exited.message).toContain('a warp shuffle in kernel exited_lanes_kernel names lanes that have exited (warp 0)');
      });
    });

    it('RMAS_CUDA_EMU_DRYRUN=1: launches are checked, not run; copies to the device are skipped, reads work', () => {
      const r = child({ RMAS_CUDA_EMU_DRYRUN: '1' }, `
        a.init(0);
        const x = a.malloc(64 * 4), o = a.malloc(4);
        a.upload(x, f32(new Array(64).fill(1)));
        out.fresh = Array.from(a.download(o, 4));
        out.ok = failure(() => a.launch('emu_selftest_block_sum', [x, o], [64, 64], []));
        out.after = Array.from(a.download(o, 4));
        out.big = failure(() => a.launch('emu_selftest_block_sum', [x, o], [64, 2048], []));
        out.deadlock = failure(() => a.launch('emu_selftest_divergent_barrier', [x, o], [], []));
      `);
      // nothing filled, nothing uploaded, nothing run: the mapping's zeros stay
      expect(r.fresh).toEqual([0, 0, 0, 0]);
      expect(r.ok).toBeNull();
      expect(r.after).toEqual([0, 0, 0, 0]);
      // the configuration is still checked; a barrier bug, which needs the kernel to run, is not seen
      expect(r.big).toMatchObject({ code: 9, cudaError: 'cudaErrorInvalidConfiguration' });
      expect(r.deadlock).toBeNull();
    });

    it('RMAS_CUDA_EMU_DEVICES=0: probe() reports cudaErrorNoDevice (100); init throws it', () => {
      const r = child({ RMAS_CUDA_EMU_DEVICES: '0' }, `
        out.probe = a.probe();
        out.init = failure(() => a.init(0));
        out.malloc = failure(() => a.malloc(16));
        out.current = a.current();
      `);
      const p = r.probe as CudaProbe;
      expect(p.code).toBe(100);
      expect(p.error).toBe('cudaErrorNoDevice: no CUDA-capable device is detected');
      expect(p.devices).toEqual([]);
      expect(r.init).toMatchObject({ code: 100, cudaError: 'cudaErrorNoDevice' });
      expect(r.init.message).toBe('cudaSetDevice failed: cudaErrorNoDevice (100): no CUDA-capable device is detected');
      expect(r.malloc.message).toBe('malloc: call init(device) first');
      expect(r.current).toBe(-1);
    });

    it('RMAS_CUDA_EMU_MEMORY=1 MiB: memInfo shows it; an allocation past it is cudaErrorMemoryAllocation', () => {
      const r = child({ RMAS_CUDA_EMU_MEMORY: String(1 << 20) }, `
        out.totalMem = a.probe().devices[0].totalMem;
        a.init(0);
        out.start = a.memInfo();
        const p = a.malloc(786432);
        out.used = a.memInfo();
        out.over = failure(() => a.malloc(262145));
        out.tooBig = failure(() => a.malloc(2 << 20));
        const q = a.malloc(262144);
        out.full = a.memInfo();
        a.free(p);
        a.free(q);
        out.freed = a.memInfo();
        const big = a.malloc(1 << 20);
        out.whole = a.memInfo().free;
        a.free(big);
      `);
      expect(r.totalMem).toBe(1048576);
      expect(r.start).toMatchObject({ free: 1048576, total: 1048576, poolUsed: 0 });
      expect(r.used).toMatchObject({ free: 262144, total: 1048576, poolUsed: 786432 });
      expect(r.over).toMatchObject({ code: 2, cudaError: 'cudaErrorMemoryAllocation' });
      expect(r.over.message).toBe('cudaMallocAsync(262145 bytes) failed: cudaErrorMemoryAllocation (2): out of memory');
      expect(r.tooBig).toMatchObject({ code: 2, cudaError: 'cudaErrorMemoryAllocation' });
      // exactly what is left still fits
      expect(r.full).toMatchObject({ free: 0, total: 1048576, poolUsed: 1048576 });
      expect(r.freed).toMatchObject({ free: 1048576, total: 1048576, poolUsed: 0 });
      expect(r.whole).toBe(0);
    });

    it('RMAS_CUDA_EMU_DEVICES=2: copyPeer moves bytes between the devices; a wrong device index fails', () => {
      const r = child({ RMAS_CUDA_EMU_DEVICES: '2' }, `
        out.devices = a.probe().devices.map((d) => d.index + ' ' + d.name);
        const bytes = Uint8Array.from({ length: 64 }, (_, i) => 255 - i);
        a.init(0);
        const src = a.malloc(64);
        a.upload(src, bytes);
        a.init(1);
        const dst = a.malloc(64);
        a.memset(dst, 64, 0);
        a.copyPeer(dst, 1, src, 0, 64);
        out.current = a.current();
        out.copied = Array.from(a.download(dst, 64));
        a.memset(dst, 64, 0);
        out.wrongDst = failure(() => a.copyPeer(dst, 0, src, 0, 64));   // dst lives on device 1
        out.wrongSrc = failure(() => a.copyPeer(dst, 1, src, 1, 64));   // src lives on device 0
        out.tooLong = failure(() => a.copyPeer(dst, 1, src, 0, 65));
        out.notOpen = failure(() => a.copyPeer(dst, 2, src, 0, 64));
        out.badInit = failure(() => a.init(2));
        out.currentAfter = a.current();
        out.untouched = Array.from(a.download(dst, 64));
        a.use(0);
        out.mem0 = a.memInfo();
        a.use(1);
        a.malloc(1000);
        out.mem1 = a.memInfo();
      `);
      expect(r.devices).toEqual(['0 rmas CUDA emulator (CPU) 0', '1 rmas CUDA emulator (CPU) 1']);
      expect(r.current).toBe(1);
      expect(r.copied).toEqual(Array.from({ length: 64 }, (_, i) => 255 - i));
      for (const k of ['wrongDst', 'wrongSrc', 'tooLong']) {
        expect(r[k], k).toMatchObject({ code: 1, cudaError: 'cudaErrorInvalidValue' });
        expect(r[k].message, k).toBe('cudaMemcpyPeerAsync failed: cudaErrorInvalidValue (1): invalid argument');
      }
      expect(r.notOpen.message).toBe('copyPeer: device 2 is not open; call init(2) first');
      expect(r.badInit).toMatchObject({ code: 101, cudaError: 'cudaErrorInvalidDevice' });
      // the failed copies restored the current device and wrote nothing
      expect(r.currentAfter).toBe(1);
      expect(r.untouched).toEqual(new Array(64).fill(0));
      // memory is per device: device 0 holds src, device 1 holds dst and the 1000 bytes
      expect(r.mem0).toMatchObject({ free: 16 * 2 ** 30 - 64, poolUsed: 64 });
      expect(r.mem1).toMatchObject({ free: 16 * 2 ** 30 - 1064, poolUsed: 1064 });
    });

    describe('copies and memsets that leave their allocation', () => {
      let r: Record<string, any>;
      beforeAll(() => {
        r = child({}, `
          a.init(0);
          const p = a.malloc(64), q = a.malloc(64);
          a.upload(p, Uint8Array.from({ length: 64 }, (_, i) => i));
          a.memset(q, 64, 7);
          out.copy = failure(() => a.copy(q, p, 65));
          out.copyFrom = failure(() => a.copy(q, p + 1n, 64));
          out.upload = failure(() => a.upload(q + 60n, new Uint8Array(8)));
          out.download = failure(() => a.download(p + 32n, 33));
          out.memset = failure(() => a.memset(q, 65, 0));
          out.q = Array.from(a.download(q, 64));
          a.copy(q, p + 1n, 63);
          out.inBounds = Array.from(a.download(q, 64));
          // the next launch after a failed memory call (see the known-bug test below)
          const x = a.malloc(128), o = a.malloc(4);
          a.memset(x, 128, 0);
          a.copy(x, p, 64);
          failure(() => a.copy(q, p, 65));
          out.launchAfter = failure(() => a.launch('emu_selftest_block_sum', [x, o], [32, 32], []));
        `);
      });

      it('fail with cudaErrorInvalidValue and change nothing', () => {
        const what = {
          copy: 'cudaMemcpy (copy)',
          copyFrom: 'cudaMemcpy (copy)',
          upload: 'cudaMemcpy (upload)',
          download: 'cudaMemcpy (download)',
          memset: 'cudaMemsetAsync',
        };
        for (const [k, call] of Object.entries(what))
          expect(r[k], k).toEqual({
            code: 1,
            cudaError: 'cudaErrorInvalidValue',
            message: `${call} failed: cudaErrorInvalidValue (1): invalid argument`,
          });
        expect(r.q).toEqual(new Array(64).fill(7));
        // the same copy inside the bounds works
        expect(r.inBounds).toEqual([...Array.from({ length: 63 }, (_, i) => i + 1), 7]);
      });

      // the runtime keeps a failed call's error pending (the real one does too); addon.cc clears it when it throws,
      // so the next kernel launch, whose launch function returns cudaGetLastError(), is not blamed for it
      it('a launch after a failed copy succeeds (the failed call\'s error is not left pending)', () => {
        expect(r.launchAfter).toBeNull();
      });
    });

    it('cublaslt_emu_check.cc passes against the built libcublasLt_emu.so', () => {
      const dir = mkdtempSync(join(tmpdir(), 'rmas-lt-check-'));
      try {
        const exe = join(dir, 'cublaslt_emu_check');
        execFileSync(
          gxx!,
          ['-std=c++17', '-O2', '-ffp-contract=off', '-o', exe, join(root, 'native/cuda/emu/cublaslt_emu_check.cc'), '-ldl'],
          {
            cwd: root,
            stdio: 'pipe',
            timeout: 300_000,
          },
        );
        const r = spawnSync(exe, [ltFile], { encoding: 'utf8', timeout: 300_000 });
        expect(r.stderr).toBe('');
        expect(r.status).toBe(0);
        expect(r.stdout).toMatch(/^PASSED: 0 failed$/m);
        expect(r.stdout).not.toMatch(/^FAIL/m);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 600_000);
  });
});
