/**
 * The Ask view's session with the engine: the system chosen (beyond the settings and the per-role checkpoint choice:
 * backbones, the checkpoints known, the offline spec), its load (a memory plan when it changed, then the load with
 * its progress), the asks (the modes, a message ablation, the page's history) and what a lost engine means. The Ask
 * view and its Evaluate panel share one session per page (askSession) and only render its state; one call at a time.
 */
import { proxy } from 'comlink';
import type {
  AdapterReport, AskAblation, AskResultView, EngineEvent, EvalRecordView, EvalRequest, EvalSummary, LatentMessage, LensView, SystemSpec,
  ToolCallEvent,
} from '../../workers/protocol';
import { specKey } from '../mas/spec';
import { addRecord, configRequest, finalRoleOf, newRow, type CompareConfig, type CompareRow } from './compare';
import { faultOf } from './engine';
import { initPageHub } from './hub.svelte';
import { donorQuestion } from './offline';
import { errorParts, formatBytes, type CheckpointInfo, type Services } from './services';
import { askChoice, askHistory, prefs, problem, type AskedQuestion, type Problem } from './state.svelte';
import { TINY, buildSpec, fallbackNote, isOffline, offlineSystem, releasedSize, rolesOf, styleLabel, type Backbone } from './system';
import { lensKey, messagesOf, readsEveryHandOff, stageRoles, styleUsesTools, type RunEnd, type StageEvent } from './timeline';
import { samplingOf, type Settings } from './url';

type Mode = 'latent' | 'text';

/** One mode's answer to an ask, as it streams. */
export interface AskRun {
  mode: Mode;
  /** Seconds spent loading the system before this run (the first run of an ask that loaded it), else null. */
  loadSeconds: number | null;
  stages: StageEvent[];
  /** Deliberation's tool calls, as their events came. */
  tools: ToolCallEvent[];
  text: string;
  result: AskResultView | null;
  streaming: boolean;
  error: Problem | null;
  /** The message ablation this run asked for, in words ('messages from: …', 'messages zeroed'); null for none. */
  ablation: string | null;
  /** Stopped (the user's Stop) or failed before its answer; null while it runs and once it answered. */
  ended: RunEnd;
  /** The logit lens of each latent message read so far, by lensKey: read on request, after the answer or when opened. */
  lens: Record<string, LensState>;
  /** The style, the timeline's columns and the rounds as asked (what is chosen since does not redraw this run). */
  style: string;
  roles: string[];
  rounds: number;
}

/** A latent message's lens: being read (both null), read, or why it could not be. */
export interface LensState {
  reading: LensView | null;
  error: Problem | null;
}

/** A load in progress (or the last one): bytes per file, what it is doing, and whether the system is ready. */
export interface LoadProgress {
  files: Record<string, { loaded: number; total: number }>;
  status: string;
  ready: boolean;
}

/** The system loaded for a call: the spec and backend to ask it with. */
export interface Loaded {
  spec: SystemSpec;
  backend: 'cpu' | undefined;
}

/** What the session reads and writes of the page besides the engine; the page's own state (state.svelte.ts) by default. */
export interface AskPage {
  /** The device chosen ('cpu', or 'auto': WebGPU). */
  prefs: { backend: 'auto' | 'cpu' };
  /** Per role (and 'outer'): 'released' or a checkpoint id. */
  askChoice: { byRole: Record<string, string> };
  history: { entries: AskedQuestion[] };
  /** Points released styles at the page's hub before their spec is built. */
  initHub(): Promise<void>;
}

const PAGE: AskPage = { prefs, askChoice, history: askHistory, initHub: () => initPageHub() };

export interface AskSessionDeps {
  services: Services;
  /** Default: the page's own state. */
  page?: AskPage;
  /** ms, for the seconds a load took (default performance.now). */
  now?(): number;
  /** A fresh id for each engine call (default crypto.randomUUID). */
  callId?(): string;
}

/** The settings the Evaluate panel runs a benchmark with, beside the Ask settings. */
export interface EvalJob extends Pick<EvalRequest, 'alone' | 'messages'> {
  source: EvalRequest['source'];
  limit: number;
  mode: Mode;
  batchSize: number;
}

/** The ablation of "Ask again with the messages shuffled / zeroed", for `question` asked of `style`. */
export const ablationFor = (kind: 'shuffled' | 'zeroed', style: string, question: string): AskAblation =>
  kind === 'zeroed' ? { kind: 'zeroed' } : { kind: 'from', question: donorQuestion(style, question) };
export const ablationText = (a: AskAblation): string => (a.kind === 'zeroed' ? 'messages zeroed' : `messages from: ${a.question}`);

