/**
 * The engine worker: it owns the GPU device (the page never touches GPU objects) and answers the one
 * typed API of protocol.ts (EngineApi) through comlink: the device calls here, systems and asking from
 * system-calls.ts, training from train-calls.ts, all long calls cancelled through one registry (calls.ts).
 */
import { expose, transfer } from 'comlink';
import { F } from '../src/autograd';
import { type Backend, CpuBackend, WebGpuBackend } from '../src/tensor';
import { type CloseReport, closeness, newRng, parityObservers } from '../src/kernels/workbench';
import { InvalidArgument } from '../src/errors';
import { modelFetch } from '../src/model';
import { cachedRangeFetch, hubFetch, hubSettingsOf, pageFileReads, readPageHub, storedUrls } from '../src/store';
import type { FileStore } from '../src/train';
import { cpuChecks } from './cpu-checks';
import { callRegistry } from './calls';
import { pagePythonRunner } from './python';
import { CPU_PLAN_LIMITS, systemCalls } from './system-calls';
import { trainCalls } from './train-calls';
import type { BenchResult, DeviceLostNotice, EngineApi, SelfTestEvent } from './protocol';

let device: Promise<WebGpuBackend> | null = null;

/**
 * The worker's WebGPU backend, created on first use, and again after a failure or a device loss. A lost device is
 * reported to the page at once (DeviceLostNotice), which replaces this worker: a call in flight may not notice.
 */
async function gpu(): Promise<WebGpuBackend> {
  if (device) {
    const d = await device.catch(() => null);
    if (d && !d.ctx.lost) return d;
  }
  device = WebGpuBackend.create();
  void device.then(
    (d) => d.ctx.device.lost.then((info) => {
      const notice: DeviceLostNotice = { type: 'rmas:device-lost', detail: `${info.reason}${info.message ? `: ${info.message}` : ''}` };
      self.postMessage(notice);
    }),
    () => {},
  );
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

const errorText = (e: unknown) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

/** The device calls; the rest of the API is assembled with them at the end of this file. */
const deviceCalls: Pick<EngineApi, 'adapterReport' | 'selfTest' | 'bench' | 'sample'> = {
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
          ev = {
            type: 'case',
            group: c.group,
            name: c.name,
            ok: r.ok,
            maxAbs: r.maxAbs,
            ms: performance.now() - t,
            error: r.ok ? undefined : r.message,
          };
        } catch (e) {
          ev = { type: 'case', group: c.group, name: c.name, ok: false, maxAbs: null, ms: performance.now() - t, error: errorText(e) };
        }
        await report(ev);
      }
    }
    const done = {
      type: 'done' as const,
      backend: backend ? ('webgpu' as const) : ('cpu' as const),
      passed,
      failed,
      ms: performance.now() - t0,
    };
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
};

/** Where a run's checkpoints go: IndexedDB in the browser (one store per run id), memory elsewhere. */
async function checkpointStoreFor(runId: string): Promise<FileStore> {
  // IndexedDB (one database per run) so that a run's checkpoints survive a reload of the page
  if (typeof indexedDB !== 'undefined') return (await import('../src/store')).idbFileStore(`run-${runId}`);
  return (await import('../src/train')).memoryStore();
}

/** The one registry of long calls, shared by the system and training calls, so that cancel() reaches them all. */
const calls = callRegistry();

const training = trainCalls({
  storeFor: checkpointStoreFor,
  async backend(want) {
    if (want === 'cpu') return { backend: new CpuBackend('f32') };
    const g = await gpuOrReason();
    return g.gpu ? { backend: g.gpu } : { backend: new CpuBackend('f32'), reason: `no WebGPU (${g.reason}); training on the CPU backend` };
  },
}, calls);

let cache: import('../src/store').ModelCache | null = null;

/**
 * The hub client with the page's settings as they are now (IndexedDB, written by the page: `?hub=`, Environment):
 * the token to the hub's origin only, retries, named errors, nothing requested in cache-only mode.
 */
const viaHub: typeof fetch = async (input, init) => hubFetch(hubSettingsOf(await readPageHub()))(input, init);

/** The model file cache, downloading through the hub client. */
async function modelFiles(): Promise<import('../src/store').ModelCache> {
  const { modelCache } = await import('../src/store');
  cache ??= modelCache({ fetch: viaHub });
  return cache;
}

/** A system's files: the app's own fetched as they are, the hub's through the model cache. */
const reads = pageFileReads(self.location.origin, (input, init) => modelFetch()(input, init), modelFiles);

/** URLs the model cache holds → complete (none where there is no IndexedDB); one listing serves a plan's many reads. */
const cachedComplete = typeof indexedDB === 'undefined' ? async () => new Map<string, boolean>() : storedUrls(modelFiles);

/** planSystem's Range reads: a file stored in the model cache is read from there (works offline), others through the hub. */
const planFetch = cachedRangeFetch(modelFiles, viaHub, { stored: cachedComplete, cacheOnly: async () => (await readPageHub()).cacheOnly });

/** Systems, asking and evaluating (system-calls.ts); the offline tiny system's manifest is found under the app's base URL. */
const { dispose: _dispose, ...systems } = systemCalls({
  async backend(want) {
    if (want === 'cpu') return { backend: new CpuBackend('f32') };
    const g = await gpuOrReason();
    return g.gpu ? { backend: g.gpu } : { backend: new CpuBackend('f32'), reason: `no WebGPU (${g.reason}); running on the CPU backend` };
  },
  appBase: new URL(import.meta.env?.BASE_URL ?? '/', self.location.origin).href,
  fetchFile: reads.file,
  fetchRange: reads.range,
  planFetch,
  cachedUrls: async () => (await cachedComplete()).keys(),
  async planLimits(want) {
    if (want === 'cpu') return CPU_PLAN_LIMITS;
    const g = await gpuOrReason();
    if (!g.gpu) return CPU_PLAN_LIMITS; // the load falls back to the CPU backend too
    const r = g.gpu.ctx.report;
    return { ...r.limits, features: Object.entries(r.features).filter(([, on]) => on).map(([f]) => f) };
  },
  // deliberation's Python tool: Pyodide in a nested worker, started on the first call, without network
  python: pagePythonRunner(),
}, calls);

const api: EngineApi = {
  ...deviceCalls,
  ...systems,
  ...training,
  cancel: calls.cancel,
  async ping() {
    return 'pong' as const;
  },
  async testFault(kind) {
    if (import.meta.env?.PROD) throw new InvalidArgument('testFault is a test hook; production builds refuse it');
    if (kind === 'crash') {
      setTimeout(() => {
        throw new Error('test fault: a simulated crash');
      }, 0);
      return true;
    }
    if (kind !== 'lose-device') throw new InvalidArgument(`testFault: unknown fault ${JSON.stringify(kind)}`);
    const d = device && (await device.catch(() => null));
    if (!d || d.ctx.lost) return false;
    d.ctx.device.destroy(); // as a driver reset does: the device's lost promise resolves, every later use fails
    return true;
  },
};
expose(api);
