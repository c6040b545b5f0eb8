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
import { cpuChecks } from './cpu-checks';
import type { BenchResult, EngineApi, SelfTestEvent } from './protocol';

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
};

expose(api);
