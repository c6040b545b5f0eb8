/** The engine worker's typed API (what the page may ask of it) and its progress events. */
import type { AdapterReport } from '../src/gpu';
import type { BenchOptions, BenchResult } from '../src/kernels/workbench';
import type { SampleOptions } from '../src/autograd';
import type { DownloadPlan, PlanQuantize } from '../src/store';
import type { AskResult, LoadEvent, SystemSpec, LensReading } from '../src/mas';
import type { ToolTrace } from '../src/mas/tools';

export type { AdapterReport } from '../src/gpu';
export type { FileRef, SystemSpec } from '../src/mas';
export type { BenchResult } from '../src/kernels/workbench';

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

/** One link-training run in the tab (docs/method.md §6): the inner loop on one model, or the outer loop of a style. */
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
  /**
   * The style's prompt set (a prompts.json URL or its bytes), as the system the links are for asks with it: an embedded
   * style's own (the offline system's manifest names it) is required, else upstream's prompts apply.
   */
  prompts?: string | Uint8Array;
  /**
   * Outer (and an inner run with heldOut): for every role of the style, its model folder URL and its frozen inner link
   * (.pt or .safetensors bytes).
   */
  agents?: Record<string, { model: string; innerLink: Uint8Array }>;
  /**
   * Optional starting weights by link key ('adapter' for inner; 'outer_12', … for outer): a fine-tune of the
   * system's own links when they are its, else fresh links.
   */
  initLinks?: Record<string, Uint8Array>;
  /**
   * Score the system on these validation questions (rows with question and answer), greedy, at `rounds` (default the
   * outer run's, else 1) and `latentSteps`, before the first step, every `every` steps and after the last ('heldOut'
   * events); the best step's links are kept as a checkpoint, read by checkpointFiles(`${runId}/best`). An inner run
   * asks the whole system with its link as it trains: it needs `agents` for every role and the system's `outerLinks`.
   */
  heldOut?: {
    rows: Record<string, unknown>[];
    every: number;
    latentSteps: number;
    rounds?: number;
    outerLinks?: Record<string, Uint8Array>;
  };
  /**
   * Continues an interrupted run exactly (same run id, so its later checkpoints land beside the earlier
   * ones): links, AdamW moments and trainer state (step, epoch, data order, cursor, Rng) from `checkpoint`
   * (a folder of the run's store such as 'checkpoint-30'; default its latest), and the loop settings of its
   * train_args.json, which replace `options`; initLinks is ignored. kind, style, role, models and rows must
   * be the run's. A checkpoint without trainer state rejects with CorruptCheckpoint (start a new run from it).
   */
  resume?: { runId: string; checkpoint?: string };
  /** Ignored when resuming (the run's saved settings apply). */
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
  /** Outer: what a non-final stage sends while training, 'teacher' (default, upstream) or 'rollout' (as inference). */
  latents?: 'teacher' | 'rollout';
  /** Outer: only the last round's cross-entropy (default true), else plus nonLastLossWeight (0.1) × the earlier rounds'. */
  superviseFinalOnly?: boolean;
  nonLastLossWeight?: number;
  /** Outer: score targets up to the agent's end-of-turn token only (default false; `rmas train-outer --loss_until_eos`). */
  untilEos?: boolean;
}

export type TrainEvent =
  /** runId names the run's checkpoints (checkpointFiles, resume.runId); reason says why a webgpu request runs on cpu. */
  | {
      type: 'start';
      runId: string;
      backend: 'webgpu' | 'cpu';
      samples: number;
      dropped: Record<string, number>;
      reason?: string;
      /** A resumed run (TrainRequest.resume): the step of the checkpoint it continues from. */
      resumedFrom?: number;
    }
  | { type: 'step'; step: number; maxSteps: number; loss: number; lr: number; gradNorm: number; tokensPerSec: number; etaSec: number }
  | { type: 'saved'; step: number; final: boolean }
  /** A held-out score (TrainRequest.heldOut): questions right of `total` with the links of `step`; best: the best so far. */
  | { type: 'heldOut'; step: number; correct: number; total: number; best: boolean }
  | { type: 'paused' }
  | { type: 'resumed' }
  /** best: the step with the best held-out score, whose checkpoint checkpointFiles(`${runId}/best`) reads. */
  | { type: 'done'; steps: number; stopped: boolean; best?: { step: number; correct: number; total: number } };

export interface TrainResult {
  runId: string;
  steps: number;
  stopped: boolean;
}

// ------------------------------------------------------------------------------------- systems and ask