/**
 * A plan that could not reach the hub (a released style's files, DownloadFailed): the same error, saying
 * that the hub is out of reach, what the style would download, and the ways on.
 */
function unreachable(e: unknown, style: string): unknown {
  const p = problem(e);
  if (p.name !== 'DownloadFailed') return e; // HubOffline is the user's own cache-only mode, which says so itself
  const size = releasedSize(style);
  const what = size
    ? ` ${style} downloads about ${formatBytes(size.bytes)} on first use (${(size.params / 1e9).toFixed(1)} billion parameters in bf16).`
    : '';
  return Object.assign(new Error(
    `the model hub cannot be reached (${p.message}).${what} Check the connection or the hub's address (Environment → Model hub), ` +
      'or ask the offline system, which needs no hub.',
  ), { name: p.name });
}

/** How a question was asked, for the history. */
export const setupOf = (s: Settings, backend: string): string =>
  `${s.mode === 'both' ? 'latent and text' : s.mode} · ${s.rounds} round${s.rounds === 1 ? '' : 's'} · ${s.latentSteps} latent steps · ` +
  `${s.greedy ? 'greedy' : `temperature ${s.temperature}, top-p ${s.topP}, seed ${s.seed}`} · ${backend === 'cpu' ? 'cpu' : 'webgpu'}`;

export class AskSession {
  /** The offline tiny system's spec (null until the engine gave it, or in a build without one). */
  offline = $state<SystemSpec | null>(null);
  /** The registry's checkpoints, for the pickers and for naming the ones chosen. */
  checkpoints = $state<CheckpointInfo[]>([]);
  /** Backbones typed in per role (a model folder URL or a .gguf file with its tokenizer folder); empty keeps the style's. */
  backbones = $state<Record<string, Backbone>>({});
  loading = $state<LoadProgress | null>(null);
  /** What the last load plan said (bytes to download, GPU memory). */
  planLine = $state('');
  /** What went wrong with the system (its load, a refusal, a lost engine), for Ask's error box. */
  error = $state<Problem | null>(null);
  /** The question of the runs shown: what "Ask again with the messages …" asks again (of the style chosen). */
  asked = $state<string | null>(null);
  runs = $state<AskRun[]>([]);
  /** The call of the ask going, or null. */
  callId = $state<string | null>(null);
  stopped = $state(false);
  /** A benchmark run of the Evaluate panel is going (it shares the loaded system). */
  evaluating = $state(false);
  /** The Evaluate panel's comparison: one row per configuration, growing question by question (compare.ts). */
  comparison = $state<CompareRow[]>([]);
  /** A comparison is going (between its evaluations too). */
  comparing = $state(false);
  /** The engine's WebGPU adapter (readAdapter), or null: not read yet, or no WebGPU. */
  adapter = $state<AdapterReport | null>(null);

  /** The spec (and backend) last loaded, so that an unchanged system is not planned again. */
  private loadedKey: string | null = null;
  /** The last load() loaded a system (rather than reusing the loaded one). */
  private loadedFresh = false;
  private evalCallId: string | null = null;
  private compareStopped = false;
  private readonly services: Services;
  private readonly page: AskPage;
  private readonly now: () => number;
  private readonly newCallId: () => string;

  constructor(deps: AskSessionDeps) {
    this.services = deps.services;
    this.page = deps.page ?? PAGE;
    this.now = deps.now ?? (() => performance.now());
    this.newCallId = deps.callId ?? (() => crypto.randomUUID());
  }

  /** An ask or an evaluation holds the engine. */
  get busy(): boolean {
    return this.callId !== null || this.evaluating || this.comparing;
  }

  /** Checkpoint names by id. */
  get names(): Map<string, string> {
    return new Map(this.checkpoints.map((c) => [c.id, c.name]));
  }

  /** Asks the engine for an offline system's spec (default: the first view's); a failure goes to the error box. */
  async readOffline(style = TINY): Promise<void> {
    try {
      this.offline = await offlineSystem(this.services, style);
    } catch (e) {
      this.error = problem(e);
    }
  }

  /** Asks the engine which WebGPU adapter it runs on (none: null; the load then says why it runs on the CPU). */
  async readAdapter(): Promise<void> {
    try {
      this.adapter = await this.services.engine.api().adapterReport();
    } catch {
      this.adapter = null;
    }
  }

  /**
   * Why to choose the CPU device, when WebGPU would run `style` on a fallback adapter (a software rasteriser such as
   * SwiftShader: the GPU's work on the CPU, slower than the CPU backend for the offline tiny system); else null.
   */
  fallbackNote(style: string): string | null {
    return fallbackNote(this.adapter, style, this.page.prefs.backend, 'answers');
  }


