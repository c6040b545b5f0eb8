/**
 * The CUDA addon in CI (no GPU): built when nvcc is present, loads, and reports why CUDA cannot run.
 * What needs a GPU (kernels against the CPU reference, cuBLASLt, throughput) is `npm run test:cuda`.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { which } from '../scripts/build-tools.mjs';
import { CudaUnavailable } from '../src/errors';
import { type CudaAddon, addonPath, isCudaError } from '../src/gpu/cuda-addon';
import { CudaBackend } from '../src/tensor/cuda';

const nvcc = which('nvcc', ['/usr/local/cuda/bin']);
const why = 'needs nvcc to build the CUDA addon (native/cuda)';
if (!nvcc) console.log(`skipped: cuda addon checks ${why}; nvcc is not on PATH or in /usr/local/cuda/bin`);

describe.skipIf(!nvcc)('cuda addon (built with nvcc, no GPU needed)', () => {
  let addon: CudaAddon;
  let release = '';
  beforeAll(() => {
    if (!existsSync(addonPath())) execFileSync(process.execPath, ['scripts/build-cuda.mjs'], { stdio: 'inherit', timeout: 600_000 });
    addon = createRequire(import.meta.url)(addonPath()) as CudaAddon;
    release = /release (\d+)\.(\d+)/.exec(execFileSync(nvcc!, ['--version'], { encoding: 'utf8' }))!.slice(1).join('.');
  }, 620_000);

  it('loads and probes: the static runtime is the nvcc release, cuBLASLt is reported either way', () => {
    const p = addon.probe();
    const [maj, min] = release.split('.').map(Number);
    expect(p.runtimeVersion).toBe(maj * 1000 + min * 10);
    expect(p.cublasLt === null).toBe(p.cublasLtError !== null);
    if (p.cublasLt === null) expect(p.cublasLtError).toMatch(/libcublasLt\.so\.13/);
  });

  it('lists its registered kernels, gemm_lt among them, in name order', () => {
    const k = addon.kernels();
    expect(k).toContain('gemm_lt');
    expect([...k].sort()).toEqual(k);
  });

  it('rejects an unknown kernel name before touching a device', () => {
    expect(() => addon.launch('no_such_kernel', [], [], [])).toThrow(/no CUDA kernel named "no_such_kernel"/);
  });

  describe('on a machine without a usable CUDA device', () => {
    const probe = () => addon.probe();
    it('probe() reports code 35 (no driver) or 100 (no device) with the CUDA error name', (ctx) => {
      const p = probe();
      if (p.code === 0) ctx.skip(); // a GPU machine: npm run test:cuda covers it
      expect([35, 100]).toContain(p.code);
      expect(p.error).toMatch(p.code === 35 ? /^cudaErrorInsufficientDriver: / : /^cudaErrorNoDevice: /);
      expect(p.devices).toEqual([]);
    });

    it('init() throws a JS Error carrying the CUDA code and name; memory calls ask for init first', (ctx) => {
      const p = probe();
      if (p.code === 0) ctx.skip();
      let err: unknown;
      try {
        addon.init(0);
      } catch (e) {
        err = e;
      }
      expect(isCudaError(err)).toBe(true);
      expect((err as { code: number }).code).toBe(p.code);
      expect((err as Error).message).toContain(`(${p.code})`);
      expect(() => addon.malloc(16)).toThrow(/call init\(device\) first/);
      expect(() => addon.launch('gemm_lt', [0n, 0n, 0n, 0n], [], [])).toThrow(/call init\(device\) first/);
      // the multi-device calls: nothing is open, nothing is current
      expect(addon.current()).toBe(-1);
      expect(() => addon.use(1)).toThrow(/use: device 1 is not open; call init\(1\) first/);
      expect(() => addon.copyPeer(0n, 1, 0n, 0, 16)).toThrow(/copyPeer: device 0 is not open/);
    });

    it('CudaBackend.create() rejects with CudaUnavailable naming that error and what to do', async (ctx) => {
      const p = probe();
      if (p.code === 0) ctx.skip();
      const name = p.code === 35 ? 'cudaErrorInsufficientDriver' : 'cudaErrorNoDevice';
      const e = await CudaBackend.create().catch((x: unknown) => x);
      expect(e).toBeInstanceOf(CudaUnavailable);
      expect((e as Error).message).toContain(name);
      expect((e as Error).message).toContain(`code ${p.code}`);
      expect((e as Error).message).toMatch(/--backend webgpu\|cpu/);
    });
  });
});
