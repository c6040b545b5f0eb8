// The Ask session over a scripted fake engine, in Node: plan, load and ask (the requests' fields), a second ask on
// the loaded system, a changed system planned and loaded again, the ablations, the problems a failed load shows, Stop,
// and the Evaluate panel's benchmark run on the same session. The views' browser tests drive the same through buttons.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type {
  AskRequest, AskResultView, EngineEvent, EvalRequest, EvalSummary, LatentMessage, LensRequest, LensView, SystemSpec,
} from '../../workers/protocol';
import { priceSplit } from '../eval/tiny-prices';
import { EngineRestarted } from '../errors';
import { FAKE_OFFLINE, fakeAskEngine } from '../../test/util/fake-ask-engine';
import { AskSession, askSession, type AskPage } from './ask-session.svelte';
import { addRecord, newRow, rowFigures } from './compare';
import { FAULTS } from './engine';
import { DEFAULT_ROW } from './offline';
import { engineHealth } from './state.svelte';
import { TINY } from './system';
import { DEFAULTS, type Settings } from './url';

afterEach(() => {
  engineHealth.lost = null; // problem() flags a lost engine page-wide
});

/** The offline system's test split: the question asked, and its donor for "messages shuffled". */
const TEST = priceSplit('test').map((r) => r.question);
const [FIRST, NEXT] = [TEST[DEFAULT_ROW]!, TEST[DEFAULT_ROW + 1]!];

/** The spec the session builds of the offline system with no checkpoint or backbone chosen (system.ts buildSpec). */
const OFFLINE_SPEC: SystemSpec = { ...FAKE_OFFLINE, outer: undefined, label: 'offline tiny' };

const PLAN_LINE = 'will download 3.00 MiB (1.00 MiB cached) · needs about 1.50 GiB of GPU memory';

const answered = (req: AskRequest, text: string): AskResultView => ({
  answer: /\\boxed\{([^}]*)\}/.exec(text)?.[1] ?? '', text, tokens: 3, latentSteps: req.latentSteps ?? 0, seconds: 0.5,
  rounds: req.rounds ?? 3, mode: req.mode, prefillTokensPerSec: 100, decodeTokensPerSec: 10, backend: 'cpu', kvDtype: 'f32',
  stageSeconds: 0.25, lensSeconds: 0, retrySeconds: 0, pipelinesCompiled: 0,
});

const SUMMARY: EvalSummary = {
  type: 'summary', samples: 2, accuracy: 0.5, pass_at_k: 0.5, k: 1, per_rollout_accuracy: [0.5], tokens_mean: 11, seconds_mean: 0.5,
};

type Evaluate = (req: EvalRequest, on: (e: EngineEvent) => void) => Promise<EvalSummary>;

/**
 * A session over fakeAskEngine (its offline spec, a plan of 3 MiB and 1.5 GiB, a load that reports one file's bytes)
 * and `evaluate`; its own page state; the clock moves 250 ms each time it is read; call ids are call-1, call-2, ….
 */
function setup(
  ask: (req: AskRequest, on: (e: EngineEvent) => void) => Promise<AskResultView>,
  opts: { refusal?: string; evaluate?: Evaluate } & Pick<NonNullable<Parameters<typeof fakeAskEngine>[1]>, 'lens' | 'adapter'> = {},
) {
  const { api: askApi, services } = fakeAskEngine(ask, {
    refusal: opts.refusal ?? null,
    ...(opts.lens ? { lens: opts.lens } : {}),
    ...(opts.adapter ? { adapter: opts.adapter } : {}),
    loadEvents: [
      { type: 'download', file: '/l/model.safetensors', loaded: 512, total: 1024 },
      { type: 'ready', backend: 'cpu', seconds: 0.2 },
    ],
  });
  const api = Object.assign(askApi, { evaluate: vi.fn<Evaluate>(opts.evaluate ?? (async () => SUMMARY)) });
  const page: AskPage = {
    prefs: { backend: 'auto' },
    askChoice: { byRole: {} },
    history: { entries: [] },
    initHub: vi.fn(async () => {}),
  };
  let clock = 0;
  let ids = 0;
  const session = new AskSession({ services, page, now: () => (clock += 250), callId: () => `call-${++ids}` });
  return { api, page, session };
}

const settingsOf = (s: Partial<Settings> = {}): Settings => ({ ...DEFAULTS, rounds: 2, ...s });

/** The options (backend, call id) of call `i` of a fake engine method (the fakes declare only the first two arguments). */
const optsOf = (fn: { mock: { calls: unknown[][] } }, i: number) => fn.mock.calls[i]![2] as { backend?: string; callId?: string };

