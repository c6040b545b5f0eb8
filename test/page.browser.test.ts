// The start page mounted in headless Chromium: adapter report and the self-test of one group.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mount, unmount } from 'svelte';
import App from '../src/ui/App.svelte';

let app: ReturnType<typeof mount> | null = null;
afterEach(async () => {
  if (app) await unmount(app);
  app = null;
});

describe('start page', () => {
  it('reports the adapter and passes the elementwise self-test', async () => {
    const target = document.body.appendChild(document.createElement('div'));
    app = mount(App, { target, props: { groups: ['elementwise'] } });
    const summary = () => target.querySelector('[data-testid="selftest-summary"]')!;
    await vi.waitFor(() => expect(summary().getAttribute('data-state')).toBe('done'), { timeout: 90_000, interval: 100 });
    expect(summary().getAttribute('data-failed')).toBe('0');
    expect(Number(summary().getAttribute('data-passed'))).toBeGreaterThan(0);
    expect(target.textContent).toMatch(/passed, 0 failed/);
    expect(target.querySelectorAll('tbody tr').length).toBe(Number(summary().getAttribute('data-passed')));
    // the adapter section shows the device (SwiftShader in headless Chromium)
    expect(target.querySelector('dl')?.textContent).toMatch(/architecture/);
  });
});
