// Timeline: stage events become cells (state, seconds, latent count) in rounds × agents, in stage order.
import { afterEach, describe, expect, it } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import { reactiveProps } from './props.svelte';
import Timeline from './Timeline.svelte';
import type { StageEvent } from '../timeline';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
});

const stage = (round: number, role: string, state: 'running' | 'done', extra: Partial<StageEvent> = {}): StageEvent =>
  ({ type: 'stage', index: 0, round, role, state, decode: false, ...extra });

function setup(events: StageEvent[]) {
  const target = document.body.appendChild(document.createElement('div'));
  const props = reactiveProps({ roles: ['planner', 'critic', 'solver'], rounds: 2, events });
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
});
