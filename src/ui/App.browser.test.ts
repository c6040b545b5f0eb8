// The shell: tabs are buttons that change the URL, back/forward restores the tab, a lost or restarted engine shows a banner.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { flushSync, mount, unmount } from 'svelte';
import App from './App.svelte';
import ErrorBox from './components/ErrorBox.svelte';
import type { EngineRemote, Services } from './services';
import { FAULTS } from './engine';
import { engineHealth, noteRestart } from './state.svelte';

let app: ReturnType<typeof mount> | null = null;
const start = location.href;
afterEach(() => {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
  history.replaceState(null, '', start);
  engineHealth.lost = null;
  engineHealth.restarts = 0;
});

function fake() {
  const api = { offlineSystem: vi.fn(async () => null) };
  const restart = vi.fn();
  const services: Services = {
    engine: { api: () => api as unknown as EngineRemote, restart, stop: () => {} },
    checkpoints: async () => ({ listCheckpoints: async () => [] }) as never,
    models: async () => { throw new Error('unused'); },
  };
  return { services, restart };
}

describe('App shell', () => {
  it('keeps the tab and settings in the URL, and back returns to the previous tab', async () => {
    history.replaceState(null, '', `${location.pathname}?style=mixture&rounds=2`);
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(App, { target, props: { services: fake().services } });
    flushSync();
    const selected = () => target.querySelector('[role="tab"][aria-selected="true"]')!.textContent;
    expect(selected()).toBe('Ask');
    expect(target.querySelector<HTMLSelectElement>('#panel-ask select')!.value).toBe('mixture');
    target.querySelector<HTMLButtonElement>('#tab-train')!.click();
    flushSync();
    expect(selected()).toBe('Train');
    expect(new URLSearchParams(location.search).get('tab')).toBe('train');
    expect(new URLSearchParams(location.search).get('style')).toBe('mixture');
    expect(target.querySelector<HTMLElement>('#panel-ask')!.hidden).toBe(true);
    history.back();
    await vi.waitFor(() => expect(selected()).toBe('Ask'));
    expect(location.search).toBe('?style=mixture&rounds=2');
  });

  it('moves between tabs with the arrow keys', () => {
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(App, { target, props: { services: fake().services } });
    flushSync();
    target.querySelector('[role="tablist"]')!.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowLeft', bubbles: true }));
    flushSync();
    expect(document.activeElement?.id).toBe('tab-env');
    expect(target.querySelector('#tab-env')!.getAttribute('aria-selected')).toBe('true');
  });

  it('shows a lost engine where the user is, and reloads it on request', () => {
    const { services, restart } = fake();
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(App, { target, props: { services } });
    engineHealth.lost = { name: 'DeviceLost', message: 'the GPU device was lost' };
    flushSync();
    const banner = target.querySelector('[data-testid="engine-banner"]')!;
    expect(banner.textContent).toContain('DeviceLost the GPU device was lost');
    banner.querySelector('button')!.click();
    flushSync();
    expect(restart).toHaveBeenCalledOnce();
    expect(target.querySelector('[data-testid="engine-banner"]')).toBeNull();
  });

  it('an engine restarted on its own: the banner says what happened and what survived, and is dismissed', () => {
    const { services, restart } = fake();
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(App, { target, props: { services } });
    noteRestart('the engine worker crashed (Uncaught Error: x); a new one was started', FAULTS.crashed);
    noteRestart('the engine was reloaded on request', FAULTS.requested); // not news: the user asked for it
    flushSync();
    const banner = target.querySelector('[data-testid="engine-banner"]')!;
    expect(banner.textContent!.replace(/\s+/g, ' ').trim()).toBe(
      'EngineRestarted the engine worker crashed (Uncaught Error: x); a new one was started ' +
        'Models and checkpoints stored in this browser are intact. dismiss',
    );
    expect(engineHealth.restarts).toBe(1);
    banner.querySelector('button')!.click();
    flushSync();
    expect(restart).not.toHaveBeenCalled(); // the engine is new already
    expect(target.querySelector('[data-testid="engine-banner"]')).toBeNull();
  });

  it('a quota error says what to delete and its link opens Environment in place', () => {
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(App, { target, props: { services: fake().services } });
    const boxTarget = document.body.appendChild(document.createElement('div'));
    const box = mount(ErrorBox, { target: boxTarget, props: { error: { name: 'QuotaExceeded', message: 'needs 40 MiB more' } } });
    flushSync();
    expect(boxTarget.textContent).toContain('QuotaExceeded');
    expect(boxTarget.textContent).toContain('delete cached models in Environment or old checkpoints in Checkpoints');
    const before = history.length;
    boxTarget.querySelector<HTMLAnchorElement>('a')!.click();
    flushSync();
    expect(target.querySelector('#tab-env')!.getAttribute('aria-selected')).toBe('true');
    expect(history.length).toBe(before + 1);
    unmount(box);
  });
});
