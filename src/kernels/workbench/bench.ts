/**
 * Benchmark cases: each kernel folder exports `benches` from `<op>.bench.ts`; bench/run.ts times them
 * on the current adapter and prints GFLOP/s and GB/s. Not part of the test pass/fail (a test only runs
 * them at tiny size to prove they still run).
 */
import type { Backend } from '../../tensor/backend';
import type { WebGpuBackend } from '../../tensor/webgpu';

export type BenchSize = 'tiny' | 'full';

export interface BenchRun {
  /**
   * Encodes one iteration (no readback). May be async where the work itself is (a training step's
   * backward); the harness awaits it before the next iteration.
   */
  run(): void | Promise<void>;
  /** Floating-point operations of one iteration (0 when bandwidth-bound only). */
  flops: number;
  /** Bytes read + written by one iteration. */
  bytes: number;
  /** Tokens one iteration processes (model benches); when set, the table adds a tokens/s column. */
  tokens?: number;
  /** Peak device bytes while the case ran (see trackPeak); when set, the table adds a peak MB column. */
  peakBytes?: () => number;
  dispose(): void;
}

export interface BenchCase {
  /** e.g. `matmul f32 256x256x256`; the harness appends nothing, so put the size in. */
  name: string;
  /**
   * Builds inputs on `backend` at `size` ('tiny' for CI smoke runs, 'full' for real figures); may be async
   * (model benches go through the real, async weight loader). Setup time is not timed.
   */
  setup(backend: Backend, size: BenchSize): BenchRun | Promise<BenchRun>;
}

/** How bench/harness.ts times the cases (npm run bench, the bench page through the engine worker). */
export interface BenchOptions {
  size: BenchSize;
  /** Only cases whose name contains this (case-insensitive). */
  filter?: string;
  /** Keep timing until this much wall time has passed (default: 300 ms full, 2 ms tiny). */
  minMs?: number;
  /** Untimed iterations first: pipeline compiles, buffer pool warm (default: 2 full, 1 tiny). */
  warmup?: number;
  /** Upper bound on timed iterations (default 1000). */
  maxIters?: number;
}

/** One case timed on one backend, as the harness reports it and the bench page shows it. */
export interface BenchResult {
  name: string;
  backend: string;
  iters: number;
  msPerIter: number;
  /** null when the case declares no flops (bandwidth-bound) or bytes. */
  gflops: number | null;
  gbps: number | null;
  /** Set only for cases that declare `tokens` per iteration. */
  tokensPerSec?: number | null;
  /** Set only for cases that report peak device memory (bytes; NaN where the backend keeps no count). */
  peakBytes?: number;
  /** What one iteration issues, on a backend that counts (WebGPU): figures that hold on any adapter. */
  perIter?: { dispatches: number; submits: number; readbacks: number; weightBytes: number; activationBytes: number };
  error?: string;
}

/**
 * Starts a fresh device-memory high-water mark (WebGPU: pending work submitted, idle pool buffers
 * destroyed) and returns the `peakBytes` reader for a BenchRun; call it in setup before building the
 * case's tensors so the peak covers weights, activations and optimizer state. The CPU backend keeps no
 * count: its reader gives NaN, which the table shows as '-'.
 */
export function trackPeak(backend: Backend): Required<Pick<BenchRun, 'peakBytes'>> {
  if (backend.kind !== 'webgpu') return { peakBytes: () => NaN };
  const ctx = (backend as WebGpuBackend).ctx;
  ctx.resetPeak();
  return { peakBytes: () => ctx.peakBytes };
}
