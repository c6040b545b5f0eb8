/**
 * The engine worker: it owns the GPU device (the page never touches GPU objects) and answers the
 * typed API of protocol.ts through comlink.
 */
import { expose, transfer } from 'comlink';
import { F } from '../src/autograd';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend } from '../src/tensor/cpu';
import { WebGpuBackend } from '../src/tensor/webgpu';
import { type CloseReport, closeness } from '../src/testing/close';
import { newRng, parityObservers } from '../src/testing/parity';
import { InvalidArgument, DownloadFailed } from '../src/errors';
import { modelFetch } from '../src/model/url';
import type { CheckpointStore } from '../src/train/store';
import { cpuChecks } from './cpu-checks';
import { CPU_PLAN_LIMITS, createPlaygroundApi } from './engine-api';
import type { BenchResult, EngineApi, PlaygroundApi, SelfTestEvent, TrainEvent, TrainRequest, TrainResult } from './protocol';

let device: Promise<WebGpuBackend> | null = null;

/** The worker's WebGPU backend, created on first use, and again after a failure or a device loss. */
async function gpu(): Promise<WebGpuBackend> {
  if (device) {
    const d = await device.catch(() => null);
    if (d && !d.ctx.lost) return d;
  }
  device = WebGpuBackend.create();
  return device;
}

/** Where there is no WebGPU: null and the reason, so callers fall back to the CPU backend. */
async function gpuOrReason(): Promise<{ gpu: WebGpuBackend | null; reason?: string }> {
  try {
    return { gpu: await gpu() };
  } catch (e) {
    const err = e as Error;
    if (err.name !== 'WebGpuUnavailable') throw e;
    return { gpu: null, reason: err.message };
  }
}

// ---------------------------------------------------------------------------------------------- training

/** Where a run's checkpoints go: IndexedDB in the browser (one store per run id), memory elsewhere. */
async function checkpointStoreFor(runId: string): Promise<CheckpointStore> {
  // IndexedDB (one database per run) so that a run's checkpoints survive a reload of the page
  if (typeof indexedDB !== 'undefined') return (await import('../src/store/idb-store')).idbCheckpointStore(`run-${runId}`);
  return (await import('../src/train/store')).memoryStore();
}

interface TrainRun {
  id: string;
  paused: boolean;
  stopRequested: boolean;
  /** Wakes a loop held in waitIfPaused (resume or stop). */
  wake: (() => void) | null;
  done: Promise<unknown>;
  store: CheckpointStore | null;
}

/** The run in progress (one at a time), and the stores of past runs for checkpointFiles (the latest few kept). */
let activeRun: TrainRun | null = null;
const pastRuns = new Map<string, CheckpointStore>();
const KEEP_PAST_RUNS = 8;
let runCounter = 0;

function runFor(runId: string | undefined, what: string): TrainRun {
  if (!activeRun) throw new InvalidArgument(`${what}: no training run is in progress; start one with train()`);
  if (runId !== undefined && runId !== activeRun.id) throw new InvalidArgument(`${what}: run ${runId} is not the one in progress (${activeRun.id}); it has finished or never existed`);
  return activeRun;
}

/** Upstream's design names → styles of the registry (as rmas train-* accepts). */
const STYLE_ALIASES: Record<string, string> = { sequential: 'sequential_light', chain: 'sequential_light', hie: 'mixture', distill: 'distillation' };

