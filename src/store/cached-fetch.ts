/**
 * A fetch that answers from the model cache what it holds, as the server would (200 for a whole file, 206 for a
 * Range, 416 past the end), and asks the network for the rest. A system's download plan reads sizes and headers
 * through it, so that a plan works offline for the files stored, and counts nothing twice. And how the page reads a
 * system's files (pageFileReads): its own files as they are, the hub's through the model cache.
 */
import { DownloadFailed } from '../errors';
import { type ModelCache, isMissingFile } from './models';

/** What cachedRangeFetch reads of the cache. */
export type RangeCache = Pick<ModelCache, 'peek' | 'source' | 'knownMissing'>;

export interface CachedFetchOptions {
  /** The URLs the cache holds → true when complete, false when read in place (storedUrls). */
  stored: () => Promise<Map<string, boolean>>;
  /** Cache-only mode: a file the hub said it lacks answers 404 instead of being asked for again. */
  cacheOnly?: () => Promise<boolean>;
}

/**
 * The URLs `cache` holds (complete, or read in place) → whether complete. One listing serves the calls within
 * `ttlMs`: a plan makes many reads, and listing IndexedDB for each would cost more than the reads.
 */
export function storedUrls(cache: () => Promise<Pick<ModelCache, 'list'>>, ttlMs = 2000): () => Promise<Map<string, boolean>> {
  let memo: { at: number; urls: Promise<Map<string, boolean>> } | null = null;
  return () => {
    if (memo && performance.now() - memo.at < ttlMs) return memo.urls;
    const urls = (async () => {
      const files = await (await cache()).list();
      return new Map(files.filter((f) => f.complete || f.sparse).map((f) => [f.url, f.complete]));
    })();
    memo = { at: performance.now(), urls };
    urls.catch(() => (memo = null)); // a failed listing is not kept
    return urls;
  };
}

const urlOf = (input: RequestInfo | URL) => (typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);

/**
 * A fetch over `cache` (opened on first use) and `fallback`: a complete file is read from the cache whole or by its
 * `Range: bytes=a-b` (nothing downloaded); a file read in place answers the ranges it holds; everything else, and a
 * range held in part, goes to `fallback`.
 */
export function cachedRangeFetch(cache: () => Promise<RangeCache>, fallback: typeof fetch, opts: CachedFetchOptions): typeof fetch {
  return async (input, init) => {
    const url = urlOf(input);
    const complete = (await opts.stored()).get(url);
    if (complete === undefined) {
      // an optional file (a sharded index) the hub lacks stays lacking: cache-only mode asks no one
      if ((await opts.cacheOnly?.()) && (await (await cache()).knownMissing(url))) return new Response(null, { status: 404 });
      return fallback(input, init);
    }
    const m = /bytes=(\d+)-(\d*)/.exec(new Headers(init?.headers).get('range') ?? '');
    const c = await cache();
    if (!complete) {
      const held = m ? await c.peek(url, Number(m[1]), m[2] ? Number(m[2]) - Number(m[1]) + 1 : undefined) : null;
      if (!held) return fallback(input, init);
      return partial(held.bytes, Number(m![1]), held.size);
    }
    const src = await c.source(url);
    const size = await src.size();
    if (!m) return new Response((await src.read(0, size)) as BodyInit, { status: 200, headers: { 'content-length': String(size) } });
    const a = Number(m[1]);
    const b = Math.min(m[2] ? Number(m[2]) : size - 1, size - 1);
    if (a > b) return new Response(null, { status: 416, headers: { 'content-range': `bytes */${size}` } });
    return partial(await src.read(a, b - a + 1), a, size);
  };
}

/** A 206 answer of `bytes` from offset `a` of a file of `size` bytes. */
function partial(bytes: Uint8Array, a: number, size: number): Response {
  const n = bytes.byteLength;
  return new Response(bytes as BodyInit, {
    status: 206,
    headers: { 'content-range': `bytes ${a}-${a + n - 1}/${size}`, 'content-length': String(n) },
  });
}

/** What pageFileReads reads of the model cache. */
export type FileCache = Pick<ModelCache, 'bytes' | 'ranged'>;

export interface PageFileReads {
  /** A whole file, or null where it does not exist. */
  file(url: string, signal?: AbortSignal, onProgress?: (loaded: number, total: number) => void): Promise<Uint8Array | null>;
  /** Bytes `start`…`end` (inclusive, clipped to the file) and the file's size, or null where it does not exist. */
  range(url: string, start: number, end: number, signal?: AbortSignal): Promise<{ bytes: Uint8Array; total: number } | null>;
}

/**
 * How the page reads a system's files: those of the app's own origin (the offline tiny system) are fetched as they are;
 * those of other origins (the hub) go through the model cache (opened on first use): downloaded once in hashed chunks,
 * resumable, with progress, and a Range read downloads and keeps only the chunks it reads (a vision tower or Qwen3.5's
 * mtp.* never is).
 */
export function pageFileReads(origin: string, own: typeof fetch, cache: () => Promise<FileCache>): PageFileReads {
  const missing = async <T>(read: () => Promise<T>): Promise<T | null> => {
    try {
      return await read();
    } catch (e) {
      if (isMissingFile(e)) return null;
      throw e;
    }
  };
  const file: PageFileReads['file'] = async (url, signal, onProgress) => {
    if (new URL(url).origin === origin) {
      const res = await own(url, signal ? { signal } : {});
      if (res.status === 404) return null;
      if (!res.ok) throw new DownloadFailed(`${url}: HTTP ${res.status} ${res.statusText}`);
      return new Uint8Array(await res.arrayBuffer());
    }
    return missing(async () => (await cache()).bytes(url, { ...(signal ? { signal } : {}), ...(onProgress ? { onProgress } : {}) }));
  };
  return {
    file,
    async range(url, start, end, signal) {
      if (new URL(url).origin === origin) {
        const whole = await file(url, signal);
        return whole && { bytes: whole.subarray(start, Math.min(end + 1, whole.byteLength)), total: whole.byteLength };
      }
      return missing(async () => {
        const src = await (await cache()).ranged(url, signal ? { signal } : {});
        const total = await src.size();
        const to = Math.min(end + 1, total);
        return { bytes: start < to ? await src.read(start, to - start) : new Uint8Array(0), total };
      });
    },
  };
}
