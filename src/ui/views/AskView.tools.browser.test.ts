// Ask view with deliberation (its tool-caller calls Python and search) over a fake engine: the Tavily key field shows for
// a style with tools only, its key goes with the ask request and nowhere else (settings, history, storage, the page's
// text), and the tool events appear in the timeline under the final agent's round, as text.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync } from 'svelte';
import type { AskRequest, AskResultView, ToolCallEvent } from '../../../workers/protocol';
import { reactiveProps } from '../components/props.svelte';
import { askHistory } from '../state.svelte';
import { DEFAULTS, type Settings } from '../url';
import { cleanUpAskView, mountAskView } from './ask-view.fixture';
import { fakeAskEngine } from '../../../test/util/fake-ask-engine';

afterEach(cleanUpAskView);

const KEY = 'tvly-dev-0123456789';
const call = { type: 'tool' as const, index: 0, round: 1, role: 'toolcaller', tool: 'python' as const, input: 'print(6 * 7)' };

const fakeServices = (ask: Parameters<typeof fakeAskEngine>[0]) => fakeAskEngine(ask, { refusal: null });

const answered = (req: AskRequest, text: string): AskResultView => ({
  answer: '42', text, tokens: 3, latentSteps: 0, seconds: 0.5, rounds: req.rounds ?? 1, mode: req.mode, prefillTokensPerSec: 100,
  decodeTokensPerSec: 10, backend: 'cpu', kvDtype: 'f32', stageSeconds: 0.25, lensSeconds: 0, retrySeconds: 0, pipelinesCompiled: 0,
});

describe('AskView with deliberation\'s tools', () => {
  it('sends the search key with the ask only, and shows each tool call under the final round', async () => {
    const { api, services } = fakeServices(async (req, on) => {
      on({ type: 'stage', index: 0, round: 1, role: 'reflector', state: 'done', decode: false, latents: 2, seconds: 0.1 });
      on({ type: 'stage', index: 1, round: 1, role: 'toolcaller', state: 'running', decode: true });
      const events: ToolCallEvent[] = [
        { ...call, state: 'running' },
        { ...call, state: 'done', output: '42', seconds: 1.5 },
        { ...call, index: 1, tool: 'search', input: '<i>answer</i>', state: 'running' },
        { ...call, index: 1, tool: 'search', input: '<i>answer</i>', state: 'done', output: '[search error] <b>nope</b>', seconds: 0.25 },
      ];
      for (const e of events) on(e);
      const text = '<python>print(6 * 7)</python> <result> 42 </result> \\boxed{42}';
      on({ type: 'stage', index: 1, round: 1, role: 'toolcaller', state: 'done', decode: true, seconds: 2 });
      const result = answered(req, text);
      on({ type: 'done', result });
      return result;
    });
    const settings: Settings = reactiveProps({ ...DEFAULTS, rounds: 1, greedy: true });
    const target = mountAskView({ services, settings });
    await vi.waitFor(() => expect(api.offlineSystem).toHaveBeenCalled());
    const keyField = () => target.querySelector<HTMLInputElement>('[data-testid="ask-search-key"]');
    expect(keyField()).toBeNull(); // the offline style has no tools

    settings.style = 'deliberation';
    flushSync();
    expect(keyField()!.type).toBe('password');
    keyField()!.value = ` ${KEY} `;
    keyField()!.dispatchEvent(new Event('input', { bubbles: true }));
    flushSync();
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(askHistory.entries).toHaveLength(1));
    flushSync();

    const req = api.ask.mock.calls[0]![0];
    expect([req.system.style, req.searchKey]).toEqual(['deliberation', KEY]);
    // the load and plan calls never see it, nor the settings (the URL), the history or storage
    expect(JSON.stringify([api.planSystem.mock.calls, api.loadSystem.mock.calls, settings, askHistory.entries])).not.toContain(KEY);
    expect(JSON.stringify({ ...localStorage })).not.toContain(KEY);

    const calls = [...target.querySelectorAll<HTMLElement>('[data-testid="tool-calls"][data-round="1"] li')];
    expect(calls.map((c) => [c.dataset.tool, c.dataset.state, c.querySelector('.head')!.textContent])).toEqual([
      ['python', 'done', 'toolcaller · python · 1.50 s'],
      ['search', 'done', 'toolcaller · search · 0.25 s'],
    ]);
    expect(calls.map((c) => [c.querySelector('.input')!.textContent, c.querySelector('.output')!.textContent])).toEqual([
      ['print(6 * 7)', '42'],
      ['<i>answer</i>', '[search error] <b>nope</b>'],
    ]);
    expect(target.querySelector('[data-testid="tool-calls"] i, [data-testid="tool-calls"] b')).toBeNull();
    expect(target.textContent).not.toContain(KEY);

    // a style without tools sends no key
    settings.style = 'sequential_light';
    flushSync();
    expect(keyField()).toBeNull();
    target.querySelector<HTMLButtonElement>('button.primary')!.click();
    await vi.waitFor(() => expect(api.ask).toHaveBeenCalledTimes(2));
    expect(api.ask.mock.calls[1]![0].searchKey).toBeUndefined();
  });
});