/** Builds the job from the request (models fetched by URL), runs trainLoop with pause/stop and saves, and cleans up. */
async function trainRun(req: TrainRequest, run: TrainRun, emit: (e: TrainEvent) => Promise<void>): Promise<TrainResult> {
  const [{ InnerLink, OuterLink }, { getStyle }, { outerManifests, parseLinkBytes }, { loadDecoderFromUrl }, { loadTokenizerFromUrl }, { saveCheckpoint }, { canonicalRole }, { createInnerJob, createOuterJob }, { initialState, trainLoop }, { parseSchedulerType }] =
    await Promise.all([import('../src/mas/links'), import('../src/mas/styles'), import('../src/mas/upstream'), import('../src/model/url'), import('../src/tokenizer/url'),
      import('../src/train/checkpoint'), import('../src/train/data'), import('../src/train/jobs'), import('../src/train/loop'), import('../src/train/schedule')]);
  run.store = await checkpointStoreFor(run.id);
  const o = req.options ?? ({} as TrainRequest['options']);
  if (req.kind !== 'inner' && req.kind !== 'outer') throw new InvalidArgument(`train: kind must be 'inner' or 'outer', got ${JSON.stringify(req.kind)}`);
  if (!Array.isArray(req.rows)) throw new InvalidArgument('train: rows must be an array of parsed dataset rows (parseJsonRows / parseJsonlRows)');
  let backend: Backend;
  let reason: string | undefined;
  if (req.backend === 'cpu') backend = new CpuBackend('f32');
  else {
    const g = await gpuOrReason();
    backend = g.gpu ?? new CpuBackend('f32');
    reason = g.reason && `no WebGPU (${g.reason}); training on the CPU backend`;
  }
  const seed = o.seed ?? 42;
  const task = o.task ?? 'math';
  const batchSize = o.batchSize ?? 2;
  const optimizer = { weightDecay: 0, maxGradNorm: 1 };
  const styleName = (req.style ?? 'sequential_light').trim().toLowerCase();
  const style = getStyle(STYLE_ALIASES[styleName] ?? styleName);
  const init = (key: string) => (req.initLinks?.[key] ? parseLinkBytes(req.initLinks[key], `initLinks.${key}`) : null);
  const disposers: (() => void)[] = [];
  try {
    let job: import('../src/train/jobs').TrainJob;
    let manifests: Record<string, unknown>;
    if (req.kind === 'inner') {
      if (!req.model) throw new InvalidArgument('train (inner): model, the URL of the model folder, is required');
      if (!req.role) throw new InvalidArgument(`train (inner): role is required (one of ${style.roles.map((r) => r.key).join(', ')})`);
      const role = canonicalRole(style.shape, req.role.trim().toLowerCase());
      const decoder = await loadDecoderFromUrl(req.model, backend, { what: 'model' });
      disposers.push(() => decoder.dispose());
      const tokenizer = await loadTokenizerFromUrl(req.model);
      const d = decoder.config.hidden;
      const start = init('adapter');
      const link = start ? InnerLink.fromStateDict(backend, start, { d, name: `${role} inner link` }) : InnerLink.create(backend, d, { seed, name: `${role} inner link` });
      disposers.push(() => link.dispose());
      job = createInnerJob({
        decoder, tokenizer, link, rows: req.rows, shape: style.shape, role, task, maxLength: o.maxLength ?? 2048, optimizer,
        weights: { cos: o.cosWeight ?? 1, mse: o.mseWeight ?? 0 },
      });
      manifests = { 'adapter_config.json': { adapter_type: link.type } };
    } else {
      const agents = new Map<string, Parameters<typeof createOuterJob>[0]['agents'] extends ReadonlyMap<string, infer V> ? V : never>();
      for (const r of style.roles) {
        const a = req.agents?.[r.key];
        if (!a?.model || !a.innerLink) throw new InvalidArgument(`train (outer): agents.${r.key} needs model (a folder URL) and innerLink (bytes) for style ${style.name}`);
        const decoder = await loadDecoderFromUrl(a.model, backend, { what: `agents.${r.key}.model` });
        disposers.push(() => decoder.dispose());
        const inner = InnerLink.fromStateDict(backend, parseLinkBytes(a.innerLink, `agents.${r.key}.innerLink`), { d: decoder.config.hidden, name: `${r.key} inner link` }).freeze();
        disposers.push(() => inner.dispose());
        agents.set(r.key, { decoder, inner, tokenizer: await loadTokenizerFromUrl(a.model) });
      }
      const outer = new Map<string, import('../src/mas/links').OuterLink>();
      for (const [i, l] of style.links.entries()) {
        const dIn = agents.get(l.from)!.decoder.config.hidden;
        const dOut = agents.get(l.to)!.decoder.config.hidden;
        const start = init(l.key);
        const link = start ? OuterLink.fromStateDict(backend, start, { dIn, dOut, name: l.key }) : OuterLink.create(backend, dIn, dOut, { seed: seed * 100 + i, name: l.key });
        disposers.push(() => link.dispose());
        outer.set(l.key, link);
      }
      const rounds = o.rounds ?? 3;
      job = createOuterJob({
        style, agents, outer, rows: req.rows, task, batchSize, optimizer,
        loss: { rounds, maxLatentTokens: o.maxLatentTokens ?? 80, superviseFinalOnly: true, nonLastLossWeight: 0.1, maxLength: o.maxLength ?? 4096 },
      });
      const m = outerManifests(style.shape, [...outer].map(([key, l]) => ({ key, filename: `${key}.pt`, type: l.type, inDim: l.dIn, outDim: l.dOut })));
      manifests = {
        'outerlink_config.json': m.outerlinkConfig,
        'outer_adapter_config.json': { ...m.outerAdapterConfig, mas_shape: style.shape, mas_task: task, num_recursive_rounds: rounds, supervise_final_only: 1, non_last_loss_weight: 0.1, enable_thinking: 0 },
      };
    }
    const loopOpts = {
      maxSteps: o.maxSteps, batchSize, gradAccumSteps: o.gradAccumSteps ?? 1, lr: o.lr ?? 5e-4, scheduler: parseSchedulerType(o.scheduler ?? 'cosine'),
      warmupSteps: o.warmupSteps ?? Math.min(10, Math.floor(o.maxSteps / 10)), seed, shuffle: o.shuffle ?? true, saveSteps: o.saveSteps ?? 0,
    };
    const store = run.store!;
    const args = { command: `train-${req.kind}`, source: 'playground', model: req.model, style: style.name, role: req.role, resolved: { ...o, ...loopOpts, task } };
    await emit({ type: 'start', runId: run.id, backend: backend instanceof CpuBackend ? 'cpu' : 'webgpu', samples: job.size, dropped: job.dropped, ...(reason ? { reason } : {}) });
    const ctl = new AbortController();
    const final = await trainLoop(job.size, loopOpts, {
      optimizer: job.optimizer,
      runBatch: (idx, scale) => job.runBatch(idx, scale),
      signal: ctl.signal,
      // a stop is turned into an abort only here, between steps, so the loop always ends with its final save
      async waitIfPaused() {
        if (run.paused && !run.stopRequested) {
          await emit({ type: 'paused' });
          while (run.paused && !run.stopRequested) await new Promise<void>((r) => (run.wake = r));
          run.wake = null;
          if (!run.stopRequested) await emit({ type: 'resumed' });
        }
        if (run.stopRequested) ctl.abort();
      },
      onStep: (e) => emit({ type: 'step', step: e.step, maxSteps: e.maxSteps, loss: e.loss, lr: e.lr, gradNorm: e.gradNorm, tokensPerSec: e.tokensPerSec, etaSec: e.etaSec }),
      async save(state, last) {
        await saveCheckpoint(store, last ? '.' : `checkpoint-${state.step}`, { kind: req.kind, links: job.links, optimizerT: job.optimizer.t, state, args, manifests });
        await emit({ type: 'saved', step: state.step, final: last });
      },
    }, initialState(job.size, loopOpts));
    await emit({ type: 'done', steps: final.step, stopped: final.stopped });
    return { runId: run.id, steps: final.step, stopped: final.stopped };
  } finally {
    for (const d of disposers.reverse()) d();
  }
}

