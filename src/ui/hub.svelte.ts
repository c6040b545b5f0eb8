/**
 * The page's hub settings as page state: read from IndexedDB at start (where the engine worker reads them too), a
 * `?hub=` address in the page's URL stored over them, edited in the Environment view. Released styles resolve their
 * repos at `pageHub.endpoint` (system.ts setHubEndpoint).
 */
import { DEFAULT_PAGE_HUB, hubFromQuery, readPageHub, writePageHub, type PageHubSettings } from '../store/hub-settings';
import { errorParts } from './services';
import { setHubEndpoint } from './system';

export const pageHub = $state({ ...DEFAULT_PAGE_HUB, error: null as { name: string; message: string } | null });

let ready: Promise<void> | null = null;

const apply = (s: PageHubSettings) => {
  Object.assign(pageHub, s, { error: null });
  setHubEndpoint(s.endpoint);
};

/** Loads the stored settings once per page, with `search`'s `?hub=` stored over them; later calls wait for the first. */
export function initPageHub(search: string = globalThis.location?.search ?? ''): Promise<void> {
  ready ??= (async () => {
    try {
      const q = hubFromQuery(search);
      apply(q ? await writePageHub({ endpoint: q }) : await readPageHub());
    } catch (e) {
      pageHub.error = errorParts(e);
    }
  })();
  return ready;
}

/** Stores a change (the address checked first); the error, if any, lands in pageHub.error and the settings stay. */
export async function savePageHub(change: Partial<PageHubSettings>): Promise<boolean> {
  try {
    apply(await writePageHub(change));
    return true;
  } catch (e) {
    pageHub.error = errorParts(e);
    return false;
  }
}
