// Every benchmark case still runs, at tiny size, on both backends through the harness `npm run bench`
// uses. Figures are only checked to be finite and positive: timing is not a test.
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { allBenches } from '../bench/all';
import { formatTable, timeCase } from '../bench/harness';
import { CpuBackend } from '../src/tensor/cpu';
import type { Backend } from '../src/tensor/backend';
import { gpuBackend } from './util/gpu';

const positive = (v: number | null) => v === null || (Number.isFinite(v) && v > 0);

describe.each([
  ['cpu', async (): Promise<Backend> => new CpuBackend()],
  ['webgpu', gpuBackend],
])('bench cases at tiny size (%s)', (_, backend) => {
  const rows: Awaited<ReturnType<typeof timeCase>>[] = [];
  afterAll(() => console.log(formatTable(rows)));

  it.each(allBenches.map((c) => [c.name, c] as const))('%s', async (_n, c) => {
    const r = await timeCase(await backend(), c, { size: 'tiny', minMs: 0, warmup: 1, maxIters: 2 });
    rows.push(r);
    expect(r.iters).toBeGreaterThan(0);
    expect(Number.isFinite(r.msPerIter) && r.msPerIter > 0, `ms/iter ${r.msPerIter}`).toBe(true);
    expect(r.gflops !== null || r.gbps !== null, 'a case declares flops or bytes').toBe(true);
    expect(positive(r.gflops), `GFLOP/s ${r.gflops}`).toBe(true);
    expect(positive(r.gbps), `GB/s ${r.gbps}`).toBe(true);
    // a counting backend (WebGPU) reports what one iteration issued; the CPU counts nothing
    if (_ === 'webgpu') expect(r.perIter!.dispatches + r.perIter!.submits, 'work counted').toBeGreaterThan(0);
    else expect(r.perIter).toBeUndefined();
  });
});

// `npm run test:webgpu`, the check for a machine with a real GPU, on this machine's adapter (lavapipe here): the
// layernorm parity cases (one-column rows among them) and the three tiny goldens, each error read back and bounded
describe('npm run test:webgpu (bench/webgpu.ts)', () => {
  it('passes the layernorm cases and the tiny goldens within 1e-4, and exits 0', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'bench/webgpu.ts'], {
      env: { ...process.env, RMAS_WEBGPU_CASES: '^layernorm/' }, encoding: 'utf8', timeout: 300_000,
    });
    const out = `${r.stdout}${r.stderr}`;
    expect(r.status, out.slice(-3000)).toBe(0);
    expect(out).toMatch(/^\(a\) parity \(shader-f16 (yes|no)\): 6\/6 cases passed$/m);
    for (const name of ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny']) {
      const m = new RegExp(`^\\(b\\) ${name}: hidden (\\S+), logits (\\S+), grad (\\S+), loss (\\S+)$`, 'm').exec(out);
      expect(m, `${name} in:\n${out}`).not.toBeNull();
      for (const v of m!.slice(1).map(Number)) expect(v).toBeLessThan(1e-4);
    }
    expect(out).toMatch(/^all webgpu checks passed$/m);
  });
});
