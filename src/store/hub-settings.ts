/**
 * The page's hub settings (the hub's address, an access token, cache-only mode), kept in IndexedDB so that the page and
 * its engine worker read the same values and a reload keeps them. The token stays in this database: it is sent only to
 * the hub's own origin (hubFetch) and never written to a log, an event or the URL.
 */
import { DEFAULT_ENDPOINT, type HubSettings, normalizeEndpoint } from './hub';
import { idbKv, type Kv } from './kv';

/** The query parameter that points the page at another hub (as transformers.js's env.remoteHost): `?hub=http://…`. */
export const HUB_PARAM = 'hub';
const KEY = 'hub';

export interface PageHubSettings {
  endpoint: string;
  /** '' when none is set. */
  token: string;
  /** Cache-only: nothing is requested from the hub; a file not in the cache is HubOffline. */
  cacheOnly: boolean;
}

export const DEFAULT_PAGE_HUB: Readonly<PageHubSettings> = { endpoint: DEFAULT_ENDPOINT, token: '', cacheOnly: false };

/** The settings database ('rmas-settings'), shared by the page and the worker. */
export const settingsKv = (): Kv => idbKv('rmas-settings', 'settings');

/** The stored settings, with defaults for what is unset; a stored value that no longer parses is dropped, not trusted. */
export async function readPageHub(kv: Kv = settingsKv()): Promise<PageHubSettings> {
  const v = (await kv.get(KEY)) as Partial<PageHubSettings> | undefined;
  let endpoint = DEFAULT_ENDPOINT;
  try {
    if (typeof v?.endpoint === 'string') endpoint = normalizeEndpoint(v.endpoint);
  } catch {
    /* a stored address that is no longer valid: the default */
  }
  return { endpoint, token: typeof v?.token === 'string' ? v.token.trim() : '', cacheOnly: v?.cacheOnly === true };
}

/** Stores `change` over the current settings (the address checked first: InvalidArgument says what is wrong). */
export async function writePageHub(change: Partial<PageHubSettings>, kv: Kv = settingsKv()): Promise<PageHubSettings> {
  const next = { ...(await readPageHub(kv)), ...change };
  next.endpoint = normalizeEndpoint(next.endpoint, 'the hub address');
  next.token = next.token.trim();
  await kv.setMany([[KEY, next]]);
  return next;
}

/** The `?hub=` address of a page URL's query, checked (InvalidArgument for a bad one), or null when absent. */
export function hubFromQuery(search: string): string | null {
  const v = new URLSearchParams(search).get(HUB_PARAM);
  return v === null || v.trim() === '' ? null : normalizeEndpoint(v, `?${HUB_PARAM}=`);
}

/** What the hub client takes. */
export const hubSettingsOf = (p: PageHubSettings): HubSettings => ({
  endpoint: p.endpoint,
  ...(p.token ? { token: p.token } : {}),
  ...(p.cacheOnly ? { offline: true } : {}),
});