  /**
   * Reads the logit lens of message `m` of `run` (once; again after a failure): the engine computes it now, from the
   * latents it kept of its last latent ask.
   */
  async readLens(run: AskRun, m: LatentMessage): Promise<void> {
    const key = lensKey(m);
    if (run.lens[key] && !run.lens[key].error) return;
    run.lens[key] = { reading: null, error: null };
    const state = run.lens[key];
    try {
      state.reading = await this.services.engine.api().lens({ ask: m.ask, stage: m.stage, link: m.link });
    } catch (e) {
      state.error = problem(e);
    }
  }

  async refreshCheckpoints(): Promise<void> {
    try {
      this.checkpoints = await (await this.services.checkpoints()).listCheckpoints();
    } catch {
      this.checkpoints = []; // the Checkpoints tab shows why the registry cannot be read
    }
  }

  /**
   * Loads the system `settings` choose (planned first when it changed; a refusal is shown and gives null) under call
   * `id`; the spec and backend to ask it with.
   */
  async load(id: string, settings: Settings): Promise<Loaded | null> {
    this.error = null;
    this.loading = { files: {}, status: 'loading the system…', ready: false };
    const api = this.services.engine.api();
    const backend = this.page.prefs.backend === 'cpu' ? ('cpu' as const) : undefined;
    if (isOffline(settings.style)) this.offline = await offlineSystem(this.services, settings.style);
    else await this.page.initHub(); // a released style resolves at the page's hub (`?hub=` is stored at start)
    // snapshots: $state proxies cannot be structured-cloned into the worker
    const spec = await buildSpec(
      settings.style,
      $state.snapshot(this.page.askChoice.byRole),
      $state.snapshot(this.offline),
      this.services.checkpoints,
      this.names,
      $state.snapshot(this.backbones),
    );
    const key = specKey(spec, `${backend ?? 'webgpu'}|`);
    if (key !== this.loadedKey) {
      // before any download: what it will fetch and whether this adapter can hold it (headers only)
      this.loading.status = 'checking what the system needs…';
      this.planLine = '';
      let p: Awaited<ReturnType<typeof api.planSystem>>;
      try {
        p = await api.planSystem(spec, { backend });
      } catch (e) {
        throw unreachable(e, settings.style);
      }
      this.planLine = `will download ${formatBytes(p.plan.fetchBytes)}${p.plan.cachedBytes ? ` (${formatBytes(p.plan.cachedBytes)} cached)` : ''}` +
        ` · needs about ${formatBytes(p.plan.gpuBytes)} of GPU memory`;
      if (p.refusal) {
        this.error = { name: p.plan.refusalName ?? 'InvalidArgument', message: `this system cannot run here: ${p.refusal}` };
        this.loading.status = 'not loaded';
        return null;
      }
      this.loading.status = 'loading the system…';
    }
    this.loadedFresh = key !== this.loadedKey;
    await api.loadSystem(spec, proxy((e: EngineEvent) => this.onLoadEvent(e)), { backend, callId: id });
    this.loadedKey = key;
    return { spec, backend };
  }

  /** Asks `question` in the mode(s) `settings` choose; `searchKey` goes with it to a style with tools. */
  async ask(question: string, settings: Settings, searchKey = ''): Promise<void> {
    if (this.busy || !question.trim()) return;
    await this.askAs(question.trim(), settings.mode === 'both' ? ['latent', 'text'] : [settings.mode], settings, searchKey);
  }

  /**
   * The question of the runs shown asked again in latent mode, every latent message replaced (src/mas/ablation.ts):
   * by those the system sends for another question (shuffled: donorQuestion's), or by zeros. What changes in the
   * answer is what the messages carried.
   */
  async askAgain(kind: 'shuffled' | 'zeroed', settings: Settings, searchKey = ''): Promise<void> {
    if (this.busy || !this.asked) return;
    await this.askAs(this.asked, ['latent'], settings, searchKey, ablationFor(kind, settings.style, this.asked));
  }

  /** Cancels the ask going. */
  async stop(): Promise<void> {
    if (!this.callId) return;
    this.stopped = true;
    try {
      await this.services.engine.api().cancel(this.callId);
    } catch (e) {
      this.error = problem(e);
    }
  }

