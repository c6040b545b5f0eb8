/**
 * cachedRangeFetch (cached-fetch.ts) over a model cache in memory: a complete file answered whole (200), by Range
 * (206 with its content-range, clipped at the end) and past its end (416) with nothing fetched; a file read in place
 * answers the ranges it holds and sends the rest to the network; cache-only mode answers 404 for a file the server
 * lacked without asking it again; storedUrls lists once for calls close together. pageFileReads: the app's own files
 * fetched as they are, the hub's through the cache once, ranges by the chunks they read.
 */
import { describe, expect, it } from 'vitest';
import { cachedRangeFetch, pageFileReads, storedUrls } from './cached-fetch';
import { memoryKv } from './kv';
import { modelCache } from './models';

const SIZE = 1000;
const body = Uint8Array.from({ length: SIZE }, (_, i) => (i * 31 + 7) % 251);
const BASE = 'https://hub.test/r/';

/** A server of `body` at every URL but /missing (404), with Range; the requests it saw. */
function server() {
  const seen: { url: string; range: string | null }[] = [];
  const fetchFn = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input);
    const range = new Headers(init?.headers).get('range');
    seen.push({ url, range });
    if (url.endsWith('/missing')) return new Response('not found', { status: 404 });
    const m = range ? /bytes=(\d+)-(\d*)/.exec(range) : null;
    if (!m) return new Response(body.slice(), { status: 200, headers: { 'content-length': String(SIZE) } });
    const a = Number(m[1]);
    const b = Math.min(m[2] ? Number(m[2]) : SIZE - 1, SIZE - 1);
    return new Response(body.slice(a, b + 1), {
      status: 206, headers: { 'content-range': `bytes ${a}-${b}/${SIZE}`, 'content-length': String(b - a + 1) },
    });
  }) as typeof fetch;
  return { fetch: fetchFn, seen };
}

/** A cache holding `whole` complete and the first chunk of `sparse` (100-byte chunks), and the fetch over it. */
async function setup(cacheOnly = false) {
  const net = server();
  const cache = modelCache({ kv: memoryKv(), fetch: net.fetch, chunkBytes: 100 });
  await cache.bytes(`${BASE}whole`);
  await (await cache.ranged(`${BASE}sparse`)).read(0, 50);
  await cache.bytes(`${BASE}missing`).catch(() => {});
  net.seen.length = 0;
  const stored = storedUrls(async () => cache);
  const f = cachedRangeFetch(async () => cache, net.fetch, { stored, cacheOnly: async () => cacheOnly });
  const get = (file: string, range?: string) => f(`${BASE}${file}`, range ? { headers: { range } } : {});
  return { net, get };
}

const bytesOf = async (r: Response) => new Uint8Array(await r.arrayBuffer());

describe('cachedRangeFetch', () => {
  it('a complete file: whole (200), a range (206), a range clipped at the end, past the end (416); nothing fetched', async () => {
    const { net, get } = await setup();
    const whole = await get('whole');
    expect([whole.status, whole.headers.get('content-length')]).toEqual([200, String(SIZE)]);
    expect(await bytesOf(whole)).toEqual(body);
    const r = await get('whole', 'bytes=10-19');
    expect([r.status, r.headers.get('content-range'), r.headers.get('content-length')]).toEqual([206, `bytes 10-19/${SIZE}`, '10']);
    expect(await bytesOf(r)).toEqual(body.slice(10, 20));
    const tail = await get('whole', 'bytes=990-');
    expect([tail.status, tail.headers.get('content-range')]).toEqual([206, `bytes 990-999/${SIZE}`]);
    expect(await bytesOf(tail)).toEqual(body.slice(990));
    const clipped = await get('whole', 'bytes=995-2000');
    expect(clipped.headers.get('content-range')).toBe(`bytes 995-999/${SIZE}`);
    const past = await get('whole', 'bytes=1000-1010');
    expect([past.status, past.headers.get('content-range')]).toEqual([416, `bytes */${SIZE}`]);
    expect(net.seen).toEqual([]);
  });

  it('a file read in place: a range it holds from the cache, one it lacks (or no range) from the network', async () => {
    const { net, get } = await setup();
    const held = await get('sparse', 'bytes=20-79');
    expect([held.status, held.headers.get('content-range')]).toEqual([206, `bytes 20-79/${SIZE}`]);
    expect(await bytesOf(held)).toEqual(body.slice(20, 80));
    expect(net.seen).toEqual([]);
    const lacking = await get('sparse', 'bytes=50-149');
    expect(await bytesOf(lacking)).toEqual(body.slice(50, 150));
    expect(net.seen).toEqual([{ url: `${BASE}sparse`, range: 'bytes=50-149' }]);
    await get('sparse');
    expect(net.seen.length).toBe(2);
  });

  it('a file the cache does not hold goes to the network; in cache-only mode one the server lacked is 404 at once', async () => {
    const online = await setup();
    expect((await online.get('other', 'bytes=0-9')).status).toBe(206);
    expect((await online.get('missing')).status).toBe(404);
    expect(online.net.seen.map((s) => s.url)).toEqual([`${BASE}other`, `${BASE}missing`]);
    const offline = await setup(true);
    expect((await offline.get('missing')).status).toBe(404);
    expect(offline.net.seen).toEqual([]);
    // cache-only mode does not stop a file never asked for: the fallback (the hub client) refuses it by name
    await offline.get('other');
    expect(offline.net.seen.map((s) => s.url)).toEqual([`${BASE}other`]);
  });

  it('storedUrls: complete → true, read in place → false, the missing left out; one listing within the ttl', async () => {
    let lists = 0;
    const cache = modelCache({ kv: memoryKv(), fetch: server().fetch, chunkBytes: 100 });
    await cache.bytes(`${BASE}whole`);
    await (await cache.ranged(`${BASE}sparse`)).read(0, 50);
    await cache.bytes(`${BASE}missing`).catch(() => {});
    const stored = storedUrls(async () => ({ list: () => (lists++, cache.list()) }), 60_000);
    expect([...(await stored())]).toEqual([[`${BASE}sparse`, false], [`${BASE}whole`, true]]);
    await stored();
    expect(lists).toBe(1);
    const fresh = storedUrls(async () => ({ list: () => (lists++, cache.list()) }), 0);
    await fresh();
    await fresh();
    expect(lists).toBe(3);
  });
});

