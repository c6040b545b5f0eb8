/**
 * The search tool: Tavily's HTTP API with a key the user types in. The key stays in this closure
 * (memory only); nothing here stores it.
 */
import type { ToolRunners } from './loop';

export const TAVILY_URL = 'https://api.tavily.com/search';
const MAX_RESULTS = 4;
const SNIPPET_CHARS = 320;

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

/** Web search through the Tavily HTTP API (advanced depth, 4 results); never throws, failures become result text. */
export function tavilySearchRunner(opts: { apiKey?: string; fetch?: typeof fetch }): ToolRunners['search'] {
  const apiKey = opts.apiKey?.trim();
  const doFetch: typeof fetch = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
  return async (query, { signal } = {}) => {
    if (!apiKey) {
      return `[search disabled] Web search is disabled because no API key was given (query: ${query}). ` +
        'Enter a Tavily API key to enable the search tool.';
    }
    let res: Response;
    try {
      res = await doFetch(TAVILY_URL, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ query, search_depth: 'advanced', max_results: MAX_RESULTS }),
        signal,
      });
    } catch (e) {
      if (signal?.aborted) return '[aborted] The search was cancelled.';
      return `[search error] Could not reach Tavily: ${e instanceof Error ? e.message : String(e)}`;
    }
    if (!res.ok) {
      const hint = res.status === 401 || res.status === 403 ? ': check the API key' :
        res.status === 429 || res.status === 432 ? ': the key is over its rate or plan limit' : '';
      return `[search error] Tavily answered HTTP ${res.status}${res.statusText ? ` ${res.statusText}` : ''}${hint}.`;
    }
    try {
      const data = (await res.json()) as { results?: TavilyHit[] };
      return formatSearchResults(query, Array.isArray(data.results) ? data.results : []);
    } catch (e) {
      if (signal?.aborted) return '[aborted] The search was cancelled.';
      return `[search error] Tavily sent a reply that is not JSON: ${e instanceof Error ? e.message : String(e)}`;
    }
  };
}
