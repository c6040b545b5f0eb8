// The model cache's logic in Node, over an in-memory Kv and a scripted server: chunking, resume with Range,
// cancellation, size/hash checks, corrupted chunks, quota. The browser test repeats the main paths on IndexedDB.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isNotFound } from '../formats/sources';
import { sha256Hex } from '../util/sha256';
import { type Kv, memoryKv } from './kv';
import { hubFetch } from './hub';
import { isMissingFile, modelCache } from './models';

const data = Uint8Array.from({ length: 10_000 }, (_, i) => (i * 7919 + 13) % 251);
const hexOf = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const URL0 = 'https://example.test/m/model.safetensors';

interface Call { url: string; range: string | null }
/**
 * A server for `body` at every URL but /missing; `cutAt` ends the body with an error after that many bytes (the first
 * `cuts` responses, default 1).
 */
function server(body: Uint8Array, o: { ranges?: boolean; cutAt?: number; cuts?: number; onCut?: () => void; piece?: number } = {}) {
  const calls: Call[] = [];
  let cutsLeft = o.cutAt === undefined ? 0 : (o.cuts ?? 1);
  const fetchFn = (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = String(input);
    const range = new Headers(init?.headers).get('range');
    calls.push({ url, range });
    if (url.endsWith('/missing')) return new Response('<html>', { status: 200, headers: { 'content-type': 'text/html' } });
    let start = 0;
    let end = body.byteLength - 1;
    const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
    let status = 200;
    if (range && o.ranges !== false) {
      const m = /bytes=(\d+)-(\d*)/.exec(range)!;
      start = Number(m[1]);
      if (m[2]) end = Math.min(Number(m[2]), end);
      status = 206;
      headers['content-range'] = `bytes ${start}-${end}/${body.byteLength}`;
    }
    const rest = body.subarray(start, end + 1);
    headers['content-length'] = String(rest.byteLength);
    const piece = o.piece ?? 700;
    let at = 0;
    const limit = cutsLeft > 0 ? o.cutAt : undefined;
    cutsLeft--;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        if (init?.signal?.aborted) return c.error(new DOMException('aborted', 'AbortError'));
        if (limit !== undefined && at >= limit) {
          o.onCut?.();
          return c.error(init?.signal?.aborted ? new DOMException('aborted', 'AbortError') : new TypeError('network error'));
        }
        if (at >= rest.byteLength) return c.close();
        const n = Math.min(piece, rest.byteLength - at, limit !== undefined ? limit - at : Infinity);
        c.enqueue(rest.slice(at, at + n));
        at += n;
      },
    });
    return new Response(stream, { status, headers });
  }) as typeof fetch;
  return { fetch: fetchFn, calls };
}