  /**
   * A benchmark of the Evaluate panel on the system chosen, each scored question to `onSample`: its summary, or null
   * when the system cannot run here (the refusal is in `error`) or the run was cancelled.
   */
  async evaluate(
    settings: Settings, job: EvalJob, onSample: (record: EvalRecordView, total: number) => void, onReady?: () => void,
  ): Promise<EvalSummary | null> {
    const id = this.newCallId();
    this.evalCallId = id;
    this.evaluating = true;
    try {
      const ready = await this.load(id, settings);
      if (!ready) return null;
      const sampling = samplingOf(settings);
      const onEvent = (e: EngineEvent) => {
        if (e.type === 'sample') onSample(e.record, e.total);
        else if (e.type === 'ready') onReady?.(); // the system is ready: the questions begin
      };
      return await this.services.engine.api().evaluate(
        {
          system: ready.spec,
          source: job.source,
          limit: job.limit,
          mode: job.mode,
          rounds: settings.rounds,
          latentSteps: settings.latentSteps,
          sampling,
          backend: ready.backend,
          batchSize: job.batchSize,
          ...(job.alone ? { alone: true } : {}),
          ...(job.messages ? { messages: job.messages } : {}),
        },
        proxy(onEvent), { callId: id },
      );
    } catch (e) {
      if (errorParts(e).name === 'Cancelled') return null;
      throw e;
    } finally {
      this.evaluating = false;
      this.evalCallId = null;
    }
  }

  /** Cancels the benchmark run going (and the comparison it is part of). */
  async stopEvaluation(): Promise<void> {
    this.compareStopped = true;
    if (this.evalCallId) await this.services.engine.api().cancel(this.evalCallId);
  }

  /**
   * The same questions through each configuration in turn (compare.ts), into `comparison` as they are answered: a
   * row's wall seconds run from its system being ready to each answer. A refusal (in `error`) or Stop ends it; a
   * configuration that fails is marked so and the next one runs.
   */
  async compare(settings: Settings, job: Omit<EvalJob, 'mode' | 'alone' | 'messages'>, configs: readonly CompareConfig[]): Promise<void> {
    if (this.busy) return;
    this.comparison = configs.map((c) => newRow(c, finalRoleOf(settings.style)));
    this.comparing = true;
    this.compareStopped = false;
    try {
      for (const row of this.comparison) {
        if (this.compareStopped) break;
        const { mode, rounds, alone, messages } = configRequest(row.config);
        row.state = 'loading';
        let t0 = this.now();
        try {
          const summary = await this.evaluate(
            { ...settings, rounds: rounds ?? settings.rounds },
            { ...job, mode, ...(alone ? { alone } : {}), ...(messages ? { messages } : {}) },
            (record, total) => addRecord(row, record, total, (this.now() - t0) / 1000),
            () => {
              t0 = this.now();
              row.state = 'asking';
            },
          );
          row.state = summary ? 'done' : 'stopped';
          if (!summary) break; // cancelled, or refused (the refusal is in `error`)
        } catch (e) {
          row.state = 'failed';
          row.error = `${problem(e).name}: ${problem(e).message}`;
        }
      }
    } finally {
      for (const row of this.comparison) if (row.state === 'waiting' && this.compareStopped) row.state = 'stopped';
      this.comparing = false;
    }
  }

  private onLoadEvent(e: EngineEvent) {
    const loading = this.loading;
    if (!loading) return;
    if (e.type === 'initiate') loading.files[e.file] = { loaded: 0, total: 0 };
    else if (e.type === 'download') loading.files[e.file] = { loaded: e.loaded, total: e.total };
    else if (e.type === 'compile') loading.status = `compiling ${e.what}…`;
    else if (e.type === 'ready') {
      loading.ready = true;
      loading.status = `ready on ${e.backend} in ${e.seconds.toFixed(1)} s${e.reason ? ` (${e.reason})` : ''}`;
    }
  }

