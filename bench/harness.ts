/**
 * The timing loop shared by `npm run bench` (bench/run.ts, Node), the bench page (through the engine
 * worker) and test/bench.gpu.test.ts: warm-up, then batches of iterations timed by the wall clock with a
 * sync after each batch, doubling the batch until a minimum time has passed.
 */
import type { Backend } from '../src/tensor/backend';
import type { BenchCase, BenchOptions, BenchResult, BenchRun } from '../src/kernels/workbench/bench';

export function selectCases(cases: readonly BenchCase[], filter?: string): BenchCase[] {
  const f = filter?.toLowerCase();
  return f ? cases.filter((c) => c.name.toLowerCase().includes(f)) : [...cases];
}

/** Runs `n` iterations; an async run (a training step) is awaited before the next, a sync one is not (no microtask per call). */
async function iterate(run: BenchRun, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const p = run.run();
    if (p instanceof Promise) await p;
  }
}

/** Times one case on one backend. Throws what the case throws. */
export async function timeCase(backend: Backend, c: BenchCase, opts: BenchOptions): Promise<BenchResult> {
  const full = opts.size === 'full';
  const minMs = opts.minMs ?? (full ? 300 : 2);
  const warmup = opts.warmup ?? (full ? 2 : 1);
  const maxIters = Math.max(1, opts.maxIters ?? 1000);
  const run = await c.setup(backend, opts.size);
  try {
    await iterate(run, warmup);
    await backend.sync();
    // one counted iteration (untimed): dispatches, submits, readbacks and bytes bound are the same every iteration
    let perIter: BenchResult['perIter'];
    if (backend.counters) {
      const a = backend.counters();
      await iterate(run, 1);
      await backend.sync();
      const b = backend.counters();
      perIter = {
        dispatches: b.dispatches - a.dispatches, submits: b.submits - a.submits, readbacks: b.readbacks - a.readbacks,
        weightBytes: b.weightBytes - a.weightBytes, activationBytes: b.activationBytes - a.activationBytes,
      };
    }
    let iters = 0;
    let elapsed = 0;
    let n = 1;
    // at least one batch, and on until the clock has measurably moved (browsers coarsen it)
    while (iters === 0 || ((elapsed < minMs || elapsed <= 0) && iters < maxIters)) {
      const t0 = performance.now();
      await iterate(run, n);
      await backend.sync();
      elapsed += performance.now() - t0;
      iters += n;
      n = Math.max(1, Math.min(n * 2, maxIters - iters));
    }
    const msPerIter = elapsed / iters;
    const perSec = 1000 / msPerIter;
    return {
      name: c.name,
      backend: backend.name,
      iters,
      msPerIter,
      gflops: run.flops > 0 ? (run.flops * perSec) / 1e9 : null,
      gbps: run.bytes > 0 ? (run.bytes * perSec) / 1e9 : null,
      ...(run.tokens !== undefined && run.tokens > 0 ? { tokensPerSec: run.tokens * perSec } : {}),
      ...(run.peakBytes ? { peakBytes: run.peakBytes() } : {}),
      ...(perIter ? { perIter } : {}),
    };
  } finally {
    run.dispose();
  }
}

/** Runs every selected case, reporting each result (errors become rows) as it completes. */
export async function runBenches(
  backend: Backend,
  cases: readonly BenchCase[],
  opts: BenchOptions,
  onResult?: (r: BenchResult) => void,
): Promise<BenchResult[]> {
  const out: BenchResult[] = [];
  for (const c of selectCases(cases, opts.filter)) {
    let r: BenchResult;
    try {
      r = await timeCase(backend, c, opts);
    } catch (e) {
      const err = e as Error;
      r = { name: c.name, backend: backend.name, iters: 0, msPerIter: NaN, gflops: null, gbps: null, error: `${err.name}: ${err.message}` };
    }
    out.push(r);
    onResult?.(r);
  }
  return out;
}

const fmt = (v: number | null) => (v === null || !Number.isFinite(v) ? '-' : v >= 100 ? v.toFixed(0) : v.toPrecision(3));

/**
 * Plain-text table: name, ms/iter, GFLOP/s, GB/s, tokens/s when a case declares tokens, peak MB when a case
 * reports peak device memory, and per iteration the dispatches, submits and weight MB bound where the backend
 * counts them (errors in place of figures).
 */
export function formatTable(results: readonly BenchResult[]): string {
  const withTokens = results.some((r) => r.tokensPerSec != null);
  const withPeak = results.some((r) => r.peakBytes !== undefined);
  const withCounts = results.some((r) => r.perIter !== undefined);
  const head = ['case', 'ms/iter', 'GFLOP/s', 'GB/s', ...(withTokens ? ['tokens/s'] : []), ...(withPeak ? ['peak MB'] : []),
    ...(withCounts ? ['dispatches', 'submits', 'weight MB'] : [])];
  const rows = results.map((r) => {
    if (r.error) return { error: r.error.split('\n')[0], cells: [r.name] };
    const ms = r.msPerIter < 0.01 ? r.msPerIter.toExponential(2) : fmt(r.msPerIter);
    const peak = r.peakBytes !== undefined ? r.peakBytes / 1e6 : null;
    return {
      error: null,
      cells: [
        r.name,
        ms,
        fmt(r.gflops),
        fmt(r.gbps),
        ...(withTokens ? [fmt(r.tokensPerSec ?? null)] : []),
        ...(withPeak ? [fmt(peak)] : []),
        ...(withCounts
          ? r.perIter
            ? [String(r.perIter.dispatches), String(r.perIter.submits), fmt(r.perIter.weightBytes / 1e6)]
            : ['-', '-', '-']
          : []),
      ],
    };
  });
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r.cells[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((s, i) => (i === 0 ? s.padEnd(w[i]) : s.padStart(w[i]))).join('  ');
  return [
    line(head),
    w.map((n) => '-'.repeat(n)).join('  '),
    ...rows.map((r) => (r.error !== null ? `${r.cells[0].padEnd(w[0])}  error: ${r.error}` : line(r.cells))),
  ].join('\n');
}