const errorText = (e: unknown) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

const api: EngineApi = {
  async adapterReport() {
    return (await gpu()).ctx.report;
  },

  async selfTest(onProgress, opts = {}) {
    const wanted = (g: string) => !opts.groups?.length || opts.groups.includes(g);
    const t0 = performance.now();
    let passed = 0;
    let failed = 0;
    // awaited: a proxied callback has its own message channel, so an unawaited event could arrive
    // after the reply that ends the run
    const emit = async (e: SelfTestEvent) => void (await onProgress(e));
    const report = (e: Extract<SelfTestEvent, { type: 'case' }>) => {
      if (e.ok) passed++;
      else failed++;
      return emit(e);
    };
    const { gpu: backend, reason } = await gpuOrReason();
    if (backend) {
      // loaded on demand: every kernel folder's cases, kept out of the worker's start-up
      const { allCases } = await import('../src/kernels/cases');
      const groups = allCases.filter((g) => wanted(g.group));
      await emit({ type: 'start', backend: 'webgpu', total: groups.reduce((n, g) => n + g.cases.length, 0) });
      for (const { group, cases } of groups) {
        for (const [i, c] of cases.entries()) {
          const t = performance.now();
          let error: string | undefined;
          let maxAbs: number | null = null;
          const observe = (r: CloseReport) => void (maxAbs = Math.max(maxAbs ?? 0, r.maxAbs));
          parityObservers.add(observe);
          try {
            // seeds as in test/parity/suite.ts, so a failure here reproduces there
            await c.run({ gpu: backend, cpu: new CpuBackend(), rng: newRng(1000 + i), f16: backend.ctx.hasFeature('shader-f16') });
            await backend.sync();
          } catch (e) {
            error = errorText(e);
            await backend.sync().catch(() => {}); // leave no deferred GPU error to the next case
          } finally {
            parityObservers.delete(observe);
          }
          await report({ type: 'case', group, name: c.name, ok: !error, maxAbs, ms: performance.now() - t, error });
        }
      }
    } else {
      const checks = cpuChecks.filter((c) => wanted(c.group));
      await emit({ type: 'start', backend: 'cpu', total: checks.length, reason });
      const cpu = new CpuBackend();
      for (const c of checks) {
        const t = performance.now();
        let ev: Extract<SelfTestEvent, { type: 'case' }>;
        try {
          const { actual, expected } = await c.run(cpu);
          const r = closeness(actual, expected, { atol: 1e-6, rtol: 1e-6 }, c.name);
          ev = { type: 'case', group: c.group, name: c.name, ok: r.ok, maxAbs: r.maxAbs, ms: performance.now() - t, error: r.ok ? undefined : r.message };
        } catch (e) {
          ev = { type: 'case', group: c.group, name: c.name, ok: false, maxAbs: null, ms: performance.now() - t, error: errorText(e) };
        }
        await report(ev);
      }
    }
    const done = { type: 'done' as const, backend: backend ? ('webgpu' as const) : ('cpu' as const), passed, failed, ms: performance.now() - t0 };
    await emit(done);
    return done;
  },

  async sample(logits, shape, opts) {
    const backend: Backend = (await gpuOrReason()).gpu ?? new CpuBackend();
    const x = backend.fromValues(logits, shape);
    const out = F.sample(x, opts);
    try {
      const ids = await out.readI32();
      return transfer(ids, [ids.buffer]);
    } finally {
      x.dispose();
      out.dispose();
    }
  },

  async bench(opts, onResult) {
    const [{ runBenches, selectCases }, { allBenches }] = await Promise.all([import('../bench/harness'), import('../bench/all')]);
    const backend: Backend = opts.backend === 'cpu' ? new CpuBackend() : await gpu();
    const results: BenchResult[] = [];
    for (const c of selectCases(allBenches, opts.filter)) {
      const [r] = await runBenches(backend, [c], { ...opts, filter: undefined });
      results.push(r);
      await onResult(r);
    }
    return results;
  },

  async train(req, onEvent) {
    if (activeRun) throw new InvalidArgument(`training run ${activeRun.id} is still in progress; stop it (stopTraining) or wait for it to finish before starting another`);
    const run: TrainRun = { id: `run-${Date.now().toString(36)}-${++runCounter}`, paused: false, stopRequested: false, wake: null, done: Promise.resolve(), store: null };
    activeRun = run; // taken before any await, so a concurrent second call sees it
    let settle!: () => void;
    run.done = new Promise<void>((r) => (settle = r));
    try {
      // awaited: a proxied callback has its own message channel (see selfTest)
      const emit = async (e: TrainEvent) => void (await onEvent(e));
      const result: TrainResult = await trainRun(req, run, emit);
      return result;
    } finally {
      activeRun = null;
      if (run.store) {
        pastRuns.delete(run.id);
        pastRuns.set(run.id, run.store);
        while (pastRuns.size > KEEP_PAST_RUNS) pastRuns.delete(pastRuns.keys().next().value!);
      }
      settle();
    }
  },

  async pauseTraining(runId) {
    runFor(runId, 'pauseTraining').paused = true;
  },

  async resumeTraining(runId) {
    const run = runFor(runId, 'resumeTraining');
    run.paused = false;
    run.wake?.();
  },

  async stopTraining(runId) {
    const run = runFor(runId, 'stopTraining');
    run.stopRequested = true;
    run.wake?.();
    await run.done;
  },

  async checkpointFiles(runId) {
    const store = activeRun?.id === runId ? activeRun.store : pastRuns.get(runId);
    if (!store) throw new InvalidArgument(`checkpointFiles: no run ${runId} in this worker (only the last ${KEEP_PAST_RUNS} runs are kept); train first`);
    const { latestCheckpoint } = await import('../src/train/checkpoint');
    const { dir } = await latestCheckpoint(store, '.');
    const files: Record<string, Uint8Array> = {};
    const prefix = dir && dir !== '.' ? `${dir}/` : '';
    const state = JSON.parse(new TextDecoder().decode(await store.read(`${prefix}trainer_state.json`))) as { files: string[] };
    for (const name of state.files) files[name] = await store.read(prefix + name);
    return transfer(files, Object.values(files).map((b) => b.buffer as ArrayBuffer));
  },
};