/** Progress of loading a system and asking it, as one discriminated union (transformers.js style). */
export type EngineEvent =
  | LoadEvent
  | { type: 'ready'; backend: 'webgpu' | 'cpu'; reason?: string; seconds: number }
  | {
      type: 'stage';
      index: number;
      /** 1-based. */
      round: number;
      role: string;
      state: 'running' | 'done';
      decode: boolean;
      /** Latent steps rolled out (done, latent stages). */
      latents?: number;
      seconds?: number;
      /** The message each outer link applied sends (done, latent stages); its logit lens is read on request (lens). */
      messages?: LatentMessage[];
      /** Text mode: what the agent wrote (done, every stage but the final decode, whose text is the answer). */
      text?: string;
    }
  /**
   * The answer as it is written: `text` is the whole answer so far (the final agent's decode, then the answer
   * retry's prompt and continuation), to show in place of the previous text event's, never to append. After
   * `done`, the result's text is the answer (what `rmas ask --json` writes as "text").
   */
  | { type: 'text'; role: string; text: string }
  | ToolCallEvent
  | { type: 'done'; result: AskResultView }
  /** A benchmark question scored (EngineApi.evaluate); `index` counts from 0 in the order asked. */
  | { type: 'sample'; index: number; total: number; record: EvalRecordView }
  | { type: 'error'; name: string; message: string };

/**
 * A tool call of deliberation's tool-caller (docs/method.md §7.6) as its final decode runs it: 'running' once the call's
 * closing tag is written, 'done' with the runner's result text (spliced into the decode between <result> tags, cut to
 * 6000 characters there) and the seconds the call took. `index` counts the ask's calls from 0; `round` (1-based)
 * and `role` are the decoding stage's. Input and output are the model's code or query and the tool's text: plain text.
 */
export type ToolCallEvent = { type: 'tool'; round: number; role: string } & ToolTrace;

/**
 * One outer link's message as its stage sends it: where it goes and how many latents it holds. Its logit lens
 * (src/mas/lens.ts) is read on request, EngineApi.lens with this message's ask, stage and link.
 */
export interface LatentMessage {
  /** The ask that sent it (the engine keeps the messages of its last latent-mode ask only). */
  ask: string;
  /** The sending stage's index in the ask's schedule. */
  stage: number;
  link: string;
  /** The receiving role, whose embedding space the latents are in and whose LM head reads them. */
  to: string;
  /** Latent rows in the message. */
  latents: number;
}

/** A message of the last latent ask to read through the receiver's logit lens (EngineApi.lens). */
export interface LensRequest {
  ask: string;
  stage: number;
  link: string;
  /** Tokens per latent (default 5; at most 32). */
  k?: number;
}

/** A message read through the lens, and the seconds the read took in the engine. */
export interface LensView extends LensReading {
  seconds: number;
}

export interface AskRequest {
  system: SystemSpec;
  question: string;
  mode: 'latent' | 'text';
  rounds?: number;
  latentSteps?: number;
  sampling?: { greedy?: boolean; temperature?: number; topP?: number; topK?: number; seed?: number };
  maxNewTokens?: number;
  task?: 'math' | 'choice' | 'code';
  backend?: 'webgpu' | 'cpu';
  /** The answer-retry stage when the text has no final answer (default true, as rmas ask without --no_ans). */
  answerRetry?: boolean;
  /**
   * Latent mode: a message ablation (src/mas/ablation.ts), as `rmas ask` runs it. 'zeroed' sends zeros in place of
   * every latent message (--zero_messages); 'from' first asks `question` (same settings, no answer retry) recording
   * its messages, then sends them, round for round, in place of this question's own (--messages_from QUESTION).
   */
  ablation?: AskAblation;
  /**
   * The Tavily API key of deliberation's search tool, held in the worker's memory for this ask only (never logged,
   * stored or sent anywhere but to Tavily); without one the search tool answers that search is off.
   */
  searchKey?: string;
}

export type AskAblation = { kind: 'zeroed' } | { kind: 'from'; question: string };

/** What the page gets of an AskResult (the decode speeds always present: 0 when not measured). */
export type AskResultView = Pick<
  AskResult,
  'answer' | 'text' | 'tokens' | 'latentSteps' | 'seconds' | 'rounds' | 'mode' | 'retrySeconds'
