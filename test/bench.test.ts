// Every benchmark case still runs, at tiny size, on both backends through the harness `npm run bench`
// uses. Figures are only checked to be finite and positive: timing is not a test.
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
  });
});