/** Systems and ask (engine-api.ts); the offline tiny system's manifest is found under the app's base URL. */
const playground = createPlaygroundApi({
  async backend(want) {
    if (want === 'cpu') return { backend: new CpuBackend('f32') };
    const g = await gpuOrReason();
    return g.gpu ? { backend: g.gpu } : { backend: new CpuBackend('f32'), reason: `no WebGPU (${g.reason}); running on the CPU backend` };
  },
  appBase: new URL(import.meta.env?.BASE_URL ?? '/', self.location.origin).href,
  fetchFile: cachedFetch,
  planFetch,
  cachedUrls: async () => (await cachedComplete()).keys(),
  async planLimits(want) {
    if (want === 'cpu') return CPU_PLAN_LIMITS;
    const g = await gpuOrReason();
    if (!g.gpu) return CPU_PLAN_LIMITS; // the load falls back to the CPU backend too
    const r = g.gpu.ctx.report;
    return { ...r.limits, features: Object.entries(r.features).filter(([, on]) => on).map(([f]) => f) };
  },
});

/** URLs complete in the model cache (none where there is no IndexedDB); one listing serves a plan's many reads for 2 s. */
function cachedComplete(): Promise<Set<string>> {
  if (typeof indexedDB === 'undefined') return Promise.resolve(new Set());
  if (completeMemo && performance.now() - completeMemo.at < 2000) return completeMemo.urls;
  const urls = (async () => {
    const { modelCache } = await import('../src/store/models');
    cache ??= modelCache();
    return new Set((await cache.list()).filter((f) => f.complete).map((f) => f.url));
  })();
  completeMemo = { at: performance.now(), urls };
  urls.catch(() => (completeMemo = null));
  return urls;
}
let completeMemo: { at: number; urls: Promise<Set<string>> } | null = null;

