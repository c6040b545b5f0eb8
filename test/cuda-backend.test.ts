/**
 * The cuda backend from the runner's side on a machine without a GPU: `rmas healthcheck` reports it unavailable
 * with the reason and still passes, `--backend cuda` fails with a one-line CudaUnavailable, and the reasons
 * name the CUDA error and what to do.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { addonPath, type CudaProbe, cudaUnavailableReason } from '../src/gpu/cuda-addon';
import { pythonCheck, type HealthReport } from '../src/runner/healthcheck';

function rmas(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile(process.execPath, ['bin/rmas.js', ...args], { encoding: 'utf8', env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      res({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

const probe = (p: Partial<CudaProbe>): CudaProbe => ({
  code: 0, error: null, devices: [], driverVersion: 0, runtimeVersion: 13000, cublasLt: null, cublasLtError: null, ...p,
});

describe('cudaUnavailableReason', () => {
  it('names the CUDA error and the way out for no driver, no device and a missing device index', () => {
    const noDriver = cudaUnavailableReason(probe({ code: 35, error: 'cudaErrorInsufficientDriver: CUDA driver version is insufficient' }));
    expect(noDriver).toMatch(/^CUDA reports cudaErrorInsufficientDriver: .* \(code 35\): no NVIDIA driver .*install or update the driver/);
    expect(cudaUnavailableReason(probe({ code: 100, error: 'cudaErrorNoDevice: no CUDA-capable device is detected' }))).toMatch(
      /code 100\).*nvidia-smi/,
    );
    const one = probe({ devices: [{ index: 0, name: 'H100', major: 9, minor: 0, totalMem: 80e9, multiProcessors: 132 }] });
    expect(cudaUnavailableReason(one, 0)).toBeNull();
    expect(cudaUnavailableReason(one, 2)).toBe('CUDA device 2 does not exist (1 device found); pick --devices 0');
    const two = probe({
      devices: [0, 1].map((index) => ({ index, name: 'H100', major: 9, minor: 0, totalMem: 80e9, multiProcessors: 132 })),
    });
    expect(cudaUnavailableReason(two, 3)).toBe('CUDA device 3 does not exist (2 devices found); pick --devices among 0..1');
  });
});

describe('rmas and the cuda backend without a GPU', () => {
  it('healthcheck --level 2 --json: cpu ok, cuda a warning with the reason, exit 0', async () => {
    const r = await rmas(['healthcheck', '--level', '2', '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as HealthReport;
    const by = Object.fromEntries(report.checks.map((c) => [c.name, c]));
    expect(report.ok).toBe(true);
    expect(by.cpu.status).toBe('ok');
    expect(by.cpu.detail).toMatch(/^cpu \(f32, wasm simd(, fma)?(, \d+ threads)?\): 16-byte allocation written and read back$/);
    expect(by.python.status).toBe('ok');
    expect(by.python.detail).toMatch(/^python3: Python 3\.\d+\.\d+$/);
    expect(by.cuda.status).toBe('warn');
    expect(by.cuda.detail).toMatch(/^unavailable: CudaUnavailable: /);
    if (existsSync(addonPath())) expect(by.cuda.detail).toMatch(/cudaError(InsufficientDriver|NoDevice)/);
    else expect(by.cuda.detail).toContain('npm run build:cuda');
    expect(report.checks.filter((c) => c.status === 'fail')).toEqual([]);
  }, 60_000);

  it('healthcheck warns, without failing, when python3 is missing', () => {
    expect(pythonCheck('/nonexistent/python3')).toEqual({
      level: 1,
      name: 'python',
      status: 'warn',
      detail:
        "/nonexistent/python3 unavailable (ENOENT); code benchmarks (mbppplus, livecodebench) and deliberation's Python tool need Python 3 (apt-get install python3)",
    });
  });

  it('healthcheck says how to build the addon when it is missing', async () => {
    const r = await rmas(['healthcheck', '--level', '2', '--json'], { RMAS_CUDA_ADDON: '/nonexistent/rmas_cuda.node' });
    expect(r.code).toBe(0);
    const cuda = (JSON.parse(r.stdout) as HealthReport).checks.find((c) => c.name === 'cuda')!;
    expect(cuda.detail).toBe('unavailable: CudaUnavailable: the CUDA addon is not built (/nonexistent/rmas_cuda.node is missing); ' +
      'build it with `npm run build:cuda` (needs the CUDA toolkit: nvcc and cmake)');
  }, 60_000);

  it('ask --backend cuda fails with one CudaUnavailable line and no stack, exit 1', async () => {
    const r = await rmas(['ask', '--backend', 'cuda', '--style', 'tiny_sequential', '--question', 'What is 2+3?']);
    expect(r.code).toBe(1);
    const lines = r.stderr.trim().split('\n').filter((l) => !l.startsWith('Warning: '));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^rmas: CudaUnavailable: /);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  }, 60_000);

  it('--devices: usage errors for a bad list, without --backend cuda, or several for one model; CudaUnavailable here', async () => {
    const ask = ['ask', '--style', 'tiny_sequential', '--question', 'What is 2+3?'];
    const cases: [string[], RegExp][] = [
      [[...ask, '--devices', '0,1'], /--devices 0,1 picks CUDA devices: it needs --backend cuda/],
      [[...ask, '--backend', 'cuda', '--devices', '0,x'], /--devices 0,x: expected CUDA device indices separated by commas/],
      [[...ask, '--backend', 'cuda', '--devices', '1,1'], /--devices 1,1: device 1 is listed twice/],
      [
        [
          'forward',
          '--model',
          'models/tiny/qwen3-tiny',
          '--ids',
          '1',
          '--out',
          '/tmp/unused.safetensors',
          '--backend',
          'cuda',
          '--devices',
          '0,1',
        ],
        /--devices 0,1: this command runs one model; give one device/,
      ],
      [
        [
          'train-inner',
          '--style',
          'tiny_sequential',
          '--role',
          'critic',
          '--dataset_name',
          'x.jsonl',
          '--save_dir',
          '/tmp/unused',
          '--backend',
          'cuda',
          '--devices',
          '0,1',
        ],
        /--devices 0,1: this command runs one model; give one device/,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await rmas(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(message);
    }
    const r = await rmas([...ask, '--backend', 'cuda', '--devices', '0,1']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^rmas: CudaUnavailable: /m);
  }, 120_000);

  it('an unknown --backend is a usage error naming the three choices', async () => {
    const r = await rmas([
      'forward',
      '--model',
      'models/tiny/qwen3-tiny',
      '--ids',
      '1',
      '--out',
      '/tmp/unused.safetensors',
      '--backend',
      'tpu',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--backend tpu: expected webgpu, cpu or cuda');
  }, 60_000);
});
