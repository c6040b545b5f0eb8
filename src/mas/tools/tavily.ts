/**
 * The search tool: Tavily's HTTP API with a key the user types in, or several keys (upstream's
 * --tavily_keys_file) rotated when one is refused. Keys stay in this closure (memory only): nothing here
 * stores, prints or returns them; messages name a key by its position ("key 2 of 3").
 */
import type { ToolRunners } from './loop';

export const TAVILY_URL = 'https://api.tavily.com/search';
const MAX_RESULTS = 4;
const SNIPPET_CHARS = 320;

/**
 * Answers after which a key is not tried again: auth (401, 403), rate and plan limits (429; Tavily's 432
 * "plan limit exceeded" and 433 "pay-as-you-go limit exceeded"). Any other 4xx counts too when its body
 * says so (KEY_ERROR_BODY), as Tavily's client reports usage-limit errors from the body's text.
 */
export const TAVILY_KEY_STATUSES: readonly number[] = [401, 403, 429, 432, 433];
const KEY_ERROR_BODY =
  /usage limit|plan limit|rate limit|quota|exceed|credits|unauthori[sz]ed|invalid api key|api key is (invalid|missing)/i;

interface TavilyHit {
  title?: string;
  url?: string;
  content?: string;
}

/** Upstream's layout: `Query:`, `Results:`, then per hit `[i] title`, `URL: …` and a collapsed snippet. */
export function formatSearchResults(query: string, hits: TavilyHit[]): string {
  if (hits.length === 0) return '[no search results]';
  const blocks = hits.slice(0, MAX_RESULTS).map((h, i) => {
    let snippet = (h.content ?? '').replace(/\s+/g, ' ').trim();
    if (snippet.length > SNIPPET_CHARS) snippet = `${snippet.slice(0, SNIPPET_CHARS)} ...`;
    return `[${i + 1}] ${h.title ?? ''}\nURL: ${h.url ?? ''}\n${snippet}`;
  });
  return `Query: ${query}\nResults:\n${blocks.join('\n\n')}`;
}

export interface TavilyOptions {
  /** One key (the playground's, or TAVILY_API_KEY): an error answer is reported and the key kept. */
  apiKey?: string;
  /**
   * Several keys (a keys file), tried in order: a key refused with a key error (TAVILY_KEY_STATUSES or such a
   * body) is skipped for the rest of this runner's life and the same query goes to the next key.
   */
  keys?: readonly string[];
  /** Default TAVILY_URL. */
  url?: string;
  fetch?: typeof fetch;
  /** Each key skipped, named by its position only. */
  onKeyEvent?: (message: string) => void;
  /** Once, when the last usable key has been refused. */
  onExhausted?: (message: string) => void;
}

const hintOf = (status: number) => (status === 401 || status === 403 ? ': check the API key'
  : status === 429 || status === 432 || status === 433 ? ': the key is over its rate or plan limit' : '');

/** Web search through the Tavily HTTP API (advanced depth, 4 results); never throws, failures become result text. */
export function tavilySearchRunner(opts: TavilyOptions): ToolRunners['search'] {
  const rotating = opts.keys !== undefined;
  const keys = (opts.keys ?? [opts.apiKey ?? '']).map((k) => k.trim()).filter((k) => k !== '');
  const url = opts.url ?? TAVILY_URL;
  const doFetch: typeof fetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const skipped = new Set<number>();
  let current = 0;
  const n = keys.length;
  const name = (i: number) => `key ${i + 1} of ${n}`;
  /** A message with any key in it replaced by its position (a server or network error could echo one). */
  const redact = (s: string) => keys.reduce((t, k, i) => t.split(k).join(`<${name(i)}>`), s);
  const allSkipped = () =>
    `[search error] every Tavily key (${n}) was refused or is over its limit; web search is off for the rest of the run.`;

  return async (query, { signal } = {}) => {
    if (!n) {
      return `[search disabled] Web search is disabled because no API key was given (query: ${query}). ` +
        'Enter a Tavily API key to enable the search tool.';
    }
    while (skipped.size < n) {
      while (skipped.has(current)) current = (current + 1) % n;
      const i = current;
      let res: Response;
      try {
        res = await doFetch(url, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${keys[i]}` },
          body: JSON.stringify({ query, search_depth: 'advanced', max_results: MAX_RESULTS }),
          signal,
        });
      } catch (e) {
        if (signal?.aborted) return '[aborted] The search was cancelled.';
        return redact(`[search error] Could not reach Tavily: ${e instanceof Error ? e.message : String(e)}`);
      }
      if (!res.ok) {
        const status = `HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}`;
        const body = rotating ? await res.text().catch(() => '') : '';
        const keyError = TAVILY_KEY_STATUSES.includes(res.status) || (res.status >= 400 && res.status < 500 && KEY_ERROR_BODY.test(body));
        if (!rotating || !keyError) return `[search error] Tavily answered ${status}${hintOf(res.status)}.`;
        skipped.add(i);
        opts.onKeyEvent?.(`Tavily ${name(i)} was refused (${status}${hintOf(res.status)}); it is skipped for the rest of the run` +
          `${skipped.size < n ? '' : '; no key is left'}`);
        if (skipped.size === n) opts.onExhausted?.(`all ${n} Tavily keys were refused or are over their limits (the last: ${status})`);
        continue;
      }
      try {
        const data = (await res.json()) as { results?: TavilyHit[] };
        return formatSearchResults(query, Array.isArray(data.results) ? data.results : []);
      } catch (e) {
        if (signal?.aborted) return '[aborted] The search was cancelled.';
        return redact(`[search error] Tavily sent a reply that is not JSON: ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    return allSkipped();
  };
}

/**
 * The keys of a keys file's text (upstream's --tavily_keys_file): one per line, surrounding blanks trimmed,
 * blank lines and lines starting with `#` ignored.
 */
export function parseTavilyKeys(text: string): string[] {
  return text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
}
