import { describe, expect, it } from 'vitest';
import { TAVILY_URL, parseTavilyKeys, tavilySearchRunner } from './tavily';

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

/** A local server playing Tavily: each key answers as `plan` says (a status, or a status and a body); 200 gives one hit. */
async function tavilyServer(plan: Record<string, number | [number, unknown]>) {
  const { createServer } = await import('node:http');
  const seen: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const key = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      seen.push(key);
      const p = plan[key] ?? 401;
      const [status, reply] = Array.isArray(p) ? p : [p, status200(p, JSON.parse(body).query as string)];
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(reply));
    });
  });
  const status200 = (s: number, q: string) =>
    s === 200 ? { results: [{ title: `hit for ${q}`, url: 'https://x.test', content: 'text' }] } : { detail: { error: 'refused' } };
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/search`, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('tavilySearchRunner with a keys file (rotation, against a local HTTP server)', () => {
  const K = ['tvly-FIRST-0000aaaa', 'tvly-SECOND-1111bbbb', 'tvly-THIRD-2222cccc'];
  const leaks = (s: string) => K.filter((k) => s.includes(k));

  it('a key answered 432 or 429 is skipped for the rest of the run; the query goes on to the next key; ' +
    'keys are named by position only', async () => {
    const srv = await tavilyServer({ [K[0]]: 432, [K[1]]: 429, [K[2]]: 200 });
    const events: string[] = [];
    try {
      const search = tavilySearchRunner({ keys: K, url: srv.url, onKeyEvent: (m) => events.push(m) });
      const first = await search('capital of France', {});
      expect(first).toBe('Query: capital of France\nResults:\n[1] hit for capital of France\nURL: https://x.test\ntext');
      expect(srv.seen).toEqual([K[0], K[1], K[2]]);
      expect(await search('second', {})).toContain('hit for second');
      expect(srv.seen).toEqual([K[0], K[1], K[2], K[2]]); // the refused keys are not tried again
      expect(events).toEqual([
        'Tavily key 1 of 3 was refused (HTTP 432 unknown: the key is over its rate or plan limit); it is skipped for the rest of the run',
        'Tavily key 2 of 3 was refused (HTTP 429 Too Many Requests: the key is over its rate or plan limit); it is skipped for the rest of the run',
      ]);
      expect(leaks([first, ...events].join('\n'))).toEqual([]);
    } finally {
      await srv.close();
    }
  });

  it('a usage-limit body on another 4xx rotates too; a server error does not; ' +
    'when every key is refused search stops, once reported', async () => {
    const srv = await tavilyServer({
      [K[0]]: [400, { detail: { error: "This request exceeds your plan's set usage limit." } }],
      [K[1]]: 500,
      [K[2]]: 401,
    });
    const events: string[] = [];
    const exhausted: string[] = [];
    try {
      const search = tavilySearchRunner({
        keys: K,
        url: srv.url,
        onKeyEvent: (m) => events.push(m),
        onExhausted: (m) => exhausted.push(m),
      });
      expect(await search('q', {})).toBe('[search error] Tavily answered HTTP 500 Internal Server Error.');
      expect(srv.seen).toEqual([K[0], K[1]]);
      // key 2 is kept: not a key error
      expect(await search('q', {})).toBe('[search error] Tavily answered HTTP 500 Internal Server Error.');
      expect(srv.seen).toEqual([K[0], K[1], K[1]]);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatch(/^Tavily key 1 of 3 was refused \(HTTP 400 Bad Request\)/);
      expect(exhausted).toEqual([]);

      const two = tavilySearchRunner({
        keys: [K[0], K[2]],
        url: srv.url,
        onKeyEvent: (m) => events.push(m),
        onExhausted: (m) => exhausted.push(m),
      });
      const out = await two('q', {});
      expect(out).toBe('[search error] every Tavily key (2) was refused or is over its limit; web search is off for the rest of the run.');
      expect(exhausted).toEqual(['all 2 Tavily keys were refused or are over their limits (the last: HTTP 401 Unauthorized)']);
      const before = srv.seen.length;
      expect(await two('again', {})).toBe(out);
      expect(srv.seen.length).toBe(before); // no request once every key is gone
      expect(exhausted).toHaveLength(1);
      expect(leaks([out, ...events, ...exhausted].join('\n'))).toEqual([]);
    } finally {
      await srv.close();
    }
  });

  it('a network error that echoes a key is redacted', async () => {
    const f = (async (_u: string, init: RequestInit) => {
      throw new TypeError(`refused ${(init.headers as Record<string, string>).Authorization}`);
    }) as unknown as typeof fetch;
    const out = await tavilySearchRunner({ keys: K, fetch: f })('q', {});
    expect(out).toBe('[search error] Could not reach Tavily: refused Bearer <key 1 of 3>');
  });

  it('parseTavilyKeys: one key per line, blanks and # comments ignored', () => {
    expect(parseTavilyKeys(`# team keys\n${K[0]}\n\n  ${K[1]}  \r\n# old: tvly-x\n${K[2]}\n`)).toEqual(K);
  });
});
