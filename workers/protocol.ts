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

/** One link-training run in the tab (spec §6): the inner loop on one model, or the outer loop of a style. */
export interface TrainRequest {
  kind: 'inner' | 'outer';
  /** Default webgpu; where there is no adapter the run falls back to cpu and says why in the start event. */
  backend?: 'webgpu' | 'cpu';
  /** Dataset rows, already parsed by the page (parseJsonRows / parseJsonlRows). */
  rows: Record<string, unknown>[];
  /** Inner: base URL of a Hugging Face-layout model folder (config.json, safetensors, tokenizer files). */
  model?: string;
  /** Inner: the style whose shape sets the role's data columns (default sequential_light); outer: the style trained. */
  style?: string;
  /** Inner: the role whose link is trained (planner, critic, solver, …). */
  role?: string;
  /** Outer: for every role of the style, its model folder URL and its frozen inner link (.pt or .safetensors bytes). */
  agents?: Record<string, { model: string; innerLink: Uint8Array }>;
  /** Optional starting weights by link key ('adapter' for inner; 'outer_12', … for outer). */
  initLinks?: Record<string, Uint8Array>;
  options: TrainOptions;
}

export interface TrainOptions {
  maxSteps: number;
  /** Default 2. */
  batchSize?: number;
  /** Default 1. */
  gradAccumSteps?: number;
  /** Default 5e-4. */
  lr?: number;
  /** cosine (default), linear, constant, constant_with_warmup. */
  scheduler?: string;
  /** Default min(10, maxSteps / 10). */
  warmupSteps?: number;
  /** Default 42. */
  seed?: number;
  /** Default true. */
  shuffle?: boolean;
  /** A checkpoint every N steps (0, the default: only the final one). */
  saveSteps?: number;
  /** Longest tokenised sample (default 2048 inner, 4096 outer). */
  maxLength?: number;
  /** Outer: recursion rounds (default 3). */
  rounds?: number;
  /** Outer: latents per hand-off (default 80). */
  maxLatentTokens?: number;
  /** Task of rows without a task_family column (default math). */
  task?: 'math' | 'choice' | 'code';
  /** Inner loss weights (default cos 1, mse 0). */
  cosWeight?: number;
  mseWeight?: number;
}

export type TrainEvent =
  /** runId names the run for pause/resume/stop/checkpointFiles; reason says why a webgpu request runs on cpu. */
  | { type: 'start'; runId: string; backend: 'webgpu' | 'cpu'; samples: number; dropped: Record<string, number>; reason?: string }
  | { type: 'step'; step: number; maxSteps: number; loss: number; lr: number; gradNorm: number; tokensPerSec: number; etaSec: number }
  | { type: 'saved'; step: number; final: boolean }
  | { type: 'paused' }
  | { type: 'resumed' }
  | { type: 'done'; steps: number; stopped: boolean };

export interface TrainResult {
  runId: string;
  steps: number;
  stopped: boolean;
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
  /**
   * Trains links; events arrive in order through `onEvent` (wrap it in comlink.proxy). One run at a time: a
   * second call while one runs rejects with InvalidArgument. Errors of the run reject with their name and message.
   */
  train(req: TrainRequest, onEvent: (e: TrainEvent) => void): Promise<TrainResult>;
  /** Holds the run (the active one when runId is absent) between steps; a 'paused' event says when it holds. */
  pauseTraining(runId?: string): Promise<void>;
  resumeTraining(runId?: string): Promise<void>;
  /** Ends the run after its current step with a final checkpoint; resolves once train() has settled. */
  stopTraining(runId?: string): Promise<void>;
  /** The latest checkpoint of a run as files (name → bytes, transferred), e.g. to keep in IndexedDB or export. */
  checkpointFiles(runId: string): Promise<Record<string, Uint8Array>>;
}
