// Evaluate panel over a fake engine: the offline system's test split goes to the worker with the chosen settings, on the
// system Ask's session loads (ask-session.svelte.ts), sample events fill the table and the running accuracy, Stop
// cancels the call, a file's rows go as the chosen benchmark, and the engine's refusal is shown.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import type { EngineEvent, EvalRequest } from '../../../workers/protocol';
import { FAKE_OFFLINE, fakeAskEngine } from '../../../test/util/fake-ask-engine';
import { prefs } from '../state.svelte';
import { TINY, TINY_RECURSION } from '../system';
import { DEFAULTS } from '../url';
import EvalPanel from './EvalPanel.svelte';
import { reactiveProps } from './props.svelte';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
  prefs.backend = 'auto';
});

function setup(
  evaluate: (req: EvalRequest, on: (e: EngineEvent) => void, opts?: { callId?: string }) => Promise<unknown>, style: string = TINY,
) {
  const { api: askApi, services } = fakeAskEngine(async () => { throw new Error('unused'); });
  const api = Object.assign(askApi, { evaluate: vi.fn(evaluate) });
  prefs.backend = 'cpu'; // the device chosen in Ask (or Environment)
  const target = document.body.appendChild(document.createElement('div'));
  const props = reactiveProps({
    services,
    settings: { ...DEFAULTS, style, rounds: 2, latentSteps: 8, greedy: true },
  });
  app = mount(EvalPanel, { target, props });
  (target.querySelector('details') as HTMLDetailsElement).open = true;
  flushSync();
  return { api, target, props };
}

const sample = (index: number, correct: boolean, total = 3): EngineEvent => ({
  type: 'sample',
  index,
  total,
  record: {
    index,
    question: `q${index}`,
    gold: String(index),
    pred: correct ? String(index) : 'x',
    correct,
    text: `t${index}`,
    tokens: 10 + index,
    seconds: 0.5,
  },
});

