/**
 * The engine API's systems and asking (protocol.ts EngineApi): the offline tiny systems served with the app
 * (each embedded style's page manifest, e.g. models/tiny-system.json: its folders under models/tiny and its prompt file), a
 * system's download plan, loading it from a spec, asking it with streamed stage/token events (and the message
 * ablations of `rmas ask`), the logit lens of a latent message on request, deliberation's tools with an event per
 * call, and evaluating it on a benchmark; the long calls are cancelled through the worker's call registry (calls.ts). The rules
 * live in the library, shared with the runner: the lens (src/mas/lens.ts), the ablations (src/mas/ablation.ts) and
 * the default token budget (src/mas/budget.ts). A plain
 * object with injected dependencies, so Node tests run it on the CPU backend; engine.worker.ts exposes it through
 * comlink with the device and training calls.
 */
import { Cancelled, InvalidArgument } from '../src/errors';
import { F, noGrad } from '../src/autograd';
import {
  type AskEngine, type AskOptions, type AskResult, DEFAULT_ROUNDS, DISABLED_TOOLS, type LoadSpecOptions, type MasSystem, SINGLE_ENGINE,
  type StageRecord, type SystemSpec, ablationLabel, ask as askSystem, checkAblation, defaultLatentSteps, defaultMaxNewTokens, detectTask,
  kvDtypes, loadSystemFromSpec, logitLens, OFFLINE_STYLE, getStyle, prepareAblation, schedule, specAt, specKey,
} from '../src/mas';
import { tavilySearchRunner, tracedRunners, type ToolRunners } from '../src/mas/tools';
import { BENCHMARK_NAMES, loadBenchmark, toItems, type BenchmarkName, evaluate as evaluateSystem } from '../src/eval';
import { describePlan, planSystemDownload, type PlanLimits, specFiles } from '../src/store';
import { modelFetch } from '../src/model';
import type { Backend, Tensor, WebGpuBackend } from '../src/tensor';
import type { Calls } from './calls';
import type { AskResultView, EngineApi, EngineEvent, LatentMessage, LensView, SystemPlanView } from './protocol';

export interface SystemDeps {
  /** The backend for a request ('webgpu' falls back to cpu where there is none, with the reason). */
  backend(want: 'webgpu' | 'cpu' | undefined): Promise<{ backend: Backend; reason?: string }>;
  /** The app's root URL (ends in '/'): models/tiny-system.json and its relative paths resolve against it. */
  appBase?: string;
  /** Whole-file reads instead of the network (see LoadSpecOptions.fetchFile). */
  fetchFile?: LoadSpecOptions['fetchFile'];
  /** Range reads instead of the network (see LoadSpecOptions.fetchRange). */
  fetchRange?: LoadSpecOptions['fetchRange'];
  /** Tokens per latent in the logit lens when a lens request names no k. Default 5. */
  lensTopK?: number;
  /**
   * The fetch planSystem reads sizes and safetensors headers with, by HTTP Range (never whole weights);
   * default globalThis.fetch. The worker serves files already in the model cache from there.
   */
  planFetch?: typeof fetch;
  /** URLs complete in the model cache (planSystem counts them as cached); none when absent. */
  cachedUrls?: () => Promise<Iterable<string>>;
  /** The adapter limits planSystem checks against; default: no limit (the CPU backend). */
  planLimits?: (want: 'webgpu' | 'cpu' | undefined) => Promise<PlanLimits>;
  /**
   * Deliberation's Python tool (the worker's: Pyodide in a worker of its own, workers/python.ts); without it the
   * tool-caller's Python calls answer that no Python runner was given.
   */
  python?: ToolRunners['python'];
  /** Deliberation's search tool for an ask's key (AskRequest.searchKey); default Tavily (tavilySearchRunner). */
  search?: (apiKey: string | undefined) => ToolRunners['search'];
  /** Where ask runs its rollouts and generations (default SINGLE_ENGINE); tests script the final decode with it. */
  engine?: AskEngine;
}

/** Limits of the CPU backend for planning: none that a model could exceed. */
export const CPU_PLAN_LIMITS: PlanLimits = {
  maxStorageBufferBindingSize: Number.MAX_SAFE_INTEGER,
  maxBufferSize: Number.MAX_SAFE_INTEGER,
  features: [],
};

const searchWith = (apiKey: string | undefined) => tavilySearchRunner(apiKey ? { apiKey } : {});

