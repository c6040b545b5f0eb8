/**
 * A fake engine for the Ask view's browser tests: the offline system's spec, a plan, a load that reports `loadEvents`,
 * and `ask` as the test scripts it. Every call is a vi.fn, so tests read what the view asked for.
 */
import { vi } from 'vitest';
import type { AdapterReport, AskRequest, AskResultView, EngineEvent, LensRequest, LensView, SystemSpec } from '../../workers/protocol';
import type { EngineRemote, Services } from '../../src/ui/services';

/** The offline system as the worker reads it from models/tiny-system.json. */
export const FAKE_OFFLINE: SystemSpec = { style: 'tiny_distillation', roles: { expert: { model: '/e' }, learner: { model: '/l' } } };

/** A plan of 3 MiB to fetch (1 MiB cached) and 1.5 GiB of GPU memory, refused with `refusal` when given. */
export const fakePlan = (refusal: string | null = null) => ({
  plan: {
    fetchBytes: 3 * 2 ** 20,
    cachedBytes: 2 ** 20,
    totalBytes: 4 * 2 ** 20,
    models: [],
    gpuBytes: 1.5 * 2 ** 30,
    refusal,
    refusalName: refusal ? ('BindingLimitExceeded' as const) : null,
  },
  text: '',
  refusal,
  files: [],
});

export function fakeAskEngine(
  ask: (req: AskRequest, on: (e: EngineEvent) => void) => Promise<AskResultView>,
  opts: {
    refusal?: string | null;
    loadEvents?: EngineEvent[];
    /** The lens of a message (default: a request nothing was kept for, rejected as the worker rejects it). */
    lens?: (req: LensRequest) => Promise<LensView>;
    /** The worker's WebGPU adapter (default: none, rejected with WebGpuUnavailable). */
    adapter?: Partial<AdapterReport>;
  } = {},
) {
  const loadEvents = opts.loadEvents ?? [{ type: 'ready', backend: 'cpu', seconds: 0.1 }];
  const api = {
    offlineSystem: vi.fn(async () => FAKE_OFFLINE),
    planSystem: vi.fn(async (_s: SystemSpec, _o?: { backend?: 'webgpu' | 'cpu' }) => fakePlan(opts.refusal ?? null)),
    loadSystem: vi.fn(async (_s: SystemSpec, on: (e: EngineEvent) => void) => {
      for (const e of loadEvents) on(e);
      return { roles: {} };
    }),
    ask: vi.fn(ask),
    lens: vi.fn(opts.lens ?? (async (req: LensRequest): Promise<LensView> => {
      throw Object.assign(new Error(`lens: the latents of message ${req.link} are no longer kept`), { name: 'InvalidArgument' });
    })),
    adapterReport: vi.fn(async () => {
      if (!opts.adapter) throw Object.assign(new Error('no adapter'), { name: 'WebGpuUnavailable' });
      return opts.adapter as AdapterReport;
    }),
    cancel: vi.fn(async () => {}),
  };
  const services: Services = {
    engine: { api: () => api as unknown as EngineRemote, restart: () => {}, stop: () => {} },
    checkpoints: async () => ({ listCheckpoints: async () => [] }) as never,
    models: async () => { throw new Error('unused'); },
  };
  return { api, services };
}
