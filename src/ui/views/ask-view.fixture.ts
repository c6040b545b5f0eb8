/**
 * The Ask view's browser tests' mount and cleanup (AskView.browser.test.ts, AskView.tools.browser.test.ts): one view
 * on the page at a time, and afterwards the page state it writes (history, device choice) back to a fresh page's.
 */
import { mount, unmount } from 'svelte';
import type { Services } from '../services';
import { askHistory, prefs } from '../state.svelte';
import type { Settings } from '../url';
import AskView from './AskView.svelte';

let app: ReturnType<typeof mount> | null = null;

/** Mounts the Ask view into `target` (a new element on the page by default), in place of the one mounted before. */
export function mountAskView(
  props: { services: Services; settings: Settings },
  target: HTMLElement = document.body.appendChild(document.createElement('div')),
): HTMLElement {
  if (app) unmount(app);
  app = mount(AskView, { target, props });
  return target;
}

/** For afterEach: the view unmounted, the page emptied, the history and the device choice (and its storage) reset. */
export function cleanUpAskView(): void {
  if (app) unmount(app);
  app = null;
  document.body.replaceChildren();
  askHistory.entries = [];
  prefs.backend = 'auto';
  localStorage.removeItem('rmas.prefs');
}
