/**
 * How kernels that reduce along a row (attention's scores and softmax, a norm's statistic) lay their rows out on a
 * GPU device. 'lanes': a row across the lanes of a workgroup, its sums through workgroup memory and a tree of
 * barriers (what a GPU wants: a few rows per workgroup keep thousands of lanes busy). 'rows': one invocation per row,
 * a serial loop, no workgroup memory and no barrier. On a CPU rasteriser a workgroup runs its invocations as the
 * SIMD lanes of one thread and every barrier suspends and resumes all of them, so the lanes cut pays more for its
 * reductions than for the arithmetic. 'auto' (the default): rows on CPU rasterisers (isSoftwareAdapter), lanes
 * elsewhere. RMAS_ROWS=auto|lanes|rows (the environment in Node, globalThis.RMAS_ROWS in a page) overrides, for
 * benchmarks and tests.
 */
import { InvalidArgument } from '../errors';
import type { GpuContext } from '../gpu/context';
import { isSoftwareAdapter } from '../gpu/device';
import { override } from '../util/override';

export type RowCut = 'lanes' | 'rows';

/** The cut a context's row reductions take (RMAS_ROWS, else auto). */
export function rowCut(ctx: GpuContext): RowCut {
  const v = override('RMAS_ROWS') ?? 'auto';
  if (v === 'lanes' || v === 'rows') return v;
  if (v !== 'auto') throw new InvalidArgument(`RMAS_ROWS=${v}: expected auto, lanes or rows`);
  return isSoftwareAdapter(ctx.report) ? 'rows' : 'lanes';
}

/** Runs `f` once per cut with RMAS_ROWS set to it (parity cases check both cuts on whatever adapter they run). */
export async function eachRowCut(f: (cut: RowCut) => Promise<void>): Promise<void> {
  const g = globalThis as { RMAS_ROWS?: string };
  for (const cut of ['lanes', 'rows'] as const) {
    const was = g.RMAS_ROWS;
    g.RMAS_ROWS = cut;
    try {
      await f(cut);
    } finally {
      g.RMAS_ROWS = was;
    }
  }
}
