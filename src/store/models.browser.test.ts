// The model cache on real IndexedDB in Chromium, downloading the tiny model from the test server (the repo
// root): progress, no second fetch, cancel + resume with Range, a damaged chunk, a quota error, and the
// decoder and tokenizer loaded through the cache equal to the ones loaded over HTTP directly.
import { afterEach, describe, expect, it } from 'vitest';
import { loadDecoderFromUrl } from '../model/url';
import { CpuBackend } from '../tensor/cpu';
import { loadTokenizerFromUrl } from '../tokenizer/url';
import { type Kv, idbKv } from './kv';
import { modelCache } from './models';

const ROOT = new URL('/models/tiny/qwen3-tiny/', location.href).href;
const FILE = `${ROOT}model.safetensors`;
const SIZE = 157_928;
const C = 32_768; // 5 chunks: 4 · 32768 + 26856

const dbs: Kv[] = [];
const freshKv = () => {
  const kv = idbKv(`rmas-test-${Math.random().toString(36).slice(2)}`, 'files');
  dbs.push(kv);
  return kv;
};
afterEach(async () => {
  await Promise.all(dbs.splice(0).map((kv) => kv.clear()));
});

/** globalThis.fetch, counted, with the Range header of each call; `cutAt` aborts the first body after that many bytes. */
function counted(o: { cutAt?: number; ac?: AbortController } = {}) {
  const ranges: (string | null)[] = [];
  let cut = o.cutAt;
  const f = (async (input: RequestInfo | URL, init?: RequestInit) => {
    ranges.push(new Headers(init?.headers).get('range'));
    const res = await fetch(input, init);
    const limit = cut;
    cut = undefined;
    if (limit === undefined || !res.body) return res;
    const reader = res.body.getReader();
    let seen = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        if (seen >= limit) {
          o.ac?.abort();
          c.error(new DOMException('The user aborted a request.', 'AbortError'));
          return;
        }
        const { done, value } = await reader.read();
        if (done) return c.close();
        const v = value.subarray(0, Math.min(value.byteLength, limit - seen));
        seen += v.byteLength;
        c.enqueue(v);
      },
    });
    return new Response(body, { status: res.status, headers: res.headers });
  }) as typeof fetch;
  return { fetch: f, ranges };
}

async function fileBytes(): Promise<Uint8Array> {
  return new Uint8Array(await (await fetch(FILE)).arrayBuffer());
}

describe('model cache on IndexedDB (chromium)', () => {
  it('downloads with progress to the total, then serves without fetching', async () => {
    const kv = freshKv();
    const net = counted();
    const cache = modelCache({ kv, fetch: net.fetch, chunkBytes: C });
    const seen: [number, number][] = [];
    const src = await cache.source(FILE, { onProgress: (l, t) => seen.push([l, t]), expectedSize: SIZE });
    expect(seen[0]).toEqual([0, SIZE]);
    expect(seen.at(-1)).toEqual([SIZE, SIZE]);
    expect(await src.size()).toBe(SIZE);
    const want = await fileBytes();
    expect(await src.read(C - 5, 10)).toEqual(want.slice(C - 5, C + 5));
    const again = await modelCache({ kv, fetch: net.fetch }).bytes(FILE);
    expect(again).toEqual(want);
    expect(net.ranges).toEqual([null]);
    expect(await cache.list()).toEqual([{ url: FILE, bytes: SIZE, size: SIZE, complete: true, storedAt: expect.any(Number) }]);
    const u = await cache.usage();
    expect(u.quota).toBeGreaterThan(0);
    expect(typeof u.persisted).toBe('boolean');
  });

  it('a cancelled download resumes from the stored chunks with a Range request', async () => {
    const kv = freshKv();
    const ac = new AbortController();
    const net = counted({ cutAt: 70_000, ac });
    const cache = modelCache({ kv, fetch: net.fetch, chunkBytes: C });
    const err = await cache.source(FILE, { signal: ac.signal }).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'Cancelled', message: expect.stringMatching(/65536 bytes are kept/) });
    expect(await cache.list()).toEqual([expect.objectContaining({ bytes: 65_536, complete: false })]);
    const seen: number[] = [];
    const got = await cache.bytes(FILE, { onProgress: (l) => seen.push(l) });
    expect(net.ranges).toEqual([null, 'bytes=65536-']);
    expect(seen[0]).toBe(65_536);
    expect(seen.at(-1)).toBe(SIZE);
    expect(got).toEqual(await fileBytes());
  });

  it('a damaged chunk raises CorruptCheckpoint and the next use downloads again', async () => {
    const kv = freshKv();
    const net = counted();
    const cache = modelCache({ kv, fetch: net.fetch, chunkBytes: C });
    await cache.source(FILE);
    const key = `c|${FILE}|2`;
    const chunk = (await kv.get(key)) as Uint8Array;
    chunk[100] ^= 0xff;
    await kv.setMany([[key, chunk]]);
    const src = await cache.source(FILE);
    await expect(src.read(2 * C + 50, 100)).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringMatching(/chunk 2 is damaged/),
    });
    expect(await cache.list()).toEqual([]);
    expect(await cache.bytes(FILE)).toEqual(await fileBytes());
    expect(net.ranges).toEqual([null, null]);
  });

  it('a QuotaExceededError while storing is QuotaExceeded; files stored before are intact', async () => {
    const inner = freshKv();
    let full = false;
    const kv: Kv = { ...inner, setMany: async (e) => {
      if (full && e.some(([k]) => k.startsWith('c|'))) throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
      return inner.setMany(e);
    } };
    const cache = modelCache({ kv, fetch: counted().fetch, chunkBytes: C });
    const cfg = await cache.bytes(`${ROOT}config.json`);
    full = true;
    const err = await cache.source(FILE).catch((e: Error) => e);
    expect(err).toMatchObject({
      name: 'QuotaExceeded',
      message: expect.stringMatching(/needs 157928 more bytes .*delete models or checkpoints/),
    });
    expect(await cache.bytes(`${ROOT}config.json`)).toEqual(cfg);
    expect((await cache.list()).find((f) => f.url.endsWith('config.json'))).toMatchObject({ complete: true, bytes: 710 });
  });

  it('loadDecoderFromUrl and loadTokenizerFromUrl through the cache equal the direct loads', async () => {
    const kv = freshKv();
    const net = counted();
    const cache = modelCache({ kv, fetch: net.fetch });
    const files = new Map<string, number>();
    const open = cache.opener(ROOT, { onProgress: (f, l) => files.set(f, l) });
    const direct = await loadDecoderFromUrl(ROOT, new CpuBackend());
    const cached = await loadDecoderFromUrl(ROOT, new CpuBackend(), { open });
    try {
      expect(cached.weights.totalBytes).toBe(direct.weights.totalBytes);
      expect(await cached.weights.embed.read()).toEqual(await direct.weights.embed.read());
      expect(await cached.weights.layers[1].down.read()).toEqual(await direct.weights.layers[1].down.read());
    } finally {
      direct.dispose();
      cached.dispose();
    }
    expect(files.get('model.safetensors')).toBe(SIZE);
    const tok = await loadTokenizerFromUrl(ROOT, { open });
    expect(tok.encode('What is 3 + 4?')).toEqual([387, 266, 32, 51, 314, 32, 52, 63]);
    const n = net.ranges.length;
    const again = await loadDecoderFromUrl(ROOT, new CpuBackend(), { open: modelCache({ kv, fetch: net.fetch }).opener(ROOT) });
    again.dispose();
    expect(net.ranges.length - n).toBe(1); // only the sharded index is asked again (404s are re-checked online)
  });
});