/** Rows the page sent, read as the named benchmark's rows (null: a plain file). */
function benchmarkRows(dataset: string | null, rows: Record<string, unknown>[]) {
  if (dataset !== null && !(BENCHMARK_NAMES as readonly string[]).includes(dataset)) {
    throw new InvalidArgument(
      `evaluate: unknown benchmark ${JSON.stringify(dataset)}; expected one of ${BENCHMARK_NAMES.join(', ')} or null`,
    );
  }
  return toItems(dataset as BenchmarkName | null, rows);
}

/** GPU pipelines the backend has compiled so far (0 for a backend without a pipeline cache: the CPU). */
function pipelineCount(b: Backend): number {
  return (b as Partial<WebGpuBackend>).ctx?.pipelines.size ?? 0;
}

interface Loaded { key: string; system: MasSystem; busy: number; stale: boolean; backend: 'webgpu' | 'cpu'; reason?: string }

/**
 * The latent messages of the last latent-mode ask, kept on the device for the lens (EngineApi.lens) by `${stage}|${link}`:
 * copies, since the ask frees its own as the rounds replace them. Freed by the next latent ask or a load of another
 * system, so at most one ask's messages are held.
 */
interface Kept { ask: string; loaded: Loaded; latents: Map<string, Tensor> }

/** A copy of `L` on its backend: one dispatch for f32 (x·1 + 0, exact), else through the host. */
async function keepCopy(L: Tensor): Promise<Tensor> {
  if (L.dtype === 'f32') return noGrad(() => F.scale(L, 1));
  return L.backend.fromBytes(await L.readBytes(), L.shape, L.dtype);
}

export type SystemCalls = Pick<EngineApi, 'offlineSystem' | 'planSystem' | 'loadSystem' | 'ask' | 'lens' | 'evaluate'>;

