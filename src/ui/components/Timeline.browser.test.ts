// Timeline: stage events become cells (state, seconds, latent count) in rounds × agents, in stage order; tool calls
// (deliberation) sit under their round, their input and output as text.
import { afterEach, describe, expect, it } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import { reactiveProps } from './props.svelte';
import Timeline from './Timeline.svelte';
import type { StageEvent } from '../timeline';
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
  const props = reactiveProps({ roles: ['planner', 'critic', 'solver'], rounds: 2, events, tools });
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
});