describe('EvalPanel', () => {
  it("sends the offline system's test split with the settings, and shows each scored question and the accuracy", async () => {
    const { api, target } = setup(async (_req, on) => {
      on(sample(0, true));
      on(sample(1, false));
      on(sample(2, true));
      return {
        type: 'summary',
        samples: 3,
        accuracy: 2 / 3,
        pass_at_k: 2 / 3,
        k: 1,
        per_rollout_accuracy: [2 / 3],
        tokens_mean: 11,
        seconds_mean: 0.5,
      };
    });
    const limit = target.querySelector('[data-testid="eval-limit"]') as HTMLInputElement;
    limit.value = '3';
    limit.dispatchEvent(new Event('input', { bubbles: true }));
    (target.querySelector('[data-testid="eval-button"]') as HTMLButtonElement).click();
    await vi.waitFor(() => expect(target.querySelector('[data-testid="eval-score"]')?.textContent).toContain('11.0 tokens'));
    // the offline system, planned and loaded on the device chosen under the evaluate call's id
    expect(api.planSystem).toHaveBeenCalledTimes(1);
    expect(api.loadSystem).toHaveBeenCalledTimes(1);
    const [spec, , loadOpts] = api.loadSystem.mock.calls[0]! as unknown as [unknown, unknown, { backend?: string; callId?: string }];
    expect(spec).toEqual({ ...FAKE_OFFLINE, label: 'offline tiny' });
    expect(loadOpts).toEqual({ backend: 'cpu', callId: api.evaluate.mock.calls[0]![2]!.callId });
    const req = api.evaluate.mock.calls[0]![0];
    expect(req).toMatchObject({
      system: spec,
      limit: 3,
      mode: 'latent',
      rounds: 2,
      latentSteps: 8,
      sampling: { greedy: true },
      backend: 'cpu',
    });
    const src = req.source as { rows: { question: string; answer: string }[]; dataset: null };
    expect(src.dataset).toBeNull();
    expect(src.rows).toHaveLength(200);
    // the offline system's task (tiny_distillation's price list, src/eval/tiny-prices.ts), gold as plain numbers
    expect(src.rows[1]).toEqual({ question: 'Ben orders 4 quons. What does he pay in coins?', answer: '24' });
    expect(target.querySelector<HTMLSelectElement>('[data-testid="eval-source"]')!.selectedOptions[0]!.textContent).toBe(
      "tiny distillation (offline): its task's test split",
    );
    expect(target.querySelector('[data-testid="eval-score"]')!.textContent).toMatch(/accuracy 66\.7% \(2\/3\)/);
    // seconds a question are wall time, from the system being ready to the last answer, over the questions
    expect(target.querySelector('[data-testid="eval-score"]')!.textContent).toMatch(
      /11\.0 tokens and \d+\.\d\d s a question \(wall time: \d+\.\d s for 3\)/,
    );
    const rows = [...target.querySelectorAll('[data-testid="eval-table"] tbody tr')].map((tr) =>
      [...tr.querySelectorAll('td')].map((td) => td.textContent),
    );
    expect(rows).toEqual([['0', 'q0', '0', '0', '✓'], ['1', 'q1', 'x', '1', '✗'], ['2', 'q2', '2', '2', '✓']]);
  });

  it('Stop cancels the running call; a refusal from the engine is shown', async () => {
    let release!: () => void;
    const { api, target } = setup((_req, on) => new Promise((_, reject) => {
      on(sample(0, true, 20));
      release = () => reject(Object.assign(new Error('the call was cancelled'), { name: 'Cancelled' }));
    }));
    (target.querySelector('[data-testid="eval-button"]') as HTMLButtonElement).click();
    await vi.waitFor(() => expect(target.querySelector('[data-testid="eval-score"]')?.textContent).toMatch(/\(1\/1 of 20\)/));
    const stop = [...target.querySelectorAll('button')].find((b) => b.textContent === 'Stop')!;
    stop.click();
    await vi.waitFor(() => expect(api.cancel).toHaveBeenCalledWith(api.evaluate.mock.calls[0]![2]!.callId));
    release();
    await vi.waitFor(() => expect((target.querySelector('[data-testid="eval-button"]') as HTMLButtonElement).disabled).toBe(false));
    expect(target.textContent).not.toContain('Cancelled');

    api.evaluate.mockImplementationOnce(async () => {
      throw Object.assign(new Error('evaluate: code benchmarks are scored by running the answers in Python'), { name: 'InvalidArgument' });
    });
    (target.querySelector('[data-testid="eval-button"]') as HTMLButtonElement).click();
    await vi.waitFor(() => expect(target.textContent).toContain('code benchmarks are scored by running the answers in Python'));
  });

  it("compares the README's configurations on the same questions, question by question, in one chart", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const { api, target } = setup(async (req, on) => {
      on({ type: 'ready', backend: 'cpu', seconds: 0 });
      if (req.alone) await held; // before the first answer: the panel already says which question it asks
      const right = !req.alone && (req.mode === 'text' || (req.mode === 'latent' && !req.messages));
      const tokens = req.mode === 'text' && !req.alone ? 11 * req.rounds! : 5;
      on({ ...sample(0, right, 2), record: { ...(sample(0, right, 2) as { record: object }).record, tokens } } as EngineEvent);
      on({ ...sample(1, right && req.rounds !== 3, 2), record: { ...(sample(1, false, 2) as { record: object }).record,
        correct: right && req.rounds !== 3, tokens } } as EngineEvent);
      return { type: 'summary', samples: 2, accuracy: 0, pass_at_k: 0, k: 1, per_rollout_accuracy: [0], tokens_mean: 0, seconds_mean: 0 };
    });
    const boxes = [...target.querySelectorAll<HTMLInputElement>('[data-testid="compare-configs"] input')];
    expect(boxes).toHaveLength(13);
    expect(boxes.filter((b) => b.checked).map((b) => b.value)).toEqual(
      ['alone', 'text1', 'text3', 'latent1', 'latent2', 'latent3', 'shuffled1', 'zeroed1'],
    );
    expect(boxes.map((b) => b.parentElement!.textContent!.trim()).slice(0, 2)).toEqual(['learner alone', 'text-MAS, 1 round']);
    const limit = target.querySelector('[data-testid="eval-limit"]') as HTMLInputElement;
    limit.value = '2';
    limit.dispatchEvent(new Event('input', { bubbles: true }));
    (target.querySelector('[data-testid="compare-button"]') as HTMLButtonElement).click();
    await vi.waitFor(() =>
      expect(target.querySelector('[data-testid="compare-status"]')?.textContent).toContain('learner alone: asking question 1…'));
    release();
    await vi.waitFor(() => expect(target.querySelector('[data-testid="compare-status"]')!.textContent).toMatch(/^done/));
    expect(api.evaluate.mock.calls.map(([r]) => [r.mode, r.rounds, r.alone ?? false, r.messages ?? null, r.limit, r.batchSize])).toEqual([
      ['text', 1, true, null, 2, 1], ['text', 1, false, null, 2, 1], ['text', 3, false, null, 2, 1],
      ['latent', 1, false, null, 2, 1], ['latent', 2, false, null, 2, 1], ['latent', 3, false, null, 2, 1],
      ['latent', 1, false, 'shuffled', 2, 1], ['latent', 1, false, 'zeroed', 2, 1],
    ]);
    const table = [...target.querySelectorAll('[data-testid="compare-table"] tbody tr')].map((tr) =>
      [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent).concat(tr.querySelector('.progress')!.textContent!));
    expect(table).toEqual([
      ['learner alone', '0.0% (0/2)', '5.0', '2/2'],
      ['text-MAS, 1 round', '100.0% (2/2)', '11.0', '2/2'],
      ['text-MAS, 3 rounds', '50.0% (1/2)', '33.0', '2/2'],
      ['RecursiveMAS, 1 round', '100.0% (2/2)', '5.0', '2/2'],
      ['RecursiveMAS, 2 rounds', '100.0% (2/2)', '5.0', '2/2'],
      ['RecursiveMAS, 3 rounds', '50.0% (1/2)', '5.0', '2/2'],
      ['RecursiveMAS, 1 round, messages shuffled', '0.0% (0/2)', '5.0', '2/2'],
      ['RecursiveMAS, 1 round, messages zeroed', '0.0% (0/2)', '5.0', '2/2'],
    ]);
    // one chart: per configuration an accuracy, a tokens and a seconds bar, each scaled to its largest
    const chart = target.querySelector('[data-testid="compare-chart"]')!;
    const bars = (metric: string) => [...chart.querySelectorAll(`[data-metric="${metric}"] rect.bar`)] as SVGRectElement[];
    expect(bars('accuracy').map((b) => [b.dataset.key, Number(b.getAttribute('width'))])).toEqual([
      ['alone', 0], ['text1', 200], ['text3', 100], ['latent1', 200], ['latent2', 200], ['latent3', 100], ['shuffled1', 0], ['zeroed1', 0],
    ]);
    expect(bars('tokens').map((b) => Number(b.getAttribute('width')).toFixed(2))).toEqual(
      ['30.30', '66.67', '200.00', '30.30', '30.30', '30.30', '30.30', '30.30'],
    );
    expect(bars('seconds')).toHaveLength(8);
    expect(bars('seconds').every((b) => Number(b.dataset.value) >= 0)).toBe(true);
    expect([...chart.querySelectorAll('figcaption')].map((f) => f.textContent)).toEqual(
      ['accuracy', 'generated tokens / question', 'median s / question (wall)'],
    );
  });

  it("reads a JSONL file's rows and sends them as the chosen benchmark", async () => {
    const { api, target } = setup(async () => ({
      type: 'summary',
      samples: 0,
      accuracy: 0,
      pass_at_k: 0,
      k: 1,
      per_rollout_accuracy: [0],
      tokens_mean: 0,
      seconds_mean: 0,
    }));
    const select = target.querySelector('[data-testid="eval-source"]') as HTMLSelectElement;
    select.value = 'file';
    select.dispatchEvent(new Event('change', { bubbles: true }));
    flushSync();
    const input = target.querySelector('[data-testid="eval-file"]') as HTMLInputElement;
    const dt = new DataTransfer();
    dt.items.add(new File(['{"problem":"1+1?","answer":"2"}\n{"problem":"2+2?","answer":"4"}\n'], 'rows.jsonl'));
    input.files = dt.files;
    input.dispatchEvent(new Event('change', { bubbles: true }));
    await vi.waitFor(() => expect(target.textContent).toContain('rows.jsonl: 2 rows.'));
    const kind = [...target.querySelectorAll('select')].find((s) => [...s.options].some((o) => o.value === 'gpqa'))!;
    kind.value = 'math500';
    kind.dispatchEvent(new Event('change', { bubbles: true }));
    (target.querySelector('[data-testid="eval-button"]') as HTMLButtonElement).click();
    await vi.waitFor(() => expect(api.evaluate).toHaveBeenCalled());
    expect(api.evaluate.mock.calls[0]![0].source).toEqual({
      rows: [
        { problem: '1+1?', answer: '2' },
        { problem: '2+2?', answer: '4' },
      ],
      dataset: 'math500',
    });
  });

  it('plots accuracy by rounds: RecursiveMAS and text-MAS at 1-3 rounds live, the recorded curve, the ceiling, progress', async () => {
    const N = 6;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    // RecursiveMAS right on the first r questions at r rounds, text-MAS on all; text writes 11 tokens a round
    const { api, target } = setup(async (req, on) => {
      on({ type: 'ready', backend: 'cpu', seconds: 0 });
      for (let i = 0; i < N; i++) {
        const right = req.mode === 'text' || i < req.rounds!;
        const tokens = req.mode === 'text' ? 11 * req.rounds! : 4;
        const record = { ...(sample(i, right, N) as { record: object }).record, correct: right, tokens };
        on({ ...sample(i, right, N), record } as EngineEvent);
        if (req.mode === 'latent' && req.rounds === 2 && i === 2) await held; // mid-run: the progress bar
      }
      return { type: 'summary', samples: N, accuracy: 0, pass_at_k: 0, k: 1, per_rollout_accuracy: [0], tokens_mean: 0, seconds_mean: 0 };
    }, TINY_RECURSION);
    expect(target.querySelector<HTMLSelectElement>('[data-testid="eval-source"]')!.selectedOptions[0]!.textContent).toBe(
      "tiny recursion (offline): its task's test split",
    );
    const limit = target.querySelector('[data-testid="eval-limit"]') as HTMLInputElement;
    limit.value = String(N);
    limit.dispatchEvent(new Event('input', { bubbles: true }));
    (target.querySelector('[data-testid="rounds-button"]') as HTMLButtonElement).click();
    const progress = () => target.querySelector<HTMLProgressElement>('[data-testid="rounds-progress"]');
    await vi.waitFor(() => expect(progress()?.value).toBe(N + 3));
    expect(progress()!.max).toBe(6 * N);
    release();
    await vi.waitFor(() => expect(target.querySelector('[data-testid="compare-status"]')!.textContent).toMatch(/^done/));
    expect(api.evaluate.mock.calls.map(([r]) => [r.mode, r.rounds, r.limit])).toEqual([
      ['latent', 1, N], ['latent', 2, N], ['latent', 3, N], ['text', 1, N], ['text', 2, N], ['text', 3, N],
    ]);
    // the multi-hop task's test split, words as gold
    const src = api.evaluate.mock.calls[0]![0].source as { rows: { question: string; answer: string }[] };
    expect(src.rows[5]).toEqual({ question: 'Sam wants the tree of the criv. Which is it?', answer: 'fern' });
    const plot = target.querySelector('[data-testid="rounds-plot"]')!;
    // RecursiveMAS is drawn last (on top of text-MAS); the points by series, then rounds
    const points = ['latent', 'text'].flatMap((kind) => [...plot.querySelectorAll(`circle[data-series="${kind}"]`)].map((c) =>
      [c.getAttribute('data-series'), Number(c.getAttribute('data-rounds')), Number(c.getAttribute('data-accuracy')),
        Number(c.getAttribute('data-tokens'))]));
    const drawn = [...plot.querySelectorAll('circle[data-series="latent"], circle[data-series="text"]')];
    expect(drawn.map((c) => c.getAttribute('data-series'))).toEqual(['text', 'text', 'text', 'latent', 'latent', 'latent']);
    expect(points).toEqual([
      ['latent', 1, 1 / 6, 4], ['latent', 2, 2 / 6, 4], ['latent', 3, 3 / 6, 4], ['text', 1, 1, 11], ['text', 2, 1, 22], ['text', 3, 1, 33],
    ]);
    expect(plot.querySelector('text[data-label="text2"]')!.textContent).toMatch(/^100\.0% · 22\.0 tok · \d+\.\d{3} s$/);
    expect([progress()!.value, progress()!.max]).toEqual([6 * N, 6 * N]);
    // the first 6 test questions: one of 1 hop, four of 3, one of 5
    expect(plot.querySelector('[data-testid="rounds-ceiling"]')!.getAttribute('data-values')).toBe([1 / 6, 5 / 6, 1].join(','));
    // the recorded eval (models/tiny/recursion/eval.json, where it is built) on the same 6 questions
    const res = await fetch('/models/tiny/recursion/eval.json');
    const isJson = res.ok && (res.headers.get('content-type') ?? '').includes('json');
    if (isJson) {
      const recorded = (await res.json()) as { results: { config: string; ok: boolean[] }[] };
      await vi.waitFor(() => expect(plot.querySelectorAll('circle[data-series="latent-recorded"]')).toHaveLength(3));
      for (const kind of ['latent', 'text'])
        for (const r of [1, 2, 3]) {
          const ok = recorded.results.find((x) => x.config === `${kind}${r}`)!.ok.slice(0, N);
          const c = plot.querySelector(`circle[data-series="${kind}-recorded"][data-rounds="${r}"]`)!;
          expect(Number(c.getAttribute('data-accuracy'))).toBe(ok.filter(Boolean).length / N);
        }
    }
  });
});
