/**
 * Benchmark cases: each kernel folder exports `benches` from `<op>.bench.ts`; bench/run.ts times them
 * on the current adapter and prints GFLOP/s and GB/s. Not part of the test pass/fail (a test only runs
 * them at tiny size to prove they still run).
 */
import type { Backend } from '../tensor/backend';
import type { WebGpuBackend } from '../tensor/webgpu';

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