describe('AskSession', () => {
  it('plans the chosen system, loads it with its progress, then asks with the settings', async () => {
    const { api, page, session } = setup(async (req, on) => {
      // while the ask runs: the call holds the engine, and the status says what it does
      expect([session.busy, session.callId, session.loading!.status]).toEqual([true, 'call-1', 'asking (latent mode)…']);
      on({ type: 'stage', index: 0, round: 1, role: 'expert', state: 'done', decode: false, latents: 4, seconds: 0.25 });
      on({ type: 'text', role: 'learner', text: 'It is ' });
      on({ type: 'text', role: 'learner', text: 'It is \\boxed{32}' });
      return answered(req, 'It is \\boxed{32}');
    });
    await session.readOffline();
    expect(session.offline).toEqual(FAKE_OFFLINE);
    await session.ask(`  ${FIRST}\n`, settingsOf());

    // the plan, then the load, then the ask, each once, of one spec
    const [plan, load, ask] = [api.planSystem, api.loadSystem, api.ask].map((f) => f.mock.invocationCallOrder);
    expect([plan!.length, load!.length, ask!.length]).toEqual([1, 1, 1]);
    expect(plan![0]! < load![0]! && load![0]! < ask![0]!).toBe(true);
    expect(page.initHub).not.toHaveBeenCalled(); // the offline system needs no hub
    expect(api.planSystem.mock.calls[0]).toEqual([OFFLINE_SPEC, { backend: undefined }]);
    const [loaded, , loadOpts] = api.loadSystem.mock.calls[0]! as unknown as [SystemSpec, unknown, unknown];
    expect(loaded).toEqual(OFFLINE_SPEC);
    expect(loadOpts).toEqual({ backend: undefined, callId: 'call-1' });
    const req = api.ask.mock.calls[0]![0];
    expect(req).toEqual({
      system: OFFLINE_SPEC,
      question: FIRST, // trimmed
      mode: 'latent',
      rounds: 2,
      latentSteps: 4,
      sampling: { temperature: 0.6, topP: 0.95, seed: 42 },
      backend: undefined,
    });
    expect(req.system).toBe(loaded);
    expect(optsOf(api.ask, 0)).toEqual({ callId: 'call-1' });

    // what the view shows
    expect(session.planLine).toBe(PLAN_LINE);
    expect(session.loading).toEqual({ files: { '/l/model.safetensors': { loaded: 512, total: 1024 } }, status: 'done', ready: true });
    expect([session.error, session.callId, session.busy, session.stopped, session.asked]).toEqual([null, null, false, false, FIRST]);
    expect(session.runs).toHaveLength(1);
    const run = session.runs[0]!;
    expect([run.mode, run.text, run.result?.answer, run.streaming, run.error, run.ablation]).toEqual([
      'latent', 'It is \\boxed{32}', '32', false, null, null,
    ]);
    expect(run.stages.map((s) => [s.role, s.latents])).toEqual([['expert', 4]]);
    expect(run.loadSeconds).toBe(0.25); // one clock tick between the start of the load and its end
    expect(page.history.entries).toHaveLength(1);
    const { at, ...entry } = page.history.entries[0]!;
    expect(typeof at).toBe('number');
    expect(entry).toEqual({
      question: FIRST,
      style: 'tiny distillation (offline)',
      setup: 'latent · 2 rounds · 4 latent steps · temperature 0.6, top-p 0.95, seed 42 · webgpu',
      answers: [{ mode: 'latent', answer: '32', text: 'It is \\boxed{32}', error: null }],
    });
  });

  it('asks again on the loaded system without planning it again, and both modes in turn', async () => {
    const { api, page, session } = setup(async (req) => answered(req, req.mode === 'text' ? '\\boxed{7}' : '\\boxed{8}'));
    await session.ask('What is 3 + 4?', settingsOf());
    await session.ask('What is 3 + 5?', settingsOf({ mode: 'both', greedy: true }));

    expect(api.planSystem).toHaveBeenCalledTimes(1);
    // the worker is handed the same spec under the new call, and reuses what it loaded
    expect(api.loadSystem).toHaveBeenCalledTimes(2);
    expect(api.loadSystem.mock.calls[1]![0]).toEqual(api.loadSystem.mock.calls[0]![0]);
    expect(optsOf(api.loadSystem, 1)).toEqual({ backend: undefined, callId: 'call-2' });
    expect(api.ask.mock.calls.map(([r], i) => [r.question, r.mode, r.sampling, optsOf(api.ask, i).callId]).slice(1)).toEqual([
      ['What is 3 + 5?', 'latent', { greedy: true }, 'call-2'],
      ['What is 3 + 5?', 'text', { greedy: true }, 'call-2'],
    ]);
    // no load time on an ask that loaded nothing
    expect(session.runs.map((r) => [r.mode, r.loadSeconds, r.result?.answer])).toEqual([['latent', null, '8'], ['text', null, '7']]);
    expect(session.planLine).toBe(PLAN_LINE);
    expect(page.history.entries.map((e) => [e.question, e.setup, e.answers.map((a) => a.answer)])).toEqual([
      ['What is 3 + 4?', 'latent · 2 rounds · 4 latent steps · temperature 0.6, top-p 0.95, seed 42 · webgpu', ['8']],
      ['What is 3 + 5?', 'latent and text · 2 rounds · 4 latent steps · greedy · webgpu', ['8', '7']],
    ]);
  });

  it('plans and loads again when the system changes: another device, a backbone', async () => {
    const { api, page, session } = setup(async (req) => answered(req, '\\boxed{1}'));
    await session.ask('q1', settingsOf());
    page.prefs.backend = 'cpu';
    await session.ask('q2', settingsOf({ greedy: true }));
    session.backbones.learner = { model: 'https://hub.example/models/learner-2' };
    await session.ask('q3', settingsOf({ greedy: true }));
    await session.ask('q4', settingsOf({ greedy: true })); // unchanged since q3

    expect(api.planSystem.mock.calls.map(([spec, o]) => [spec.roles.learner!.model, o])).toEqual([
      ['/l', { backend: undefined }],
      ['/l', { backend: 'cpu' }],
      ['https://hub.example/models/learner-2', { backend: 'cpu' }],
    ]);
    expect(api.loadSystem).toHaveBeenCalledTimes(4);
    const asked = api.ask.mock.calls.map(([r]) => [r.question, r.backend, r.system.label, r.system.roles.learner!.model]);
    expect(asked).toEqual([
      ['q1', undefined, 'offline tiny', '/l'],
      ['q2', 'cpu', 'offline tiny', '/l'],
      ['q3', 'cpu', 'offline tiny + backbone learner: learner-2', 'https://hub.example/models/learner-2'],
      ['q4', 'cpu', 'offline tiny + backbone learner: learner-2', 'https://hub.example/models/learner-2'],
    ]);
    expect(api.ask.mock.calls[2]![0].system.roles.expert).toEqual({ model: '/e' });
    expect(page.history.entries.map((e) => e.setup.split(' · ').at(-1))).toEqual(['webgpu', 'cpu', 'cpu', 'cpu']);
  });

  it('resolves a released style at the page hub and sends the search key to a style with tools only', async () => {
    const { api, page, session } = setup(async (req) => answered(req, '\\boxed{2}'));
    await session.ask('q', settingsOf({ style: 'deliberation' }), ' tvly-key ');
    await session.ask('q', settingsOf({ style: 'sequential_light' }), 'tvly-key');
    expect(page.initHub).toHaveBeenCalledTimes(2);
    expect(api.ask.mock.calls.map(([r]) => [r.system.style, r.system.label, r.searchKey])).toEqual([
      ['deliberation', 'released', 'tvly-key'],
      ['sequential_light', 'released', undefined],
    ]);
    expect(JSON.stringify([api.planSystem.mock.calls, api.loadSystem.mock.calls, page.history.entries])).not.toContain('tvly');
  });

  it('asks the question shown again with the messages shuffled or zeroed, in latent mode only', async () => {
    const { api, page, session } = setup(async (req) => answered(req, req.ablation ? '\\boxed{9}' : '\\boxed{24}'));
    await session.askAgain('zeroed', settingsOf()); // nothing asked yet
    expect(api.ask).not.toHaveBeenCalled();
    const settings = settingsOf({ mode: 'both', greedy: true, rounds: 1 });
    await session.ask(FIRST, settings);
    await session.askAgain('shuffled', settings);
    await session.askAgain('zeroed', settings);

    expect(api.ask.mock.calls.map(([r]) => [r.question, r.mode, r.ablation, r.rounds, r.latentSteps, r.sampling])).toEqual([
      [FIRST, 'latent', undefined, 1, 4, { greedy: true }],
      [FIRST, 'text', undefined, 1, 4, { greedy: true }],
      [FIRST, 'latent', { kind: 'from', question: NEXT }, 1, 4, { greedy: true }],
      [FIRST, 'latent', { kind: 'zeroed' }, 1, 4, { greedy: true }],
    ]);
    expect(session.runs.map((r) => [r.mode, r.ablation, r.result?.answer])).toEqual([['latent', 'messages zeroed', '9']]);
    expect(page.history.entries.map((e) => [e.ablation ?? null, e.setup, e.answers.map((a) => `${a.mode} ${a.answer}`)])).toEqual([
      [null, 'latent and text · 1 round · 4 latent steps · greedy · webgpu', ['latent 24', 'text 24']],
      [`messages from: ${NEXT}`, 'latent · 1 round · 4 latent steps · greedy · webgpu', ['latent 9']],
      ['messages zeroed', 'latent · 1 round · 4 latent steps · greedy · webgpu', ['latent 9']],
    ]);
  });

  it("shows the plan's refusal as a named problem and loads nothing", async () => {
    const why = 'model 1: one row of "model.embed_tokens.weight" is larger than this adapter\'s 4096-byte storage-binding limit';
    const { api, page, session } = setup(async () => { throw new Error('unused'); }, { refusal: why });
    await session.ask('q', settingsOf());
    expect(session.error).toEqual({ name: 'BindingLimitExceeded', message: `this system cannot run here: ${why}` });
    expect([session.loading!.status, session.planLine, session.runs, session.callId]).toEqual(['not loaded', PLAN_LINE, [], null]);
    expect(api.loadSystem).not.toHaveBeenCalled();
    expect(api.ask).not.toHaveBeenCalled();
    expect(page.history.entries[0]!.answers).toEqual([
      { mode: 'latent', answer: '', text: '', error: `BindingLimitExceeded: this system cannot run here: ${why}` },
    ]);
  });

  it("says a released style's hub is out of reach, with the style's size, and leaves no stale plan, status or timeline", async () => {
    const { api, session } = setup(async (req) => answered(req, '\\boxed{5}'));
    await session.ask(FIRST, settingsOf({ rounds: 2 }));
    expect(session.planLine).toBe(PLAN_LINE);
    expect(session.runs.map((r) => [r.style, r.roles, r.rounds])).toEqual([[TINY, ['expert', 'learner'], 2]]);
    api.planSystem.mockRejectedValueOnce(Object.assign(
      new Error(
        'https://huggingface.co/api/models/RecursiveMAS/x: network error (Failed to fetch) after 3 attempt(s); check the connection',
      ),
      { name: 'DownloadFailed' },
    ));
    await session.ask('q', settingsOf({ style: 'sequential_light', rounds: 3 }));
    expect(session.error).toEqual({
      name: 'DownloadFailed',
      message: 'the model hub cannot be reached (https://huggingface.co/api/models/RecursiveMAS/x: network error (Failed to fetch) ' +
        'after 3 attempt(s); check the connection). sequential_light downloads about 7.82 GiB on first use (4.2 billion ' +
        "parameters in bf16). Check the connection or the hub's address (Environment → Model hub), or ask the offline system, " +
        'which needs no hub.',
    });
    expect(session.loading!.status).toBe('not loaded');
    expect(session.planLine).toBe(''); // not the offline system's plan
    expect(session.runs).toEqual([]);
    expect(api.loadSystem).toHaveBeenCalledTimes(1);
    // the style's runs keep the columns and rounds they were asked with, whatever is chosen since
    await session.ask(FIRST, settingsOf({ rounds: 1 }));
    expect(session.runs.map((r) => [r.style, r.roles, r.rounds])).toEqual([[TINY, ['expert', 'learner'], 1]]);
  });

  it('shows a failed load by its name, and a load lost with the engine as what to do; the next ask plans again', async () => {
    const { api, page, session } = setup(async (req) => answered(req, '\\boxed{5}'));
    api.loadSystem.mockRejectedValueOnce(Object.assign(new Error('https://hub.example/x.safetensors: HTTP 503'), { name: 'NetworkError' }));
    await session.ask('q1', settingsOf());
    expect(session.error).toEqual({ name: 'NetworkError', message: 'https://hub.example/x.safetensors: HTTP 503' });
    expect(session.loading!.status).toBe('not loaded'); // never a status of work that stopped
    expect(page.history.entries[0]!.answers[0]!.error).toBe('NetworkError: https://hub.example/x.safetensors: HTTP 503');
    expect(api.ask).not.toHaveBeenCalled();

    // the worker died under the load: the next ask plans and loads on the new engine
    await session.ask('q2', settingsOf());
    expect(api.planSystem).toHaveBeenCalledTimes(2); // the failed load was not recorded as loaded
    api.loadSystem.mockRejectedValueOnce(
      Object.assign(new EngineRestarted(`${FAULTS.deviceLost} (unknown: reset); a new engine worker was started`), {
        fault: FAULTS.deviceLost,
      }),
    );
    await session.ask('q3', settingsOf());
    expect(session.error).toEqual({
      name: 'EngineRestarted',
      message: 'The GPU device was lost (unknown: reset); a new engine worker was started. The system being loaded was lost; ' +
        'ask again: the new engine loads the system first.',
    });
    expect(engineHealth.lost).toEqual({
      name: 'EngineRestarted', message: `${FAULTS.deviceLost} (unknown: reset); a new engine worker was started`,
    });
    await session.ask('q4', settingsOf());
    expect(api.planSystem).toHaveBeenCalledTimes(3);
    expect(session.error).toBeNull();
    expect(api.ask.mock.calls.map(([r]) => r.question)).toEqual(['q2', 'q4']);
  });

  it('shows an answer lost with the engine in its run, and keeps a text error beside the latent answer', async () => {
    const { api, page, session } = setup(async (req) => {
      if (req.question === 'lost') throw Object.assign(new EngineRestarted('the engine worker crashed'), { fault: FAULTS.crashed });
      if (req.mode === 'text') throw Object.assign(new Error('the text baseline needs a decoder'), { name: 'InvalidArgument' });
      return answered(req, '\\boxed{3}');
    });
    await session.ask('q', settingsOf({ mode: 'both' }));
    expect(api.ask).toHaveBeenCalledTimes(2); // an InvalidArgument stops that run only
    expect(session.runs.map((r) => [r.mode, r.error])).toEqual([
      ['latent', null],
      ['text', { name: 'InvalidArgument', message: 'the text baseline needs a decoder' }],
    ]);
    expect(session.loading!.status).toBe('failed');

    await session.ask('lost', settingsOf({ mode: 'both' }));
    expect(api.ask).toHaveBeenCalledTimes(3); // a lost engine ends the ask
    expect(session.runs[0]!.error).toEqual({
      name: 'EngineRestarted',
      message: 'The engine worker crashed. This answer was lost; ask again: the new engine loads the system first.',
    });
    expect(page.history.entries[1]!.answers.map((a) => a.error)).toEqual([
      'EngineRestarted: The engine worker crashed. This answer was lost; ask again: the new engine loads the system first.',
      'stopped',
    ]);
    await session.ask('q', settingsOf());
    expect(api.planSystem).toHaveBeenCalledTimes(2); // planned again on the new engine
  });

  it('Stop cancels the ask by its call id and the history says it was stopped', async () => {
    let release!: () => void;
    const { api, page, session } = setup((_req, on) => new Promise((_, reject) => {
      on({ type: 'text', role: 'learner', text: 'It' });
      release = () => reject(Object.assign(new Error('the call was cancelled'), { name: 'Cancelled' }));
    }));
    const asking = session.ask('q', settingsOf({ mode: 'both' }));
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(1));
    await session.stop();
    expect(api.cancel).toHaveBeenCalledWith('call-1');
    release();
    await asking;
    expect(api.ask).toHaveBeenCalledTimes(1); // the text run did not start
    expect([session.stopped, session.error, session.callId, session.runs[0]!.text]).toEqual([true, null, null, 'It']);
    expect(page.history.entries[0]!.answers.map((a) => a.error)).toEqual(['stopped', 'stopped']);
  });

  it("runs the Evaluate panel's benchmark on the system Ask loaded, one call at a time", async () => {
    let during: unknown[] = [];
    const { api, session } = setup(async (req) => answered(req, '\\boxed{1}'), {
      evaluate: async (_req, on) => {
        during = [session.evaluating, session.busy];
        await session.ask('blocked', settingsOf()); // an ask waits for the engine
        const record = { index: 0, question: 'q0', gold: '1', pred: '1', correct: true, text: '1', tokens: 1, seconds: 0.5 };
        on({ type: 'sample', index: 0, total: 2, record });
        on({ type: 'stage', index: 0, round: 1, role: 'expert', state: 'done', decode: false }); // not a sample: ignored
        return SUMMARY;
      },
    });
    await session.ask('q', settingsOf());
    const seen: [string, number][] = [];
    const rows = [{ question: 'q0', answer: '1' }];
    const summary = await session.evaluate(
      settingsOf({ greedy: true, rounds: 3, latentSteps: 8 }),
      { source: { rows, dataset: null }, limit: 2, mode: 'latent', batchSize: 4 },
      (r, total) => seen.push([r.question, total]),
    );
    expect(summary).toEqual(SUMMARY);
    expect(seen).toEqual([['q0', 2]]);
    expect(during).toEqual([true, true]);
    expect(api.ask.mock.calls.map(([r]) => r.question)).toEqual(['q']);
    expect(api.planSystem).toHaveBeenCalledTimes(1); // the system Ask loaded
    expect(optsOf(api.loadSystem, 1)).toEqual({ backend: undefined, callId: 'call-2' });
    const [req, , opts] = api.evaluate.mock.calls[0]! as unknown as [EvalRequest, unknown, { callId: string }];
    expect(req).toEqual({
      system: OFFLINE_SPEC,
      source: { rows, dataset: null },
      limit: 2,
      mode: 'latent',
      rounds: 3,
      latentSteps: 8,
      sampling: { greedy: true },
      backend: undefined,
      batchSize: 4,
    });
    expect(opts).toEqual({ callId: 'call-2' });
    expect([session.evaluating, session.busy]).toEqual([false, false]);
  });

  it('stops, refuses and fails an evaluation as the panel shows it', async () => {
    let release!: () => void;
    const { api, session } = setup(async () => { throw new Error('unused'); }, {
      evaluate: () => new Promise((_, reject) => {
        release = () => reject(Object.assign(new Error('the call was cancelled'), { name: 'Cancelled' }));
      }),
    });
    const job = { source: { benchmark: 'math500' }, limit: 5, mode: 'text' as const, batchSize: 1 };
    const running = session.evaluate(settingsOf({ greedy: true }), job, () => {});
    await vi.waitFor(() => expect(api.evaluate).toHaveBeenCalledTimes(1));
    await session.stopEvaluation();
    expect(api.cancel).toHaveBeenCalledWith('call-1');
    release();
    expect(await running).toBeNull(); // cancelled: no summary, no error
    expect(session.evaluating).toBe(false);

    api.evaluate.mockRejectedValueOnce(Object.assign(new Error('evaluate: code benchmarks run in Python'), { name: 'InvalidArgument' }));
    await expect(session.evaluate(settingsOf(), job, () => {})).rejects.toMatchObject({
      name: 'InvalidArgument', message: 'evaluate: code benchmarks run in Python',
    });
    expect([session.evaluating, session.error]).toEqual([false, null]);
    await session.stopEvaluation(); // nothing running: nothing cancelled
    expect(api.cancel).toHaveBeenCalledTimes(1);
  });

  it("an evaluation of a system this adapter cannot hold gives no summary and Ask's error box says why", async () => {
    const { api, session } = setup(async () => { throw new Error('unused'); }, { refusal: 'too big' });
    const run = { source: { benchmark: 'math500' as const }, limit: 1, mode: 'latent' as const, batchSize: 1 };
    const summary = await session.evaluate(settingsOf(), run, () => {});
    expect(summary).toBeNull();
    expect(session.error).toEqual({ name: 'BindingLimitExceeded', message: 'this system cannot run here: too big' });
    expect([api.loadSystem.mock.calls.length, api.evaluate.mock.calls.length, session.evaluating]).toEqual([0, 0, false]);
  });

  it('is one session per page: the Ask view and its Evaluate panel get the same', () => {
    const { services } = fakeAskEngine(async () => { throw new Error('unused'); });
    const other = fakeAskEngine(async () => { throw new Error('unused'); }).services;
    expect(askSession(services)).toBe(askSession(services));
    expect(askSession(other)).not.toBe(askSession(services));
  });
});

