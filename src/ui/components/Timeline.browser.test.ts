// Timeline: stage events become cells (state, seconds, latent count) in rounds × agents, in stage order; a run that
// ended before its answer leaves no cell running; text mode's agents' texts and tool calls (deliberation) sit under their
// round, as text.
import { afterEach, describe, expect, it } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import { reactiveProps } from './props.svelte';
import Timeline from './Timeline.svelte';
import type { RunEnd, StageEvent } from '../timeline';
import type { ToolCallEvent } from '../../../workers/protocol';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
});

const stage = (round: number, role: string, state: 'running' | 'done', extra: Partial<StageEvent> = {}): StageEvent =>
  ({ type: 'stage', index: 0, round, role, state, decode: false, ...extra });

function setup(events: StageEvent[], tools: ToolCallEvent[] = []) {
  const target = document.body.appendChild(document.createElement('div'));
  const props = reactiveProps({ roles: ['planner', 'critic', 'solver'], rounds: 2, events, tools, ended: null as RunEnd });
  app = mount(Timeline, { target, props });
  const cell = (k: string) => target.querySelector<HTMLElement>(`[data-cell="${k}"]`)!;
  return { target, props, cell };
}

describe('Timeline', () => {
  it('lays out rounds × agents in stage order, all idle before any event', () => {
    const { target, cell } = setup([]);
    expect([...target.querySelectorAll('thead th')].map((t) => t.textContent)).toEqual(['round', 'planner', 'critic', 'solver']);
    expect(target.querySelectorAll('tbody tr').length).toBe(2);
    expect(cell('2:solver').dataset.state).toBe('idle');
    expect(cell('2:solver').textContent).toBe('—');
  });

  it('follows running → done with seconds and latents, and decoding stages', () => {
    const { props, cell } = setup([]);
    props.events = [stage(1, 'planner', 'running')];
    flushSync();
    expect(cell('1:planner').dataset.state).toBe('running');
    expect(cell('1:planner').textContent).toBe('running…');
    props.events = [
      stage(1, 'planner', 'running'),
      stage(1, 'planner', 'done', { seconds: 1.25, latents: 8 }),
      stage(1, 'critic', 'done', { seconds: 0.5, latents: 1 }),
      stage(2, 'solver', 'running', { decode: true }),
    ];
    flushSync();
    expect(cell('1:planner').dataset.state).toBe('done');
    expect(cell('1:planner').textContent).toBe('1.25 s · 8 latents');
    expect(cell('1:critic').textContent).toBe('0.50 s · 1 latent');
    expect(cell('1:solver').textContent).toBe('—');
    expect(cell('2:solver').textContent).toBe('decoding…');
    props.events = [...props.events, stage(2, 'solver', 'done', { decode: true, seconds: 3 })];
    flushSync();
    expect(cell('2:solver').textContent).toBe('3.00 s · text');
  });

  it('adds a column for a role it was not told about and rows for later rounds', () => {
    const { target, cell } = setup([stage(3, 'judge', 'done', { seconds: 0.1, latents: 4 })]);
    expect(target.querySelectorAll('tbody tr').length).toBe(3);
    expect(cell('3:judge').textContent).toBe('0.10 s · 4 latents');
  });

  it('shows each tool call under its round, running then done, its code and result as text', () => {
    const call = { type: 'tool' as const, index: 0, round: 2, role: 'solver', tool: 'python' as const, input: 'print("<b>hi</b>")' };
    const { target, props } = setup([stage(2, 'solver', 'running', { decode: true })], [{ ...call, state: 'running' }]);
    const rows = () => [...target.querySelectorAll('tbody tr')];
    // rows: round 1, round 2, then round 2's tool calls
    expect(rows().map((r) => r.classList.contains('tools'))).toEqual([false, false, true]);
    const li = () => target.querySelector<HTMLElement>('[data-testid="tool-calls"][data-round="2"] li')!;
    expect([li().dataset.tool, li().dataset.state, li().querySelector('.head')!.textContent])
      .toEqual(['python', 'running', 'solver · python · running…']);
    expect(li().querySelector('.input')!.textContent).toBe('print("<b>hi</b>")');
    expect(li().querySelector('.output')).toBeNull();
    props.tools = [
      { ...call, state: 'running' },
      { ...call, state: 'done', output: '<b>hi</b>\n<img src=x onerror=alert(1)>', seconds: 0.125 },
      { ...call, index: 1, tool: 'search', input: 'q', state: 'running' },
    ];
    flushSync();
    const items = [...target.querySelectorAll<HTMLElement>('[data-testid="tool-calls"] li')];
    expect(items.map((i) => i.querySelector('.head')!.textContent))
      .toEqual(['solver · python · 0.13 s', 'solver · search · running…']);
    expect(items[0]!.querySelector('.output')!.textContent).toBe('<b>hi</b>\n<img src=x onerror=alert(1)>');
    expect(target.querySelector('b, img')).toBeNull(); // the model's code and the tool's text are never HTML
  });

  it('marks the stage running when the run was stopped as cancelled, and when it failed as failed; done cells stay', () => {
    const events = [
      stage(1, 'planner', 'running'), stage(1, 'planner', 'done', { seconds: 1, latents: 4 }),
      stage(1, 'critic', 'running'),
    ];
    const { target, props, cell } = setup(events);
    expect(cell('1:critic').textContent).toBe('running…');
    props.ended = 'cancelled';
    flushSync();
    expect([cell('1:critic').dataset.state, cell('1:critic').textContent]).toEqual(['cancelled', 'cancelled']);
    // a cancelled cell looks idle (muted, italic, no outline), a failed one is outlined like the error box
    expect([getComputedStyle(cell('1:critic')).fontStyle, getComputedStyle(cell('1:critic')).borderTopStyle]).toEqual(['italic', 'none']);
    expect(cell('1:planner').textContent).toBe('1.00 s · 4 latents');
    expect(target.querySelectorAll('td.running').length).toBe(0);
    props.events = [...events, stage(1, 'critic', 'done', { seconds: 1, latents: 4 }), stage(1, 'solver', 'running', { decode: true })];
    props.ended = 'failed';
    flushSync();
    expect([cell('1:solver').dataset.state, cell('1:solver').textContent]).toEqual(['failed', 'failed']);
    expect(getComputedStyle(cell('1:solver')).borderTopStyle).toBe('solid');
  });

  it("text mode: what each agent wrote sits under its round, in its agent's column, as text", () => {
    const { target, props } = setup([
      stage(1, 'planner', 'done', { decode: true, seconds: 4.28, text: 'Plan: <b>add</b> 3 and 4' }),
      stage(1, 'critic', 'running', { decode: true }),
    ]);
    const texts = () => [...target.querySelectorAll<HTMLElement>('[data-testid="stage-texts"]')];
    expect(texts().map((r) => r.dataset.round)).toEqual(['1']);
    const cells = () => [...texts()[0]!.querySelectorAll('td')].map((td) => td.querySelector('pre')?.textContent ?? null);
    expect(cells()).toEqual(['Plan: <b>add</b> 3 and 4', null, null]);
    expect(target.querySelector('[data-cell="1:planner"]')!.textContent).toBe('4.28 s · text');
    expect(target.querySelector('b')).toBeNull();
    props.events = [...props.events, stage(1, 'critic', 'done', { decode: true, seconds: 1, text: 'Looks right.' })];
    flushSync();
    expect(cells()).toEqual(['Plan: <b>add</b> 3 and 4', 'Looks right.', null]);
    // rows: round 1, its texts, round 2
    expect([...target.querySelectorAll('tbody tr')].map((r) => r.classList.contains('texts'))).toEqual([false, true, false]);
  });
});
