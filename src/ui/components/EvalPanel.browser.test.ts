// Evaluate panel over a fake engine: the offline system's test split goes to the worker with the chosen settings, on the
// system Ask's session loads (ask-session.svelte.ts), sample events fill the table and the running accuracy, Stop
// cancels the call, a file's rows go as the chosen benchmark, and the engine's refusal is shown.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import type { EngineEvent, EvalRequest } from '../../../workers/protocol';
import { FAKE_OFFLINE, fakeAskEngine } from '../../../test/util/fake-ask-engine';
import { prefs } from '../state.svelte';
import { TINY } from '../system';
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

function setup(evaluate: (req: EvalRequest, on: (e: EngineEvent) => void, opts?: { callId?: string }) => Promise<unknown>) {
  const { api: askApi, services } = fakeAskEngine(async () => { throw new Error('unused'); });
  const api = Object.assign(askApi, { evaluate: vi.fn(evaluate) });
  prefs.backend = 'cpu'; // the device chosen in Ask (or Environment)
  const target = document.body.appendChild(document.createElement('div'));
  const props = reactiveProps({
    services,
    settings: { ...DEFAULTS, style: TINY, rounds: 2, latentSteps: 8, greedy: true },
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
});