/** A stage's message from `stage` on `link` to the learner, of ask `ask`. */
const message = (stage: number, link: string, ask = 'call-1#1'): LatentMessage => ({ ask, stage, link, to: 'learner', latents: 2 });
const stageDone = (index: number, role: string, messages?: LatentMessage[], text?: string): EngineEvent => ({
  type: 'stage', index, round: 1 + Math.floor(index / 2), role, state: 'done', decode: false, latents: 2, seconds: 0.25,
  ...(messages ? { messages } : {}), ...(text !== undefined ? { text } : {}),
});
/** What the engine reads for a message: its stage's index in every number. */
const reading = (req: LensRequest): LensView => ({
  norms: [req.stage, req.stage + 0.5], top: [[{ token: req.link, prob: 0.5 }], [{ token: 'x', prob: 0.25 }]], vocab: 300,
  seconds: 0.125,
});

describe('AskSession: the lens on request, how a run ends, the adapter', () => {
  it('reads no lens before the answer, then the last message; another when opened, once; a failed read again', async () => {
    const lensCalls: number[] = [];
    let fail = true;
    const { api, session } = setup(async (req, on) => {
      on(stageDone(0, 'expert', [message(0, 'outer_el')]));
      on(stageDone(1, 'learner', [message(1, 'outer_le')]));
      on(stageDone(2, 'expert', [message(2, 'outer_el')]));
      // every stage is done, the answer not in yet: nothing read
      lensCalls.push(api.lens.mock.calls.length);
      return answered(req, '\\boxed{32}');
    }, {
      lens: async (req) => {
        if (req.stage === 1 && fail) {
          fail = false;
          throw Object.assign(new Error('lens: the device was busy'), { name: 'GpuValidationError' });
        }
        return reading(req);
      },
    });
    await session.ask('q', settingsOf());
    expect(lensCalls).toEqual([0]);
    const run = session.runs[0]!;
    // after the answer: the last message only
    expect(api.lens.mock.calls.map(([r]) => r)).toEqual([{ ask: 'call-1#1', stage: 2, link: 'outer_el' }]);
    expect(Object.keys(run.lens)).toEqual(['2|outer_el']);
    expect(run.lens['2|outer_el']).toEqual({ reading: reading({ ask: 'call-1#1', stage: 2, link: 'outer_el' }), error: null });

    // opened: read once, however often it is opened
    await session.readLens(run, message(0, 'outer_el'));
    await session.readLens(run, message(0, 'outer_el'));
    expect(api.lens).toHaveBeenCalledTimes(2);
    expect(run.lens['0|outer_el']!.reading!.norms).toEqual([0, 0.5]);
    // a failed read says why, and is read again when opened again
    await session.readLens(run, message(1, 'outer_le'));
    expect(run.lens['1|outer_le']).toEqual({ reading: null, error: { name: 'GpuValidationError', message: 'lens: the device was busy' } });
    await session.readLens(run, message(1, 'outer_le'));
    expect(api.lens).toHaveBeenCalledTimes(4);
    expect(run.lens['1|outer_le']!.reading!.norms).toEqual([1, 1.5]);
  });

  it('reads the last message after both modes answered, and nothing after a stop or in text mode alone', async () => {
    let order: string[] = [];
    const { api, session } = setup(async (req, on) => {
      order.push(`ask ${req.mode}`);
      if (req.mode === 'latent') on(stageDone(0, 'expert', [message(0, 'outer_el')]));
      else on(stageDone(0, 'expert', undefined, 'the price is 8'));
      return answered(req, '\\boxed{32}');
    }, { lens: async (req) => (order.push('lens'), reading(req)) });
    await session.ask('q', settingsOf({ mode: 'both' }));
    expect(order).toEqual(['ask latent', 'ask text', 'lens']);
    expect(session.runs[1]!.stages[0]!.text).toBe('the price is 8');
    order = [];
    await session.ask('q', settingsOf({ mode: 'text' }));
    expect(order).toEqual(['ask text']);
    expect(api.lens).toHaveBeenCalledTimes(1);
  });

  it("marks a stopped run cancelled, not an error, and a failed one failed with its error", async () => {
    let release!: () => void;
    const { api, session } = setup((req, on) => new Promise((_, reject) => {
      on(stageDone(0, 'expert', [message(0, 'outer_el')]));
      on({ type: 'stage', index: 1, round: 1, role: 'learner', state: 'running', decode: true });
      if (req.question === 'fails') {
        on({ type: 'error', name: 'GpuOutOfMemory', message: 'out of memory' });
        reject(Object.assign(new Error('out of memory'), { name: 'GpuOutOfMemory' }));
        return;
      }
      release = () => {
        // the worker reports its cancel as an event before the call rejects
        on({ type: 'error', name: 'Cancelled', message: 'the call was cancelled' });
        reject(Object.assign(new Error('the call was cancelled'), { name: 'Cancelled' }));
      };
    }), { lens: async (req) => reading(req) });
    const asking = session.ask('q', settingsOf());
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(1));
    expect(session.runs[0]!.ended).toBeNull();
    await session.stop();
    release();
    await asking;
    expect([session.runs[0]!.ended, session.runs[0]!.error, session.error, session.stopped]).toEqual(['cancelled', null, null, true]);
    expect(api.lens).not.toHaveBeenCalled(); // no answer: nothing read unasked

    await session.ask('fails', settingsOf());
    expect([session.runs[0]!.ended, session.runs[0]!.error, session.stopped])
      .toEqual(['failed', { name: 'GpuOutOfMemory', message: 'out of memory' }, false]);
  });

  it('says when WebGPU is a fallback adapter for the offline system, and offers the CPU device', async () => {
    const fallback = { isFallback: true, description: 'SwiftShader Device (Subzero)', vendor: 'google' };
    const { page, session } = setup(async (req) => answered(req, ''), { adapter: fallback });
    expect(session.fallbackNote(TINY)).toBeNull(); // not read yet
    await session.readAdapter();
    expect(session.fallbackNote(TINY)).toBe(
      'WebGPU here is a fallback adapter (SwiftShader Device (Subzero)): a software implementation that runs the GPU\'s work on ' +
        'the CPU. The offline tiny system answers faster on the CPU device.',
    );
    expect(session.fallbackNote('sequential_light')).toBeNull(); // a released style needs the GPU's memory
    page.prefs.backend = 'cpu';
    expect(session.fallbackNote(TINY)).toBeNull();

    const gpu = setup(async (req) => answered(req, ''), { adapter: { isFallback: false, description: 'NVIDIA' } }).session;
    await gpu.readAdapter();
    expect(gpu.fallbackNote(TINY)).toBeNull();
    const none = setup(async (req) => answered(req, '')).session; // no WebGPU: the load says so itself
    await none.readAdapter();
    expect([none.adapter, none.fallbackNote(TINY)]).toEqual([null, null]);
  });
});

