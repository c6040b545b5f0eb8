import { describe, expect, it } from 'vitest';
import {
  DEFAULT_ENDPOINT, hubError, hubFetch, hubSettingsFromEnv, matchesPattern, normalizeEndpoint, repoOfUrl, resolveUrl, retryAfterMs,
} from './hub';

const S = { endpoint: 'http://hub.test:8080', token: 'hf_secret' };

/** A fetch that answers from a script and records what it was asked (URL, Authorization, redirect mode). */
function scripted(answers: ((url: string) => Response | Error)[]) {
  const asked: { url: string; auth: string | null; redirect: string | undefined; range: string | null }[] = [];
  const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input);
    const h = new Headers(init?.headers);
    asked.push({ url, auth: h.get('authorization'), redirect: init?.redirect, range: h.get('range') });
    const a = answers.shift();
    if (!a) throw new Error(`unexpected request ${url}`);
    const r = a(url);
    if (r instanceof Error) throw r;
    return r;
  }) as typeof fetch;
  return { f, asked };
}

describe('hub settings', () => {
  it('reads HF_ENDPOINT, HF_TOKEN (or HUGGING_FACE_HUB_TOKEN) and HF_HUB_OFFLINE', () => {
    expect(hubSettingsFromEnv({})).toEqual({ endpoint: DEFAULT_ENDPOINT });
    expect(hubSettingsFromEnv({ HF_ENDPOINT: 'http://127.0.0.1:9/mirror/', HF_TOKEN: ' hf_a ', HF_HUB_OFFLINE: 'TRUE' })).toEqual({
      endpoint: 'http://127.0.0.1:9/mirror', token: 'hf_a', offline: true,
    });
    expect(hubSettingsFromEnv({ HUGGING_FACE_HUB_TOKEN: 'hf_b', HF_HUB_OFFLINE: '0' }))
      .toEqual({ endpoint: DEFAULT_ENDPOINT, token: 'hf_b' });
  });

  it('refuses endpoints that are not plain http(s) addresses, by name', () => {
    expect(() => normalizeEndpoint('ftp://x')).toThrow(/must be an http\(s\) URL/);
    expect(() => normalizeEndpoint('huggingface.co')).toThrow(/is not a URL/);
    expect(() => normalizeEndpoint('https://u:p@hub.test')).toThrow(/credentials/);
    expect(() => hubSettingsFromEnv({ HF_ENDPOINT: 'nope' })).toThrow(expect.objectContaining({ name: 'InvalidArgument' }));
  });

  it('escapes file names in resolve URLs and reads them back', () => {
    expect(resolveUrl(S, 'RecursiveMAS/Sequential-Light-Outerlinks', 'Planner-Critic-Outerlink(math).pt')).toBe(
      'http://hub.test:8080/RecursiveMAS/Sequential-Light-Outerlinks/resolve/main/Planner-Critic-Outerlink(math).pt',
    );
    expect(resolveUrl(S, 'a/b', 'sub dir/x#1.json', 'v1.0', 'dataset'))
      .toBe('http://hub.test:8080/datasets/a/b/resolve/v1.0/sub%20dir/x%231.json');
    expect(repoOfUrl(S, 'http://hub.test:8080/datasets/a/b/resolve/main/x')).toEqual({ repo: 'a/b', type: 'dataset' });
    expect(repoOfUrl(S, 'http://other.test/a/b/resolve/main/x')).toBeNull();
    expect(repoOfUrl(S, 'http://hub.test:8080/api/datasets/o/d/tree/main')).toEqual({ repo: 'o/d', type: 'dataset' });
    expect(repoOfUrl(S, 'http://hub.test:8080/api/models/a/b/revision/main')).toEqual({ repo: 'a/b', type: 'model' });
    expect(() => resolveUrl(S, '../etc', 'x')).toThrow(/not a Hugging Face repo id/);
  });

  it('matches patterns as fnmatch does (a star crosses folders)', () => {
    expect(matchesPattern('model.safetensors', '*.safetensors')).toBe(true);
    expect(matchesPattern('original/consolidated.safetensors', '*.safetensors')).toBe(true);
    expect(matchesPattern('adapter(math).pt', 'adapter*.pt')).toBe(true);
    expect(matchesPattern('README.md', '*.json')).toBe(false);
    expect(matchesPattern('model-00001-of-00002.safetensors', 'model-0000[0-9]-of-*.safetensors')).toBe(true);
    expect(matchesPattern('a.json', '?.json')).toBe(true);
    expect(matchesPattern('ab.json', '?.json')).toBe(false);
  });

  it('reads Retry-After in seconds or as a date, capped at five minutes', () => {
    expect(retryAfterMs('3')).toBe(3000);
    expect(retryAfterMs(new Date(10_000 + 7000).toUTCString(), 10_000)).toBe(7000);
    expect(retryAfterMs('100000')).toBe(300_000);
    expect(retryAfterMs('soon')).toBeNull();
    expect(retryAfterMs(null)).toBeNull();
  });
});