describe('modelCache: a file read in place (ranged)', () => {
  const chunksOf = (kv: ReturnType<typeof memoryKv>) =>
    [...kv.map.keys()]
      .filter((k) => k.startsWith('c|'))
      .map((k) => Number(k.split('|')[2]))
      .sort((a, b) => a - b);

  it('downloads only the chunks reads touch, one request per run of missing chunks, and keeps them', async () => {
    const kv = memoryKv();
    const s = server(data);
    const cache = modelCache({ kv, fetch: s.fetch, chunkBytes: 1024 });
    const src = await cache.ranged(URL0);
    expect(await src.read(5000, 100)).toEqual(data.slice(5000, 5100));
    expect(s.calls.map((c) => c.range)).toEqual(['bytes=4096-5119']);
    expect(await src.size()).toBe(10_000);
    expect(await src.read(4100, 20)).toEqual(data.slice(4100, 4120)); // the same chunk: no request
    expect(await src.read(6000, 3000)).toEqual(data.slice(6000, 9000)); // chunks 5..8 in one request
    expect(s.calls.map((c) => c.range)).toEqual(['bytes=4096-5119', 'bytes=5120-9215']);
    expect(chunksOf(kv)).toEqual([4, 5, 6, 7, 8]);
    // peek: what is stored, or null, never the network
    expect(await cache.peek(URL0, 4100, 4000)).toEqual({ bytes: data.slice(4100, 8100), size: 10_000 });
    expect(await cache.peek(URL0, 3000, 1200)).toBeNull();
    expect(await cache.peek('https://example.test/m/other', 0, 1)).toBeNull();
    expect(await cache.list()).toEqual([
      { url: URL0, bytes: 5 * 1024, size: 10_000, complete: false, sparse: true, storedAt: expect.any(Number) },
    ]);
    // another cache over the same store reads them without the network; wanted whole, only the missing chunks are fetched
    const again = modelCache({ kv, fetch: s.fetch, chunkBytes: 1024 });
    expect(await (await again.ranged(URL0)).read(7000, 10)).toEqual(data.slice(7000, 7010));
    expect(s.calls).toHaveLength(2);
    expect(await again.bytes(URL0)).toEqual(data);
    expect(s.calls.map((c) => c.range).slice(2)).toEqual(['bytes=0-4095', 'bytes=9216-9999']);
    expect(await cache.list()).toEqual([
      { url: URL0, bytes: 10_000, size: 10_000, complete: true, sparse: true, storedAt: expect.any(Number) },
    ]);
  });

  it('a server without ranges gives the whole file; a missing file is not-found; ' +
    'a changed file is DownloadFailed and dropped', async () => {
    const kv = memoryKv();
    const s = server(data, { ranges: false });
    const cache = modelCache({ kv, fetch: s.fetch, chunkBytes: 1024 });
    expect(await (await cache.ranged(URL0)).read(3000, 5)).toEqual(data.slice(3000, 3005));
    expect((await cache.list())[0]).toMatchObject({ complete: true, bytes: 10_000 });
    const miss = await (await cache.ranged('https://example.test/m/missing')).read(0, 4).catch((e: Error) => e);
    expect(miss).toMatchObject({ name: 'DownloadFailed', notFound: true });
    // a file that grew on the server after some chunks were kept
    const kv2 = memoryKv();
    const c1 = modelCache({ kv: kv2, fetch: server(data).fetch, chunkBytes: 1024 });
    await (await c1.ranged(URL0)).read(0, 10);
    const grown = new Uint8Array(12_000);
    grown.set(data);
    const c2 = modelCache({ kv: kv2, fetch: server(grown).fetch, chunkBytes: 1024 });
    const err = await (await c2.ranged(URL0)).read(8000, 10).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'DownloadFailed' });
    expect((err as Error).message).toMatch(/changed on the server/);
    expect(chunksOf(kv2)).toEqual([]);
  });

  it('a damaged stored chunk is CorruptCheckpoint and drops the file; ' +
    'a full store is QuotaExceeded and keeps what was stored', async () => {
    const kv = memoryKv();
    const cache = modelCache({ kv, fetch: server(data).fetch, chunkBytes: 1024 });
    await (await cache.ranged(URL0)).read(2048, 10);
    const key = 'c|' + URL0 + '|2';
    (kv.map.get(key) as Uint8Array)[5] ^= 1;
    const err = await (
      await modelCache({ kv, fetch: server(data).fetch, chunkBytes: 1024 }).ranged(URL0)
    )
      .read(2048, 10)
      .catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'CorruptCheckpoint' });
    expect(kv.map.size).toBe(0);
    // the store refuses the second run's chunks
    const base = memoryKv();
    let writes = 0;
    const full: Kv = {
      ...base,
      setMany: async (e) => {
        if (++writes > 1) throw Object.assign(new Error('quota'), { name: 'QuotaExceededError' });
        return base.setMany(e);
      },
    };
    const q = modelCache({ kv: full, fetch: server(data).fetch, chunkBytes: 1024 });
    const src = await q.ranged(URL0);
    expect(await src.read(0, 10)).toEqual(data.slice(0, 10));
    const qe = await src.read(5000, 10).catch((e: Error) => e);
    expect(qe).toMatchObject({ name: 'QuotaExceeded' });
    expect((qe as Error).message).toMatch(/1024 bytes of it are stored and kept/);
    expect(await src.read(0, 10)).toEqual(data.slice(0, 10));
  });
});