/** planSystem's Range reads: a file complete in the model cache is read from there (works offline), others from the network. */
async function planFetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  if (!(await cachedComplete()).has(url)) return fetch(input, init);
  const src = await cache!.source(url); // complete: served from IndexedDB, nothing downloaded
  const size = await src.size();
  const m = /bytes=(\d+)-(\d*)/.exec(new Headers(init?.headers).get('range') ?? '');
  if (!m) return new Response(await src.read(0, size) as BodyInit, { status: 200, headers: { 'content-length': String(size) } });
  const a = Number(m[1]);
  const b = Math.min(m[2] ? Number(m[2]) : size - 1, size - 1);
  if (a > b) return new Response(null, { status: 416, headers: { 'content-range': `bytes */${size}` } });
  return new Response(await src.read(a, b - a + 1) as BodyInit, { status: 206, headers: { 'content-range': `bytes ${a}-${b}/${size}`, 'content-length': String(b - a + 1) } });
}

/**
 * Files of other origins (the Hugging Face hub) go through the IndexedDB model cache: downloaded once in
 * hashed chunks, resumable, with progress; the app's own files (the offline tiny system) are fetched as is.
 */
async function cachedFetch(url: string, signal?: AbortSignal, onProgress?: (loaded: number, total: number) => void): Promise<Uint8Array | null> {
  if (new URL(url).origin === self.location.origin) {
    const res = await modelFetch()(url, signal ? { signal } : {});
    if (res.status === 404) return null;
    if (!res.ok) throw new DownloadFailed(`${url}: HTTP ${res.status} ${res.statusText}`);
    return new Uint8Array(await res.arrayBuffer());
  }
  const { modelCache, isMissingFile } = await import('../src/store/models');
  cache ??= modelCache();
  try {
    return await cache.bytes(url, { ...(signal ? { signal } : {}), ...(onProgress ? { onProgress } : {}) });
  } catch (e) {
    if (isMissingFile(e)) return null;
    throw e;
  }
}
let cache: import('../src/store/models').ModelCache | null = null;
const { dispose: _dispose, ...playgroundCalls } = playground;

expose({ ...api, ...playgroundCalls } satisfies EngineApi & PlaygroundApi);