describe('hubFetch', () => {
  it('sends the token to the hub and drops it on a redirect to another host', async () => {
    const { f, asked } = scripted([
      () => new Response(null, { status: 302, headers: { location: 'http://cdn.test/blob/abc' } }),
      () => new Response('bytes', { status: 200 }),
    ]);
    const res = await hubFetch(S, { fetch: f, redirect: 'manual' })(resolveUrl(S, 'a/b', 'model.safetensors'));
    expect(await res.text()).toBe('bytes');
    expect(asked).toEqual([
      { url: 'http://hub.test:8080/a/b/resolve/main/model.safetensors', auth: 'Bearer hf_secret', redirect: 'manual', range: null },
      { url: 'http://cdn.test/blob/abc', auth: null, redirect: 'manual', range: null },
    ]);
  });

  it('never sends the token to another host, even when a caller put it in the headers', async () => {
    const { f, asked } = scripted([() => new Response('x')]);
    await hubFetch(S, { fetch: f })('http://elsewhere.test/file', { headers: { authorization: 'Bearer leaked' } });
    expect(asked[0]!.auth).toBeNull();
  });

  it('retries 429 after Retry-After and 503 with backoff, then returns the answer', async () => {
    const waits: number[] = [];
    const retries: string[] = [];
    const { f, asked } = scripted([
      () => new Response('slow down', { status: 429, headers: { 'retry-after': '2' } }),
      () => new Response('down', { status: 503 }),
      () => new TypeError('fetch failed'),
      () => new Response('ok'),
    ]);
    const res = await hubFetch(S, {
      fetch: f, backoffMs: 100, sleep: async (ms) => void waits.push(ms), onRetry: (why) => retries.push(why),
    })('http://hub.test:8080/a/b/resolve/main/x');
    expect(await res.text()).toBe('ok');
    expect(asked.length).toBe(4);
    expect(waits).toEqual([2000, 200, 400]);
    expect(retries).toEqual([
      'HTTP 429 from hub.test:8080; retry 1 of 5',
      'HTTP 503 from hub.test:8080; retry 2 of 5',
      'network error (fetch failed); retry 3 of 5',
    ]);
  });

  it('gives up after the retries with a named error that says what to do', async () => {
    const { f } = scripted(Array.from({ length: 3 }, () => () => new TypeError('fetch failed')));
    const failing = hubFetch(S, { fetch: f, retries: 2, sleep: async () => {} })('http://hub.test:8080/a/b/resolve/main/x');
    await expect(failing).rejects.toMatchObject({
      name: 'DownloadFailed',
      message: 'http://hub.test:8080/a/b/resolve/main/x: network error (fetch failed) after 3 attempt(s); check the connection and run again',
    });
    // a hub out of reach is said after two network retries, even where more are allowed for 429/5xx
    const waits: number[] = [];
    const unreachable = scripted(Array.from({ length: 3 }, () => () => new TypeError('fetch failed')));
    await expect(hubFetch(S, { fetch: unreachable.f, sleep: async (ms) => void waits.push(ms) })('http://hub.test:8080/x')).rejects
      .toMatchObject({ name: 'DownloadFailed', message: expect.stringContaining('network error (fetch failed) after 3 attempt(s)') });
    expect([unreachable.asked.length, waits]).toEqual([3, [1000, 2000]]);
    const last = scripted(Array.from({ length: 2 }, () => () => new Response('', { status: 500 })));
    const res = await hubFetch(S, { fetch: last.f, retries: 1, sleep: async () => {} })('http://hub.test:8080/x');
    expect(res.status).toBe(500);
  });

  it('turns the hub refusals into GatedRepo and RepoNotFound, and leaves a missing file to the caller', async () => {
    const answer = (status: number, code?: string) =>
      new Response('{"error":"x"}', { status, headers: code ? { 'x-error-code': code } : {} });
    const url = 'http://hub.test:8080/RecursiveMAS/Gated/resolve/main/config.json';
    await expect(hubFetch(S, { fetch: scripted([() => answer(401, 'GatedRepo')]).f })(url)).rejects.toMatchObject({
      name: 'GatedRepo',
      message: 'RecursiveMAS/Gated is gated or private (HTTP 401): accept its terms on http://hub.test:8080/RecursiveMAS/Gated with your ' +
        'account, then give an access token that can read it (HF_TOKEN for the runner, the token field under Environment in the page); ' +
        'the token given was refused for it',
    });
    await expect(hubFetch({ endpoint: S.endpoint }, { fetch: scripted([() => answer(401)]).f })(url)).rejects.toMatchObject({
      name: 'RepoNotFound',
      message: expect.stringMatching(/^RecursiveMAS\/Gated does not exist on http:\/\/hub.test:8080 \(HTTP 401\): check the repo id/),
    });
    await expect(hubFetch(S, { fetch: scripted([() => answer(404, 'RevisionNotFound')]).f })(url)).rejects.toMatchObject({
      name: 'RepoNotFound', message: expect.stringContaining('at the revision asked for (HTTP 404 RevisionNotFound)'),
    });
    const missing = await hubFetch(S, { fetch: scripted([() => answer(404, 'EntryNotFound')]).f })(url);
    expect(missing.status).toBe(404);
    expect(hubError(S, 'http://hub.test:8080/api/datasets/o/d/tree/main', answer(403, 'GatedRepo'))?.message).toContain(
      'accept its terms on http://hub.test:8080/datasets/o/d',
    );
  });

  it('requests nothing offline', async () => {
    const { f, asked } = scripted([]);
    await expect(hubFetch({ ...S, offline: true }, { fetch: f })('http://hub.test:8080/a/b/resolve/main/x')).rejects.toMatchObject({
      name: 'HubOffline',
    });
    expect(asked).toEqual([]);
  });
});