describe('modelCache (memory Kv)', () => {
  it('downloads in chunks with progress, then serves from the cache without fetching', async () => {
    const kv = memoryKv();
    const s = server(data);
    const cache = modelCache({ kv, fetch: s.fetch, chunkBytes: 4096 });
    const seen: [number, number][] = [];
    const src = await cache.source(URL0, { onProgress: (l, t) => seen.push([l, t]), sha256: hexOf(data), expectedSize: 10_000 });
    expect(seen[0]).toEqual([0, 10_000]);
    expect(seen.at(-1)).toEqual([10_000, 10_000]);
    expect(seen.every(([l], i) => i === 0 || l > seen[i - 1][0])).toBe(true);
    expect([...kv.map.keys()].filter((k) => k.startsWith('c|')).map((k) => (kv.map.get(k) as Uint8Array).byteLength)).toEqual([
      4096, 4096, 1808,
    ]);
    expect(await src.read(4000, 200)).toEqual(data.slice(4000, 4200));
    const again = await modelCache({ kv, fetch: s.fetch }).bytes(URL0);
    expect(again).toEqual(data);
    expect(s.calls.length).toBe(1);
    expect(await cache.list()).toEqual([{ url: URL0, bytes: 10_000, size: 10_000, complete: true, storedAt: expect.any(Number) }]);
  });

  it('resumes a cancelled download with Range from the last whole chunk', async () => {
    const kv = memoryKv();
    const ac = new AbortController();
    const s = server(data, { cutAt: 9000, onCut: () => ac.abort() });
    const cache = modelCache({ kv, fetch: s.fetch, chunkBytes: 4096 });
    const err = await cache.source(URL0, { signal: ac.signal }).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'Cancelled' });
    expect((err as Error).message).toMatch(/8192 bytes are kept: load again to resume/);
    expect(await cache.list()).toEqual([expect.objectContaining({ bytes: 8192, complete: false, size: 10_000 })]);
    const seen: number[] = [];
    expect(await cache.bytes(URL0, { onProgress: (l) => seen.push(l), sha256: hexOf(data) })).toEqual(data);
    expect(s.calls.map((c) => c.range)).toEqual([null, 'bytes=8192-']);
    expect(seen[0]).toBe(8192);
  });

  it('a broken connection goes on from its stored chunks twice, then is DownloadFailed, and resumable; no ranges: anew', async () => {
    const once = server(data, { cutAt: 5000, ranges: false });
    expect(await modelCache({ kv: memoryKv(), fetch: once.fetch, chunkBytes: 4096 }).bytes(URL0)).toEqual(data);
    expect(once.calls.map((c) => c.range)).toEqual([null, 'bytes=4096-']); // asked again, got 200, took it whole

    const kv = memoryKv();
    // cut 5000 bytes in: the first cut keeps chunk 0, the second (from 4096) chunk 1, the third request ends the file
    const s = server(data, { cutAt: 5000, cuts: 3 });
    expect(await modelCache({ kv: memoryKv(), fetch: s.fetch, chunkBytes: 4096 }).bytes(URL0)).toEqual(data);
    expect(s.calls.map((c) => c.range)).toEqual([null, 'bytes=4096-', 'bytes=8192-']);
    // cut 3000 bytes in, three times: no chunk fills, and the third is the caller's DownloadFailed; asked again, it goes on
    const t = server(data, { cutAt: 3000, cuts: 3 });
    const cache = modelCache({ kv, fetch: t.fetch, chunkBytes: 4096 });
    const err = await cache.source(URL0).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'DownloadFailed' });
    expect((err as Error).message).toMatch(/broke off at byte 3000 .*resume from byte 0/);
    expect(await cache.bytes(URL0)).toEqual(data);
    expect(t.calls.map((c) => c.range)).toEqual([null, null, null, null]);
  });

  it('size and hash mismatches fail and keep nothing of that file', async () => {
    const kv = memoryKv();
    const cache = modelCache({ kv, fetch: server(data).fetch, chunkBytes: 4096 });
    await expect(cache.source(URL0, { expectedSize: 9999 })).rejects.toThrow(/has 10000 bytes but 9999 were expected/);
    const bad = 'ab'.repeat(32);
    await expect(cache.source(URL0, { sha256: bad })).rejects.toMatchObject({
      name: 'DownloadFailed',
      message: expect.stringMatching(/SHA-256 .* differs/),
    });
    expect(kv.map.size).toBe(0);
  });

  it('a damaged chunk is CorruptCheckpoint, the file is dropped, and the next use downloads it again', async () => {
    const kv = memoryKv();
    const s = server(data);
    const cache = modelCache({ kv, fetch: s.fetch, chunkBytes: 4096 });
    await cache.source(URL0);
    (kv.map.get(`c|${URL0}|1`) as Uint8Array)[17] ^= 1;
    const src = await cache.source(URL0);
    expect(await src.read(0, 10)).toEqual(data.slice(0, 10));
    await expect(src.read(4090, 10)).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringMatching(/chunk 1 is damaged/),
    });
    expect(await cache.list()).toEqual([]);
    expect(await cache.bytes(URL0)).toEqual(data);
    expect(s.calls.length).toBe(2);
  });

  it('a quota error while storing is QuotaExceeded; files stored before are intact', async () => {
    const mem = memoryKv();
    let full = false;
    const kv: Kv = { ...mem, setMany: async (e) => {
      if (full && e.some(([k]) => k.startsWith('c|'))) throw new DOMException('quota', 'QuotaExceededError');
      return mem.setMany(e);
    } };
    const cache = modelCache({ kv, fetch: server(data).fetch, chunkBytes: 4096 });
    await cache.source(URL0);
    full = true;
    const err = await cache.source('https://example.test/m/other.bin').catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'QuotaExceeded' });
    expect((err as Error).message).toMatch(/needs 10000 more bytes .*\(0 bytes of it are stored and kept\); delete models or checkpoints/);
    expect(await cache.bytes(URL0)).toEqual(data);
  });

  it('an HTML page for a model file is a 404: not-found through the opener, remembered offline', async () => {
    const kv = memoryKv();
    const s = server(data);
    const open = modelCache({ kv, fetch: s.fetch }).opener('https://example.test/m/');
    const e1 = await open('missing').size().catch((e: Error) => e);
    expect(isNotFound(e1)).toBe(true);
    const offline = (async () => { throw new TypeError('Failed to fetch'); }) as typeof fetch;
    const e2 = await modelCache({ kv, fetch: offline }).opener('https://example.test/m/')('missing').size().catch((e: Error) => e);
    expect(isNotFound(e2)).toBe(true);
    expect(await sha256Hex(data)).toBe(hexOf(data));
  });

  it('cache only: a file read in place that the server lacked when last asked is still missing, not HubOffline', async () => {
    const kv = memoryKv();
    const url = 'https://example.test/m/model.safetensors.index.json';
    const missing = (async () => new Response(null, { status: 404 })) as typeof fetch;
    expect(isMissingFile(await modelCache({ kv, fetch: missing }).ranged(url).then((r) => r.size()).catch((e: Error) => e))).toBe(true);
    const offline = hubFetch({ endpoint: 'https://example.test', offline: true });
    const again = await modelCache({ kv, fetch: offline }).ranged(url).then((r) => r.size()).catch((e: Error) => e);
    expect([isMissingFile(again), (again as Error).message])
      .toEqual([true, `${url} was not on the server when last asked (and it cannot be asked now)`]);
    // a file never asked about is the hub client's HubOffline
    const never = await modelCache({ kv, fetch: offline }).ranged(`${url}.other`).then((r) => r.size()).catch((e: Error) => e);
    expect((never as Error).name).toBe('HubOffline');
  });
});