> & {
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  /** The backend the system ran on. */
  backend: 'webgpu' | 'cpu';
  /** The agents' KV-cache dtypes (kvDtypes: "f16" on WebGPU with shader-f16, else "f32"). */
  kvDtype: string;
  /** Where `seconds` went besides the answer retry: the stages' own seconds summed, and the logit lens of the latent messages. */
  stageSeconds: number;
  /**
   * The lens's part of the ask: keeping each message's latents on the device for a later read (a copy, no readback).
   * The lens itself runs on request (EngineApi.lens), never ahead of the answer; each read reports its own seconds.
   */
  lensSeconds: number;
  /** Latent messages the ask kept for the lens (absent: none, as in text mode). */
  messagesKept?: number;
  /** GPU pipelines compiled during the ask (each kernel variant on first use; 0 on the CPU backend or once warm). */
  pipelinesCompiled: number;
  /** The ablation the messages went through, as `rmas ask --json` writes it ("messages"): 'zeroed' or 'from: QUESTION'. */
  messages?: string;
  /** A 'from' ablation: the seconds its donor question's run took, before this ask (not in `seconds`). */
  donorSeconds?: number;
};

/**
 * A benchmark in the tab (EngineApi.evaluate): rows of a JSON/JSONL file or the tiny task, read as
 * `dataset` reads them (src/eval/datasets.ts; null: MedQA-style choice with options, else math), or a
 * benchmark fetched from the Hugging Face rows API. Code benchmarks run their answers in Python and stay
 * with `rmas run`.
 */
export interface EvalRequest {
  system: SystemSpec;
  source: { rows: Record<string, unknown>[]; dataset?: string | null } | { benchmark: string };
  /** The first n questions (default all). */
  limit?: number;
  mode: 'latent' | 'text';
  rounds?: number;
  latentSteps?: number;
  sampling?: AskRequest['sampling'];
  maxNewTokens?: number;
  backend?: 'webgpu' | 'cpu';
  answerRetry?: boolean;
  /** Questions asked at once (default 4): batched steps on WebGPU, each question answered as it is alone. */
  batchSize?: number;
  /** The final agent alone, without the others (mode 'text'; EvaluateOptions.alone): the baseline of a comparison. */
  alone?: boolean;
  /** Latent mode: every latent message zeroed, or shuffled (each question sends the next question's), as `npm run tiny:eval`. */
  messages?: 'zeroed' | 'shuffled';
}

/** One scored question, as the page shows it. */
export interface EvalRecordView {
  index: number;
  question: string;
  gold: string | null;
  pred: string | null;
  correct: boolean;
  text: string;
  tokens: number;
  seconds: number;
}

export type { EvalSummary } from '../src/eval';

/** What loading a system will cost, found before any weight is downloaded (EngineApi.planSystem). */
export interface SystemPlanView {
  plan: DownloadPlan;
  /** describePlan(plan): bytes to fetch (and cached), estimated GPU memory, and the refusal if any. */
  text: string;
  /** Why this adapter cannot hold the system (do not load it), or null. */
  refusal: string | null;
  /** The files the load reads, with their sizes (files held as bytes in the spec are not listed). */
  files: { url: string; bytes: number }[];
}

// ----------------------------------------------------------------------------------------------- the API

/** Names a long call (loadSystem, ask, evaluate, train) so that cancel(callId) can end it; one fresh id per call. */
export interface CallOptions {
  callId?: string;
}

/**
 * Everything the page may ask of the engine worker, which exposes it through comlink (workers/engine.worker.ts).
 * Progress arrives through callbacks the page wraps in comlink.proxy, in order and before the call settles;
 * errors reject with their name and message. Every long call takes a callId, and cancel(callId) ends any of them.
 */
export interface EngineApi {
  // ------------------------------------------------------------------------------------------ the device

  /** The adapter the worker's device runs on; rejects with name 'WebGpuUnavailable' where there is none. */
  adapterReport(): Promise<AdapterReport>;
  /**
   * GPU-vs-CPU parity cases on WebGPU, or, where WebGPU is missing, the CPU backend's hand-computed
   * checks. Progress arrives through `onProgress`.
   */
  selfTest(onProgress: (e: SelfTestEvent) => void, opts?: SelfTestOptions): Promise<Extract<SelfTestEvent, { type: 'done' }>>;
  /** The benchmark cases of bench/all.ts on this device; each result also goes to `onResult`. */
  bench(opts: BenchOptions & { backend: 'webgpu' | 'cpu' }, onResult: (r: BenchResult) => void): Promise<BenchResult[]>;
  /** Token ids for logits [V] or [B, V] on the worker's device (CPU where there is no WebGPU). */
  sample(logits: Float32Array, shape: number[], opts: SampleOptions): Promise<Int32Array>;

  // --------------------------------------------------------------------------------------------- systems

