/** The engine worker's typed API (what the page may ask of it) and its progress events. */
import type { AdapterReport } from '../src/gpu/device';
import type { BenchOptions, BenchResult } from '../bench/harness';
import type { SampleOptions } from '../src/autograd/ops/sample';

export type { AdapterReport } from '../src/gpu/device';
export type { BenchResult } from '../bench/harness';

export type SelfTestEvent =
  | { type: 'start'; backend: 'webgpu' | 'cpu'; total: number; reason?: string }
  | {
      type: 'case';
      group: string;
      name: string;
      ok: boolean;
      /** Largest |actual - expected| over the case's checks; null where it compares no numbers (ids, errors). */
      maxAbs: number | null;
      ms: number;
      error?: string;
    }
  | { type: 'done'; backend: 'webgpu' | 'cpu'; passed: number; failed: number; ms: number };

export interface SelfTestOptions {
  /** Only these groups (elementwise, matmul, ..., sample); all when absent or empty. */
  groups?: string[];
}

export interface EngineApi {
  /** The adapter the worker's device runs on; rejects with name 'WebGpuUnavailable' where there is none. */
  adapterReport(): Promise<AdapterReport>;
  /**
   * GPU-vs-CPU parity cases on WebGPU, or, where WebGPU is missing, the CPU backend's hand-computed
   * checks. Progress arrives through `onProgress` (wrap it in comlink.proxy).
   */
  selfTest(onProgress: (e: SelfTestEvent) => void, opts?: SelfTestOptions): Promise<Extract<SelfTestEvent, { type: 'done' }>>;
  /** Token ids for logits [V] or [B, V] on the worker's device (CPU where there is no WebGPU). */
  sample(logits: Float32Array, shape: number[], opts: SampleOptions): Promise<Int32Array>;
  /** The benchmark cases of bench/all.ts on this device; each result also goes to `onResult`. */
  bench(opts: BenchOptions & { backend: 'webgpu' | 'cpu' }, onResult: (r: BenchResult) => void): Promise<BenchResult[]>;
}
