// Curves: each appended training step adds one point to each chart's path; NaN breaks the line, never the chart.
import { afterEach, describe, expect, it } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import { reactiveProps } from './props.svelte';
import Curves from './Curves.svelte';
import { linePath, type TrainPoint } from '../curves';
import type { HeldOutPoint } from '../train-session';

let app: ReturnType<typeof mount> | null = null;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
});

const pt = (step: number, loss = 2 / step): TrainPoint => ({ step, loss, lr: 5e-4 * step / 10, gradNorm: 1 + step });
const moves = (d: string) => (d.match(/[ML]/g) ?? []).length;

function setup() {
  const target = document.body.appendChild(document.createElement('div'));
  const props = reactiveProps({ points: [] as TrainPoint[] });
  app = mount(Curves, { target, props });
  const path = (key: string) => target.querySelector(`[data-series="${key}"] path`)!.getAttribute('d') ?? '';
  const fig = (key: string) => target.querySelector<HTMLElement>(`[data-series="${key}"]`)!;
  return { props, path, fig };
}

describe('Curves', () => {
  it('draws N points after N steps in every chart', () => {
    const { props, path, fig } = setup();
    expect(path('loss')).toBe('');
    for (let s = 1; s <= 7; s++) props.points.push(pt(s));
    flushSync();
    for (const key of ['loss', 'lr', 'gradNorm']) {
      expect(moves(path(key))).toBe(7);
      expect(fig(key).dataset.points).toBe('7');
    }
    // loss 2/step falls: first point at the top-left corner, last at the bottom-right
    expect(path('loss').startsWith('M0.0 0.0')).toBe(true);
    expect(path('loss').endsWith('L300.0 110.0')).toBe(true);
    expect(fig('loss').querySelector('.last')!.textContent).toBe('0.286');
  });

  it('skips NaN and Infinity without crashing, splitting the line', () => {
    const { props, path, fig } = setup();
    props.points = [pt(1), pt(2, NaN), pt(3), pt(4, Infinity), pt(5)];
    flushSync();
    expect(fig('loss').dataset.points).toBe('3');
    expect((path('loss').match(/M/g) ?? []).length).toBe(3);
    expect(moves(path('lr'))).toBe(5);
    props.points = [pt(1, NaN)];
    flushSync();
    expect(path('loss')).toBe('');
    expect(fig('loss').querySelector('.last')!.textContent).toBe('—');
  });

  it('keeps long runs to about maxPoints with min/max buckets', () => {
    const xs = Array.from({ length: 10_000 }, (_, i) => i);
    const ys = xs.map((i) => (i === 5_003 ? 100 : Math.sin(i)));
    const p = linePath(xs, ys, 300, 100, { maxPoints: 1000 });
    expect(p.points).toBeLessThanOrEqual(1000);
    expect(p.points).toBeGreaterThan(500);
    expect(p.max).toBe(100); // the spike survives decimation
  });

  it('draws the held-out accuracy beside the loss when the run scores questions, with the score before and the best', () => {
    const target = document.body.appendChild(document.createElement('div'));
    const props = reactiveProps({ points: [pt(1)], heldOut: [] as HeldOutPoint[], best: null as HeldOutPoint | null });
    app = mount(Curves, { target, props });
    expect(target.querySelector('[data-testid="held-out-curve"]')).toBeNull(); // no scores, no chart
    const at = (step: number, correct: number) => ({ step, correct, total: 200 });
    props.heldOut.push(at(0, 191), at(20, 190), at(40, 195));
    props.best = { step: 40, correct: 195, total: 200 };
    flushSync();
    const fig = target.querySelector<HTMLElement>('[data-testid="held-out-curve"]')!;
    expect(fig.dataset.points).toBe('3');
    // 95.5%, 95.0%, 97.5%: the middle point lowest, the last highest
    expect(fig.querySelector('path')!.getAttribute('d')).toBe(linePath([0, 20, 40], [95.5, 95, 97.5], 300, 110).d);
    expect(target.querySelector('[data-testid="held-out-last"]')!.textContent).toBe('195/200');
    expect(target.querySelector('[data-testid="held-out-summary"]')!.textContent!.trim())
      .toBe('before 191/200 · best 195/200 (97.5%) at step 40');
  });
});