  private async askAs(q: string, modes: Mode[], settings: Settings, searchKey: string, ablation?: AskAblation) {
    const id = this.newCallId();
    this.callId = id;
    this.stopped = false;
    this.asked = q;
    const entry: Omit<AskedQuestion, 'answers'> = {
      at: Date.now(),
      question: q,
      style: styleLabel(settings.style),
      setup: setupOf(ablation ? { ...settings, mode: 'latent' } : settings, this.page.prefs.backend),
      ...(ablation ? { ablation: ablationText(ablation) } : {}),
    };
    this.runs = modes.map((mode) => ({
      mode, loadSeconds: null, stages: [], tools: [], text: '', result: null, streaming: false, error: null,
      ablation: ablation ? ablationText(ablation) : null, ended: null, lens: {},
      style: settings.style, roles: stageRoles(settings.style, rolesOf(settings.style, this.offline)), rounds: settings.rounds,
    }));
    const api = this.services.engine.api();
    try {
      const t0 = this.now();
      const ready = await this.load(id, settings);
      if (this.runs[0] && this.loadedFresh) this.runs[0].loadSeconds = (this.now() - t0) / 1000;
      if (!ready) {
        this.runs = [];
        return;
      }
      const { spec, backend } = ready;
      for (const run of this.runs) {
        if (this.stopped) break;
        run.streaming = true;
        if (this.loading) this.loading.status = `asking (${run.mode} mode${ablation ? `, ${ablationText(ablation)}` : ''})…`;
        try {
          const sampling = samplingOf(settings);
          run.result = await api.ask(
            {
              system: spec,
              question: q,
              mode: run.mode,
              rounds: settings.rounds,
              latentSteps: settings.latentSteps,
              sampling,
              backend,
              ...(ablation ? { ablation } : {}),
              ...(styleUsesTools(settings.style) && searchKey.trim() ? { searchKey: searchKey.trim() } : {}),
            },
            proxy((e: EngineEvent) => onRunEvent(run, e)),
            { callId: id },
          );
          run.text = run.result.text;
        } catch (e) {
          const p = problem(e);
          run.ended = p.name === 'Cancelled' ? 'cancelled' : 'failed';
          if (p.name === 'Cancelled') this.stopped = true;
          else run.error = this.lostHere(e, p, 'This answer');
          if (p.name !== 'Cancelled' && p.name !== 'InvalidArgument') break;
        } finally {
          run.streaming = false;
        }
      }
    } catch (e) {
      const p = problem(e);
      if (p.name === 'Cancelled') this.stopped = true;
      else this.error = this.lostHere(e, p, 'The system being loaded');
      this.runs = []; // nothing ran: no timeline of a system that did not load
    } finally {
      this.callId = null;
      if (this.loading) this.loading.status = this.error ? 'not loaded' : this.runs.some((r) => r.error) ? 'failed' : 'done';
      this.remember(entry, modes);
    }
    // the lens once every answer is in (never ahead of them): of the last message, which the messages view shows open;
    // on a multi-hop task, then of every other hand-off, which the timeline shows as the hop each round supplied
    const run = this.runs.find((r) => r.mode === 'latent' && r.result);
    const sent = run ? messagesOf(run.stages) : [];
    const read = readsEveryHandOff(settings.style) ? [...sent.slice(-1), ...sent.slice(0, -1)] : sent.slice(-1);
    for (const m of read) await this.readLens(run!, m.message);
  }

  /**
   * An engine replaced under the ask (src/ui/engine.ts: its worker crashed or stopped answering, or its GPU device was
   * lost): what happened and what to do, in place; the new worker has no system loaded, so the next ask loads it.
   */
  private lostHere(e: unknown, p: Problem, what: string): Problem {
    if (!faultOf(e)) return p;
    this.loadedKey = null;
    const why = p.message.charAt(0).toUpperCase() + p.message.slice(1);
    return { name: p.name, message: `${why}. ${what} was lost; ask again: the new engine loads the system first.` };
  }

  /** The ask just ended, into the history: each mode's answer, or its error, or that it was stopped. */
  private remember(entry: Omit<AskedQuestion, 'answers'>, modes: Mode[]) {
    const failed = this.error ? `${this.error.name}: ${this.error.message}` : null;
    const answers = modes.map((mode) => {
      const run = this.runs.find((r) => r.mode === mode);
      const why = run?.error ? `${run.error.name}: ${run.error.message}` : run?.result ? null : (failed ?? 'stopped');
      return { mode, answer: why ? '' : run!.result!.answer, text: why ? '' : run!.result!.text, error: why };
    });
    this.page.history.entries.push({ ...entry, answers });
  }
}

function onRunEvent(run: AskRun, e: EngineEvent) {
  if (e.type === 'stage') run.stages.push(e);
  else if (e.type === 'tool') run.tools.push(e);
  else if (e.type === 'text') run.text = e.text; // the whole answer so far (workers/protocol.ts), not a piece
  else if (e.type === 'done') {
    run.result = e.result;
    run.text = e.result.text;
  }
  // the user's own Stop is no error (the run ends 'cancelled')
  else if (e.type === 'error' && e.name !== 'Cancelled') run.error = { name: e.name, message: e.message };
}

const sessions = new WeakMap<Services, AskSession>();

/** The page's Ask session over `services`: the same one for the Ask view and its Evaluate panel. */
export function askSession(services: Services): AskSession {
  let s = sessions.get(services);
  if (!s) sessions.set(services, (s = new AskSession({ services })));
  return s;
}