/** The system calls over `deps`; `dispose` frees the loaded system (for tests: the worker's lives as long as the worker). */
export function systemCalls(deps: SystemDeps, calls: Calls): SystemCalls & { dispose(): void } {
  let current: Loaded | null = null;
  let loading: { key: string; promise: Promise<Loaded> } | null = null;
  let kept: Kept | null = null;
  let asks = 0;
  const k = deps.lensTopK ?? 5;

  const release = (l: Loaded) => {
    if (l.stale && l.busy === 0) l.system.dispose();
  };
  const forget = () => {
    for (const L of kept?.latents.values() ?? []) L.dispose();
    kept = null;
  };

  /** Serialises events (each proxied call has its own channel), so they arrive in order and before the reply. */
  function sequencer(onEvent: (e: EngineEvent) => unknown) {
    let chain: Promise<unknown> = Promise.resolve();
    const emit = (e: EngineEvent) => (chain = chain.then(() => onEvent(e)));
    return { emit, flush: () => chain };
  }

  async function ensure(
    spec: SystemSpec,
    want: 'webgpu' | 'cpu' | undefined,
    links: boolean,
    emit: (e: EngineEvent) => unknown,
    signal: AbortSignal,
  ): Promise<{ l: Loaded; fresh: boolean }> {
    const key = specKey(spec, `${want ?? 'webgpu'}|${links}|`);
    if (current?.key === key && !current.stale) return { l: current, fresh: false };
    // text mode reads no link: the same system loaded with its links serves it (and keeps the lens's latents)
    if (!links && current?.key === specKey(spec, `${want ?? 'webgpu'}|true|`) && !current.stale) return { l: current, fresh: false };
    if (loading?.key === key) return { l: await loading.promise, fresh: false };
    const t0 = performance.now();
    const promise = (async () => {
      const { backend, reason } = await deps.backend(want);
      forget();
      if (current) {
        current.stale = true;
        release(current);
        current = null;
      }
      const system = await loadSystemFromSpec(spec, backend, {
        onEvent: (e) => void emit(e),
        signal,
        links,
        ...(deps.fetchFile ? { fetchFile: deps.fetchFile } : {}),
        ...(deps.fetchRange ? { fetchRange: deps.fetchRange } : {}),
      });
      // workers run in the browser: webgpu or cpu
      const l: Loaded = { key, system, busy: 0, stale: false, backend: backend.kind as Loaded['backend'], ...(reason ? { reason } : {}) };
      current = l;
      emit({ type: 'ready', backend: l.backend, ...(reason ? { reason } : {}), seconds: (performance.now() - t0) / 1000 });
      return l;
    })();
    loading = { key, promise };
    try {
      return { l: await promise, fresh: true };
    } finally {
      if (loading?.promise === promise) loading = null;
    }
  }

  /**
   * Runs `body` on the system of `spec` (loaded or reused; a reused one is announced ready), held busy so that
   * a load of another system does not release it underneath.
   */
  async function holding<T>(
    spec: SystemSpec,
    want: 'webgpu' | 'cpu' | undefined,
    links: boolean,
    s: ReturnType<typeof sequencer>,
    signal: AbortSignal,
    body: (l: Loaded) => Promise<T>,
  ): Promise<T> {
    const t0 = performance.now();
    const { l, fresh } = await ensure(spec, want, links, s.emit, signal);
    l.busy++;
    try {
      if (!fresh)
        s.emit({ type: 'ready', backend: l.backend, ...(l.reason ? { reason: l.reason } : {}), seconds: (performance.now() - t0) / 1000 });
      return await body(l);
    } finally {
      l.busy--;
      release(l);
    }
  }

  /** Runs `body` with its call registered; errors after an abort become Cancelled, and every error is also an event. */
  async function call<T>(
    callId: string | undefined,
    onEvent: (e: EngineEvent) => unknown,
    body: (signal: AbortSignal, s: ReturnType<typeof sequencer>) => Promise<T>,
  ): Promise<T> {
    const reg = calls.register(callId);
    const s = sequencer(onEvent);
    try {
      return await body(reg.signal, s);
    } catch (e) {
      const err =
        reg.signal.aborted && !(e instanceof Cancelled) ? new Cancelled(`the call was cancelled (${(e as Error).message})`) : (e as Error);
      s.emit({ type: 'error', name: err.name, message: err.message });
      await s.flush().catch(() => {});
      throw err;
    } finally {
      reg.done();
    }
  }

  return {
    async loadSystem(spec, onEvent, opts = {}) {
      return call(opts.callId, onEvent, async (signal, s) => {
        const { l, fresh } = await ensure(spec, opts.backend, true, s.emit, signal);
        if (!fresh) s.emit({ type: 'ready', backend: l.backend, ...(l.reason ? { reason: l.reason } : {}), seconds: 0 });
        await s.flush();
        const roles: Record<string, { hidden: number; family: string; layers: number }> = {};
        for (const [role, a] of l.system.agents)
          roles[role] = { hidden: a.decoder.config.hidden, family: a.decoder.config.family, layers: a.decoder.config.layers };
        return { roles };
      });
    },

    async ask(req, onEvent, opts = {}) {
      return call(opts.callId, onEvent, async (signal, s) => {
        if (req.mode !== 'latent' && req.mode !== 'text')
          throw new InvalidArgument(`ask: mode must be 'latent' or 'text', got ${JSON.stringify(req.mode)}`);
        // refused before the system loads, as rmas ask refuses it before loading
        const choice = checkAblation(req.ablation, req.mode, 'ask: a message ablation');
        return holding(req.system, req.backend, req.mode === 'latent', s, signal, async (l) => {
          const { system } = l;
          const rounds = req.rounds ?? DEFAULT_ROUNDS;
          const stages = schedule(system.style, rounds);
          const decodes = (i: number) => stages[i].decode || req.mode === 'text';
          const running = (i: number) =>
            s.emit({ type: 'stage', index: i, round: stages[i].round + 1, role: stages[i].role, state: 'running', decode: decodes(i) });
          // the lens runs on request (lens()), after this ask's stages: here the messages are only kept for it
          let lensSeconds = 0;
          const askId = `${opts.callId ?? 'ask'}#${++asks}`;
          if (req.mode === 'latent') {
            forget();
            kept = { ask: askId, loaded: l, latents: new Map() };
          }
          // null once a later latent ask or a load forgot this one's
          const keeping = () => (kept?.ask === askId ? kept : null);
          const pipelines0 = pipelineCount(system.backend);
          let stageSeconds = 0;
          const onStage = async (rec: StageRecord) => {
            // a rollout only queues its GPU work: done is when the device has run it (a no-op on the CPU backend)
            const ts = performance.now();
            if (!rec.generatedIds) await system.agents.get(rec.role)!.decoder.backend.sync();
            const seconds = rec.seconds + (performance.now() - ts) / 1000;
            stageSeconds += seconds;
            const messages: LatentMessage[] = [];
            const tl = performance.now();
            for (const [link, L] of rec.latentsOut) {
              const to = system.style.links.find((x) => x.key === link)!.to;
              const copy = keeping() ? await keepCopy(L) : null;
              const keep = keeping();
              if (copy && keep) keep.latents.set(`${rec.index}|${link}`, copy);
              else copy?.dispose();
              messages.push({ ask: askId, stage: rec.index, link, to, latents: L.shape[0]! });
            }
            lensSeconds += (performance.now() - tl) / 1000;
            s.emit({
              type: 'stage',
              index: rec.index,
              round: rec.round + 1,
              role: rec.role,
              state: 'done',
              decode: decodes(rec.index),
              seconds,
              ...(rec.hidden ? { latents: rec.hidden.shape[0] } : {}),
              ...(messages.length ? { messages } : {}),
              // text mode: what each agent before the final one wrote (the final one's is the answer)
              ...(rec.text !== null && !stages[rec.index].decode ? { text: rec.text } : {}),
            });
            if (rec.index + 1 < stages.length) running(rec.index + 1);
            await s.flush();
          };
          const onText = (role: string, text: string) => void s.emit({ type: 'text', role, text });
          const sampling = req.sampling?.greedy ? { greedy: true } : { ...req.sampling };
          // deliberation's tools, as rmas ask gives them; the key lives in this closure for this ask only
          const tools: ToolRunners | undefined = system.style.tools
            ? { python: deps.python ?? DISABLED_TOOLS.python, search: (deps.search ?? searchWith)(req.searchKey?.trim() || undefined) }
            : undefined;
          const engine = deps.engine ?? SINGLE_ENGINE;
          // a question's task (given, or read from it) sets its token budget, as in rmas ask
          const settings = (question: string): Omit<AskOptions, 'question'> => {
            const task = req.task ?? detectTask(question);
            return {
              mode: req.mode, rounds, ...(req.latentSteps !== undefined ? { latentSteps: req.latentSteps } : {}), task, sampling,
              maxNewTokens: req.maxNewTokens ?? defaultMaxNewTokens(system.style, { task }), signal, ...(tools ? { tools } : {}),
            };
          };
          const { ablation, donor } = await prepareAblation(choice, settings, (o) => askSystem(system, o, engine));
          if (stages.length) running(0);
          const final = stages.at(-1);
          const r: AskResult = await askSystem(system, {
            ...settings(req.question),
            question: req.question,
            answerRetry: req.answerRetry ?? true,
            ...(ablation ? { ablation } : {}),
            ...(tools && final
              ? { tools: tracedRunners(tools, (t) => s.emit({ type: 'tool', round: final.round + 1, role: final.role, ...t })) }
              : {}),
            onStage,
            onText,
          }, engine);
          const view: AskResultView = {
            answer: r.answer,
            text: r.text,
            tokens: r.tokens,
            latentSteps: r.latentSteps,
            seconds: r.seconds,
            rounds: r.rounds,
            mode: r.mode,
            prefillTokensPerSec: r.prefillTokensPerSec ?? 0,
            decodeTokensPerSec: r.decodeTokensPerSec ?? 0,
            backend: l.backend,
            kvDtype: kvDtypes(system),
            stageSeconds,
            lensSeconds,
            messagesKept: keeping()?.latents.size ?? 0,
            retrySeconds: r.retrySeconds,
            pipelinesCompiled: pipelineCount(system.backend) - pipelines0,
            ...(choice ? { messages: ablationLabel(choice) } : {}),
            ...(donor ? { donorSeconds: donor.seconds } : {}),
          };
          s.emit({ type: 'done', result: view });
          await s.flush();
          return view;
        });
      });
    },

    async lens(req): Promise<LensView> {
      const t0 = performance.now();
      const L = kept?.ask === req.ask ? kept.latents.get(`${req.stage}|${req.link}`) : undefined;
      if (!kept || !L) {
        throw new InvalidArgument(
          `lens: the latents of message ${req.link} (stage ${req.stage}) of ask ${req.ask} are no longer kept: the engine keeps the ` +
            'last latent ask\'s messages until the next ask or load; ask again to read them',
        );
      }
      const { loaded } = kept;
      const link = loaded.system.style.links.find((x) => x.key === req.link)!;
      const recv = loaded.system.agents.get(link.to)!;
      loaded.busy++;
      try {
        const reading = await logitLens(L, recv.decoder.weights.lmHead, recv.tokenizer, req.k ?? k);
        return { ...reading, seconds: (performance.now() - t0) / 1000 };
      } finally {
        loaded.busy--;
        release(loaded);
      }
    },

    async evaluate(req, onEvent, opts = {}) {
      return call(opts.callId, onEvent, async (signal, s) => {
        if (req.mode !== 'latent' && req.mode !== 'text')
          throw new InvalidArgument(`evaluate: mode must be 'latent' or 'text', got ${JSON.stringify(req.mode)}`);
        const src = req.source;
        const dataset = 'benchmark' in src ? src.benchmark : (src.dataset ?? null);
        const all = 'benchmark' in src ? (await loadBenchmark(src.benchmark)).items : await benchmarkRows(dataset, src.rows);
        const items = req.limit !== undefined ? all.slice(0, req.limit) : all;
        if (!items.length) throw new InvalidArgument('evaluate: the dataset has no questions');
        if (items.some((i) => i.task === 'code')) {
          throw new InvalidArgument(
            'evaluate: code benchmarks are scored by running the answers in Python, which the tab does not do; run them with rmas run',
          );
        }
        return holding({ ...req.system, task: items[0]!.task }, req.backend, req.mode === 'latent', s, signal, async (l) => {
          const { summary } = await evaluateSystem(l.system, items, {
            mode: req.mode, rounds: req.rounds ?? DEFAULT_ROUNDS, latentSteps: req.latentSteps ?? defaultLatentSteps(l.system.style),
            maxNewTokens: req.maxNewTokens ?? defaultMaxNewTokens(l.system.style, { dataset }),
            answerRetry: req.answerRetry ?? true,
            sampling: req.sampling?.greedy ? { greedy: true } : { ...req.sampling }, signal, batchSize: req.batchSize ?? 4,
            ...(req.alone ? { alone: true } : {}), ...(req.messages ? { messages: req.messages } : {}),
            // a tab holds no API key: open-ended answers are scored by exact match (rmas run asks the LLM judge)
            judge: 'off',
            onSample: async (rec, index, total) => {
              s.emit({
                type: 'sample', index, total, record: {
                  index: rec.sample_idx, question: rec.question, gold: rec.gold, pred: rec.pred_answer_parsed, correct: rec.correct,
                  text: rec.raw_output, tokens: rec.tokens, seconds: rec.seconds,
                },
              });
              await s.flush();
            },
          });
          return summary;
        });
      });
    },

    async planSystem(spec, opts = {}): Promise<SystemPlanView> {
      const { files, models } = await specFiles(spec, deps.planFetch ?? globalThis.fetch.bind(globalThis));
      const limits = opts.backend === 'cpu' || !deps.planLimits ? CPU_PLAN_LIMITS : await deps.planLimits(opts.backend);
      const cached = deps.cachedUrls ? [...(await deps.cachedUrls())] : [];
      const list = [...files].map(([url, bytes]) => ({ url, bytes }));
      const plan = planSystemDownload(list, models, limits, opts.quantize !== undefined ? opts.quantize : (spec.quantize ?? null), {
        cached,
      });
      return { plan, text: describePlan(plan), refusal: plan.refusal, files: list };
    },

    async offlineSystem(style = OFFLINE_STYLE) {
      const manifest = getStyle(style).embedded?.manifest;
      if (!manifest) throw new InvalidArgument(`offlineSystem: style ${style} is not one the page ships (it has no page manifest)`);
      if (!deps.appBase) return null;
      const url = new URL(manifest, deps.appBase).href;
      let text: string;
      if (deps.fetchFile) {
        const b = await deps.fetchFile(url);
        if (!b) return null;
        text = new TextDecoder().decode(b);
      } else {
        const res = await modelFetch()(url);
        if (res.status === 404) return null;
        if (!res.ok) throw new InvalidArgument(`${url}: HTTP ${res.status} ${res.statusText}`);
        text = await res.text();
      }
      // the manifest names its files by paths of the app
      return specAt(JSON.parse(text) as SystemSpec, deps.appBase);
    },

    dispose() {
      forget();
      if (current) { current.stale = true; release(current); current = null; }
    },
  };
}
