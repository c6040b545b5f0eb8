import { describe, expect, it } from 'vitest';
import { TAVILY_URL, tavilySearchRunner } from './tavily';

/** A fetch that records its request and answers with `status` and `body`. */
function fakeFetch(status: number, body: unknown, statusText = '') {
  const calls: { url: string; init: RequestInit }[] = [];
  const f = (async (url: string, init: RequestInit) => {
    calls.push({ url, init });
    return new Response(JSON.stringify(body), { status, statusText });
  }) as unknown as typeof fetch;
  return { f, calls };
}

describe('tavilySearchRunner', () => {
  it('posts an advanced search for 4 results and formats the hits', async () => {
    const long = 'word '.repeat(100); // 500 chars, collapses and cuts at 320
    const { f, calls } = fakeFetch(200, {
      results: [
        { title: 'Paris', url: 'https://en.wikipedia.org/wiki/Paris', content: 'Paris  is\n the\tcapital.' },
        { title: 'Long', url: 'https://x.test/long', content: long },
      ],
    });
    const search = tavilySearchRunner({ apiKey: 'tvly-test', fetch: f });
    const out = await search('capital of France', {});
    expect(calls).toHaveLength(1);
    expect(calls[0]!.url).toBe(TAVILY_URL);
    expect(calls[0]!.init.method).toBe('POST');
    expect((calls[0]!.init.headers as Record<string, string>).Authorization).toBe('Bearer tvly-test');
    expect(JSON.parse(calls[0]!.init.body as string)).toEqual({ query: 'capital of France', search_depth: 'advanced', max_results: 4 });
    expect(out).toBe(
      'Query: capital of France\nResults:\n' +
        '[1] Paris\nURL: https://en.wikipedia.org/wiki/Paris\nParis is the capital.\n\n' +
        `[2] Long\nURL: https://x.test/long\n${'word '.repeat(64)} ...`,
    );
  });

  it('keeps at most 4 hits', async () => {
    const results = Array.from({ length: 6 }, (_, i) => ({ title: `t${i}`, url: `u${i}`, content: `c${i}` }));
    const out = await tavilySearchRunner({ apiKey: 'k', fetch: fakeFetch(200, { results }).f })('q', {});
    expect(out).toBe('Query: q\nResults:\n[1] t0\nURL: u0\nc0\n\n[2] t1\nURL: u1\nc1\n\n[3] t2\nURL: u2\nc2\n\n[4] t3\nURL: u3\nc3');
  });

  it('says [no search results] for an empty list', async () => {
    expect(await tavilySearchRunner({ apiKey: 'k', fetch: fakeFetch(200, { results: [] }).f })('q', {}))
      .toBe('[no search results]');
  });

  it('names the HTTP status on an error', async () => {
    const out = await tavilySearchRunner({ apiKey: 'bad', fetch: fakeFetch(401, { detail: 'x' }, 'Unauthorized').f })('q', {});
    expect(out).toBe('[search error] Tavily answered HTTP 401 Unauthorized: check the API key.');
  });

  it('reports a network failure as text', async () => {
    const f = (async () => { throw new TypeError('fetch failed'); }) as unknown as typeof fetch;
    expect(await tavilySearchRunner({ apiKey: 'k', fetch: f })('q', {})).toBe('[search error] Could not reach Tavily: fetch failed');
  });

  it('without a key, says search is disabled and makes no request', async () => {
    const { f, calls } = fakeFetch(200, {});
    for (const apiKey of [undefined, '', '  ']) {
      const out = await tavilySearchRunner({ apiKey, fetch: f })('who?', {});
      expect(out).toBe('[search disabled] Web search is disabled because no API key was given (query: who?). ' +
        'Enter a Tavily API key to enable the search tool.');
    }
    expect(calls).toHaveLength(0);
  });
});