  /**
   * An offline system's spec (served with the app; `style`, an embedded style with a page manifest, default the first
   * view's, OFFLINE_STYLE), or null if this build has none.
   */
  offlineSystem(style?: string): Promise<SystemSpec | null>;
  /**
   * Bytes to download (less what the model cache holds), estimated GPU memory and whether the adapter's limits
   * can hold the system, from config.json and safetensors headers read by HTTP Range; downloads no weights
   * and emits no events. quantize defaults to the spec's.
   */
  planSystem(spec: SystemSpec, opts?: { backend?: 'webgpu' | 'cpu'; quantize?: PlanQuantize }): Promise<SystemPlanView>;
  /** Loads (or reuses, when the spec is unchanged) a system; events cover downloads and compilation. */
  loadSystem(
    spec: SystemSpec,
    onEvent: (e: EngineEvent) => void,
    opts?: CallOptions & { backend?: 'webgpu' | 'cpu' },
  ): Promise<{ roles: Record<string, { hidden: number; family: string; layers: number }> }>;

  // ------------------------------------------------------------------------------- asking and evaluating

  /** One question; stage, token and done events stream through onEvent. */
  ask(req: AskRequest, onEvent: (e: EngineEvent) => void, opts?: CallOptions): Promise<AskResultView>;
  /**
   * A latent message of the last latent-mode ask (its stage event's LatentMessage) through the receiver's logit lens:
   * per latent its norm and top-k tokens, computed now on the device. Rejects with InvalidArgument once a later
   * latent ask or a load has freed that ask's messages.
   */
  lens(req: LensRequest): Promise<LensView>;
  /** Asks every question of a benchmark and scores it as rmas run does; a sample event per question. */
  evaluate(req: EvalRequest, onEvent: (e: EngineEvent) => void, opts?: CallOptions): Promise<import('../src/eval').EvalSummary>;

  // -------------------------------------------------------------------------------------------- training

  /**
   * Trains links; events arrive in order through `onEvent`. One run at a time: a second call while one runs
   * rejects with InvalidArgument. Without a callId the run can be neither paused nor cancelled.
   */
  train(req: TrainRequest, onEvent: (e: TrainEvent) => void, opts?: CallOptions): Promise<TrainResult>;
  /** Holds the run of train call `callId` between steps; a 'paused' event says when it holds. */
  pauseTraining(callId: string): Promise<void>;
  resumeTraining(callId: string): Promise<void>;
  /**
   * The latest checkpoint of run `runId` (the start event's; the run may have finished) as files (name → bytes,
   * transferred), e.g. to keep in IndexedDB or export.
   */
  checkpointFiles(runId: string): Promise<Record<string, Uint8Array>>;

  // ------------------------------------------------------------------------------------- calls in flight

  /**
   * Ends the long call given `callId`. loadSystem, ask and evaluate stop at once and reject with Cancelled. A
   * training run ends after its current step with a final checkpoint, and train() resolves with stopped: true,
   * so the page keeps what it trained. Resolves once the request is recorded, before the call settles; an id
   * whose call has not arrived yet cancels that call when it does.
   */
  cancel(callId: string): Promise<void>;
  /** Answers at once; the page's watchdog (src/ui/engine.ts) restarts a worker that stops answering. */
  ping(): Promise<'pong'>;

  // ------------------------------------------------------------------------------------------ tests only

  /**
   * Test hook, refused in production builds: the fault a test asks for, as the real one happens. 'lose-device'
   * destroys the worker's GPU device (resolves false when it has none yet); 'crash' throws an uncaught error in
   * the worker on its next turn, whose 'error' event the page sees as a crash. Either way the page replaces the
   * worker (src/ui/engine.ts), so this call may reject with EngineRestarted instead of resolving.
   */
  testFault(kind: TestFault): Promise<boolean>;
}

export type TestFault = 'lose-device' | 'crash';

/**
 * What the worker posts to the page, outside comlink's replies, when its GPU device is lost (GPUDevice.lost): the
 * page replaces the worker, since everything on the device (loaded systems, a training run's tensors) is gone.
 */
export interface DeviceLostNotice {
  type: 'rmas:device-lost';
  /** GPUDeviceLostInfo's reason and message, e.g. 'destroyed: Device was destroyed.'. */
  detail: string;
}

export const isDeviceLostNotice = (d: unknown): d is DeviceLostNotice =>
  typeof d === 'object' && d !== null && (d as { type?: unknown }).type === 'rmas:device-lost' &&
  typeof (d as { detail?: unknown }).detail === 'string';