describe('pageFileReads', () => {
  const APP = 'https://app.test';
  /** The app's own server: /own/file is `body` (its bytes), /own/missing 404, /own/broken 500; the URLs it saw. */
  function own() {
    const seen: string[] = [];
    const fetchFn = (async (input: RequestInfo | URL) => {
      const url = String(input);
      seen.push(url);
      if (url.endsWith('/missing')) return new Response(null, { status: 404 });
      if (url.endsWith('/broken')) return new Response(null, { status: 500, statusText: 'Internal Server Error' });
      return new Response(body.slice(), { status: 200 });
    }) as typeof fetch;
    return { fetch: fetchFn, seen };
  }
  function reads() {
    const app = own();
    const hub = server();
    const cache = modelCache({ kv: memoryKv(), fetch: hub.fetch, chunkBytes: 100 });
    return { app, hub, cache, r: pageFileReads(APP, app.fetch, async () => cache) };
  }

  it("reads the app's own files as they are and the hub's through the cache, once", async () => {
    const { app, hub, cache, r } = reads();
    expect(await r.file(`${APP}/own/file`)).toEqual(body);
    expect(app.seen).toEqual([`${APP}/own/file`]);
    expect(await r.file(`${APP}/own/missing`)).toBeNull();
    await expect(r.file(`${APP}/own/broken`)).rejects.toThrow(`${APP}/own/broken: HTTP 500 Internal Server Error`);
    const progress: number[] = [];
    expect(await r.file(`${BASE}whole`, undefined, (loaded) => progress.push(loaded))).toEqual(body);
    expect(progress.at(-1)).toBe(SIZE);
    expect(await r.file(`${BASE}whole`)).toEqual(body);
    expect(hub.seen.filter((s) => s.url === `${BASE}whole`).length).toBeGreaterThan(0);
    const asked = hub.seen.length;
    expect(await r.file(`${BASE}whole`)).toEqual(body); // the cache answers; the hub is not asked again
    expect(hub.seen.length).toBe(asked);
    expect((await cache.list()).map((f) => f.url)).toContain(`${BASE}whole`);
    expect(await r.file(`${BASE}missing`)).toBeNull();
  });

  it('reads ranges: own files sliced from the whole, hub files by the chunks read only, clipped at the end', async () => {
    const { hub, r } = reads();
    expect(await r.range(`${APP}/own/file`, 990, 2000)).toEqual({ bytes: body.subarray(990), total: SIZE });
    expect(await r.range(`${APP}/own/missing`, 0, 9)).toBeNull();
    expect(await r.range(`${BASE}sparse`, 120, 129)).toEqual({ bytes: body.subarray(120, 130), total: SIZE });
    expect(hub.seen.some((s) => s.range === 'bytes=100-199')).toBe(true);
    expect(hub.seen.some((s) => s.range === null || s.range === 'bytes=0-999')).toBe(false); // never the whole file
    expect(await r.range(`${BASE}sparse`, 995, 5000)).toEqual({ bytes: body.subarray(995), total: SIZE });
    expect(await r.range(`${BASE}sparse`, 1200, 1300)).toEqual({ bytes: new Uint8Array(0), total: SIZE });
    expect(await r.range(`${BASE}missing`, 0, 9)).toBeNull();
  });
});