describe("AskSession.compare (the Evaluate panel's comparison)", () => {
  const record = (index: number, correct: boolean, tokens: number) =>
    ({ index, question: `q${index}`, gold: '1', pred: correct ? '1' : '2', correct, text: '', tokens, seconds: 9 });
  const job = { source: { rows: [{ question: 'q0', answer: '1' }], dataset: null }, limit: 2, batchSize: 1 };
  const CONFIGS = [{ kind: 'alone', rounds: 1 }, { kind: 'latent', rounds: 2 }, { kind: 'shuffled', rounds: 1 }] as const;

  it('asks each configuration in turn and grows its row question by question, in wall seconds from its first question', async () => {
    const seen: unknown[][] = [];
    const { api, session } = setup(async () => { throw new Error('unused'); }, {
      evaluate: async (req, on) => {
        const row = session.comparison.find((r) => r.state !== 'done')!;
        seen.push([row.key, row.state, session.busy]);
        on({ type: 'ready', backend: 'cpu', seconds: 0 });
        seen.push([row.key, row.state]);
        on({ type: 'sample', index: 0, total: 2, record: record(0, req.mode === 'latent' && !req.messages, 5) });
        seen.push([row.key, row.done, row.right, row.wallSeconds]);
        on({ type: 'sample', index: 1, total: 2, record: record(1, !req.alone, 11) });
        return SUMMARY;
      },
    });
    await session.compare(settingsOf({ greedy: true, rounds: 3 }), job, CONFIGS);
    const reqs = api.evaluate.mock.calls.map(([r]) => r);
    expect(reqs.map((r) => [r.mode, r.rounds, r.alone, r.messages, r.limit, r.batchSize, r.latentSteps, r.sampling])).toEqual([
      ['text', 1, true, undefined, 2, 1, 4, { greedy: true }],
      ['latent', 2, undefined, undefined, 2, 1, 4, { greedy: true }],
      ['latent', 1, undefined, 'shuffled', 2, 1, 4, { greedy: true }],
    ]);
    expect(api.planSystem).toHaveBeenCalledTimes(1); // one system, planned once
    // before its first answer a row says it is loading, then asking; the clock reads 250 ms later each time
    expect(seen).toEqual([
      ['alone', 'loading', true], ['alone', 'asking'], ['alone', 1, 0, 0.25],
      ['latent2', 'loading', true], ['latent2', 'asking'], ['latent2', 1, 1, 0.25],
      ['shuffled1', 'loading', true], ['shuffled1', 'asking'], ['shuffled1', 1, 0, 0.25],
    ]);
    expect(session.comparison.map((r) => [r.label, r.state, r.done, r.total, r.right, r.tokens, r.wallSeconds])).toEqual([
      ['learner alone', 'done', 2, 2, 0, 16, 0.5],
      ['RecursiveMAS, 2 rounds', 'done', 2, 2, 2, 16, 0.5],
      ['RecursiveMAS, 1 round, messages shuffled', 'done', 2, 2, 1, 16, 0.5],
    ]);
    // per question: the records' own seconds (9, the batch's ask) are not the wall time
    expect(session.comparison.map(rowFigures)).toEqual([
      { accuracy: 0, tokens: 8, seconds: 0.25 },
      { accuracy: 1, tokens: 8, seconds: 0.25 },
      { accuracy: 0.5, tokens: 8, seconds: 0.25 },
    ]);
    expect([session.comparing, session.busy]).toEqual([false, false]);
  });

  it("a row's seconds per question are its questions' median: the first question's kernel compilation is not spread over it", () => {
    const row = newRow({ kind: 'latent', rounds: 1 }, 'learner');
    // wall seconds at each answer: the first question 1.2 s (compiling), then 0.1, 0.3, 0.2
    for (const [i, at] of [1.2, 1.3, 1.6, 1.8].entries()) addRecord(row, record(i, i > 0, 4), 4, at);
    expect(row.questionSeconds.map((x) => Number(x.toFixed(6)))).toEqual([1.2, 0.1, 0.3, 0.2]);
    const f = rowFigures(row)!;
    expect([f.accuracy, f.tokens]).toEqual([0.75, 4]);
    expect(f.seconds).toBeCloseTo(0.25, 9); // the mean would be 0.45
  });

  it('marks a failed configuration and goes on; Stop ends the comparison', async () => {
    let n = 0;
    const { api, session } = setup(async () => { throw new Error('unused'); }, {
      evaluate: async (_req, on) => {
        n++;
        if (n === 1) throw Object.assign(new Error('the dataset has no questions'), { name: 'InvalidArgument' });
        on({ type: 'ready', backend: 'cpu', seconds: 0 });
        on({ type: 'sample', index: 0, total: 2, record: record(0, true, 5) });
        await session.stopEvaluation();
        throw Object.assign(new Error('the call was cancelled'), { name: 'Cancelled' });
      },
    });
    await session.compare(settingsOf(), job, CONFIGS);
    expect(api.evaluate).toHaveBeenCalledTimes(2);
    expect(api.cancel).toHaveBeenCalledWith('call-2');
    expect(session.comparison.map((r) => [r.key, r.state, r.done, r.error])).toEqual([
      ['alone', 'failed', 0, 'InvalidArgument: the dataset has no questions'],
      ['latent2', 'stopped', 1, null],
      ['shuffled1', 'stopped', 0, null],
    ]);
    expect([session.comparing, session.busy]).toEqual([false, false]);
  });
});
