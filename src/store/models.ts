/**
 * The model file cache: files fetched by URL (Hugging Face hub or any server) kept in IndexedDB (through
 * idb-keyval; the page and workers both have it) in chunks of at most 8 MiB, each with its SHA-256, checked
 * on every read. Downloads report progress, stop on an AbortSignal and resume with an HTTP Range request
 * from the last stored chunk. Keys: `m|<url>` → FileMeta, `c|<url>|<i>` → chunk i (bytes i·C .. (i+1)·C).
 * A file read in place (`ranged`: checkpoints, of which the engine reads some tensors and never a vision tower's)
 * is stored sparsely: only the chunks its reads touched.
 */
import { Cancelled, CorruptCheckpoint, DownloadFailed, InvalidArgument, QuotaExceeded, RmasError } from '../errors';
import { modelFetch } from '../model/url';
import { type ByteSource, parseContentRange } from '../formats/sources';
import { Sha256, sha256Hex } from '../util/sha256';
import { idbKv, type Kv } from './kv';

export const CHUNK_BYTES = 8 * 2 ** 20;

export interface FileMeta {
  url: string;
  /** Total bytes, once a response has told it. */
  size: number | null;
  chunkBytes: number;
  /** SHA-256 (hex) of each stored chunk, in order; all but the last are chunkBytes long. */
  hashes: string[];
  complete: boolean;
  storedAt: number;
  /** Expected SHA-256 of the whole file (given, or the hub's x-linked-etag). */
  sha256?: string;
  /** The server answered 404: remembered so that an offline load can skip optional files. */
  missing?: boolean;
  /** Stored by `ranged` reads: `hashes` has '' for the chunks not stored (yet). */
  sparse?: boolean;
}

export interface SourceOptions {
  onProgress?: (loaded: number, total: number) => void;
  signal?: AbortSignal;
  expectedSize?: number;
  sha256?: string;
}

export interface ModelCacheOptions {
  kv?: Kv;
  fetch?: typeof fetch;
  headers?: Record<string, string>;
  chunkBytes?: number;
}

export interface CachedFile {
  url: string;
  /** Read in place: the chunks the engine read are stored, not (necessarily) the whole file. */
  sparse?: boolean;
  /** Bytes stored (all of them when complete). */
  bytes: number;
  size: number | null;
  complete: boolean;
  storedAt: number;
}

const mk = (url: string) => `m|${url}`;
/** Bytes of the chunks a (possibly sparse) meta holds. */
function storedBytes(m: FileMeta): number {
  let n = 0;
  m.hashes.forEach((h, i) => {
    if (h) n += m.size === null ? m.chunkBytes : Math.min(m.chunkBytes, m.size - i * m.chunkBytes);
  });
  return n;
}
const ck = (url: string, i: number) => `c|${url}|${i}`;
/** The hub's `x-linked-etag` (the LFS object's SHA-256) when it has that form. */
export function linkedSha256(res: Response): string | undefined {
  const e = res.headers.get('x-linked-etag')?.replace(/^W\//, '').replace(/"/g, '');
  return e && /^[0-9a-f]{64}$/i.test(e) ? e.toLowerCase() : undefined;
}

const isQuota = (e: unknown) => (e as { name?: string } | null)?.name === 'QuotaExceededError';
const notFoundError = (msg: string, status: number) => Object.assign(new DownloadFailed(msg), { status, notFound: true });
/** True for the DownloadFailed of a file the server does not have (404/410). */
export const isMissingFile = (e: unknown) => e instanceof DownloadFailed && (e as { notFound?: boolean }).notFound === true;

/** Marks a DownloadFailed whose connection dropped mid-body: the same request may simply be made again. */
const dropped = (e: DownloadFailed) => Object.assign(e, { dropped: true });

/** `run()`, made again up to twice when it fails with a dropped connection (what it stored is kept, so it goes on from there). */
async function againIfDropped<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run();
    } catch (e) {
      if (attempt >= 2 || (e as { dropped?: boolean }).dropped !== true) throw e;
    }
  }
}

/** The model file cache over `opts.kv` (IndexedDB 'rmas-models' by default). */
export function modelCache(opts: ModelCacheOptions = {}) {
  const kv = opts.kv ?? idbKv();
  // a missing file served as the site's HTML page (Vite's dev server, SPA hosts) counts as a 404
  const doFetch = modelFetch(opts.fetch ?? globalThis.fetch.bind(globalThis));
  const C = opts.chunkBytes ?? CHUNK_BYTES;
  if (!Number.isInteger(C) || C < 1 || C > CHUNK_BYTES)
    throw new InvalidArgument(`chunkBytes must be an integer in 1..${CHUNK_BYTES}, got ${C}`);
  const inflight = new Map<string, Promise<FileMeta>>();

  const remove = async (url: string) => {
    const pre = `c|${url}|`;
    await kv.delMany((await kv.keys()).filter((k) => k === mk(url) || k.startsWith(pre)));
  };

  async function download(url: string, o: SourceOptions): Promise<FileMeta> {
    let meta = (await kv.get(mk(url))) as FileMeta | undefined;
    if (meta?.complete) return meta;
    // read in place before, now wanted whole: the chunks it lacks, by Range
    if (meta?.sparse && meta.size !== null) {
      const src = await rangedSource(url, o);
      await src.read(0, meta.size);
      return (await kv.get(mk(url))) as FileMeta;
    }
    const cancelled = (kept: number) => new Cancelled(`download of ${url} cancelled; ${kept} bytes are kept: load again to resume`);
    if (o.signal?.aborted) throw cancelled(meta ? meta.hashes.length * meta.chunkBytes : 0);
    const chunk = meta && !meta.missing ? meta.chunkBytes : C;
    let hashes = meta && !meta.missing ? meta.hashes : [];
    const start = hashes.length * chunk;
    const headers: Record<string, string> = { ...opts.headers };
    if (start > 0) headers.Range = `bytes=${start}-`;
    let res: Response;
    try {
      res = await doFetch(url, { headers, signal: o.signal });
    } catch (e) {
      if (o.signal?.aborted) throw cancelled(start);
      if (meta?.missing) throw notFoundError(`${url} was not on the server when last asked (and the network is unreachable now)`, 404);
      if (e instanceof RmasError) throw e; // the hub client's own: offline, gated, not found, retries spent
      throw new DownloadFailed(`${url}: network error (${(e as Error).message}); check the connection and load again` +
        (start ? ` to resume from byte ${start}` : ''));
    }
    if (res.status === 404 || res.status === 410) {
      await remove(url);
      await kv.setMany([[mk(url), { url, size: null, chunkBytes: C, hashes: [], complete: false, storedAt: Date.now(), missing: true }]]);
      throw notFoundError(`${url} does not exist (HTTP ${res.status}); check the URL, or that the repository has this file`, res.status);
    }
    if (!res.ok) {
      void res.body?.cancel();
      if (res.status === 416) await remove(url); // the stored part no longer fits the file: start over next time
      throw Object.assign(
        new DownloadFailed(
          `${url}: HTTP ${res.status} ${res.statusText}; ` +
            (res.status === 401 || res.status === 403
              ? 'the repository is gated or private: accept its terms and give an access token'
              : res.status === 416
                ? 'the file changed on the server: load again to download it from the start'
                : 'check the URL and load again later'),
        ),
        { status: res.status },
      );
    }
    let loaded = 0;
    let total: number;
    const len = Number(res.headers.get('content-length') ?? NaN);
    if (res.status === 206) {
      const cr = parseContentRange(res.headers.get('content-range'));
      total = cr?.total ?? start + len;
      if ((cr && cr.start !== start) || (meta?.size != null && total !== meta.size)) {
        void res.body?.cancel();
        await remove(url);
        throw new DownloadFailed(
          `${url}: the resumed download does not continue the stored part (the file changed on the server); load again to download it from the start`,
        );
      }
      loaded = start;
    } else {
      hashes = []; // the server ignored Range (or nothing was stored): from the start
      total = len;
    }
    const known = Number.isSafeInteger(total);
    const sha = o.sha256?.toLowerCase() ?? linkedSha256(res) ?? meta?.sha256;
    const wrongSize = (n: number) => o.expectedSize !== undefined && n !== o.expectedSize;
    if (known && wrongSize(total)) {
      void res.body?.cancel();
      await remove(url);
      throw new DownloadFailed(
        `${url}: the server has ${total} bytes but ${o.expectedSize} were expected; the file changed on the hub or the listing is stale: refresh it and load again`,
      );
    }
    meta = {
      url,
      size: known ? total : null,
      chunkBytes: chunk,
      hashes,
      complete: false,
      storedAt: Date.now(),
      ...(sha ? { sha256: sha } : {}),
    };
    const quota = (e: unknown) => {
      const kept = meta!.hashes.length * chunk;
      return new QuotaExceeded(`storing ${url} needs ${known ? total - kept : 'more than ' + chunk} more bytes ` +
      `than the browser allows this site (${kept} bytes of it are stored and kept); delete models or checkpoints you no longer need ` +
      `in the cache manager, then load again to resume (${(e as Error).message})`);
    };
    const put = async (entries: [string, unknown][]) => {
      try {
        await kv.setMany(entries);
      } catch (e) {
        if (isQuota(e)) throw quota(e);
        throw e;
      }
    };
    await put([[mk(url), meta]]);
    const buf = new Uint8Array(chunk);
    let fill = 0;
    const flush = async () => {
      const part = buf.slice(0, fill);
      const next = { ...meta!, hashes: [...meta!.hashes, await sha256Hex(part)] };
      await put([[ck(url, meta!.hashes.length), part], [mk(url), next]]);
      meta = next;
      fill = 0;
    };
    o.onProgress?.(loaded, known ? total : NaN);
    try {
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        for (let i = 0; i < value.byteLength;) {
          const n = Math.min(chunk - fill, value.byteLength - i);
          buf.set(value.subarray(i, i + n), fill);
          fill += n;
          i += n;
          if (fill === chunk) await flush();
        }
        loaded += value.byteLength;
        if (known && loaded > total) throw new DownloadFailed(`${url}: the server sent more than the ${total} bytes it announced`);
        o.onProgress?.(loaded, known ? total : NaN);
      }
    } catch (e) {
      if (e instanceof QuotaExceeded || e instanceof DownloadFailed) throw e;
      const kept = meta.hashes.length * chunk;
      if (o.signal?.aborted) throw cancelled(kept);
      throw dropped(new DownloadFailed(
        `${url}: the download broke off at byte ${loaded} (${(e as Error).message}); load again to resume from byte ${kept}`,
      ));
    }
    if (known && loaded < total) {
      throw new DownloadFailed(`${url}: the server stopped after ${loaded} of ${total} bytes; load again to resume`);
    }
    if (fill > 0) await flush();
    if (wrongSize(loaded)) {
      await remove(url);
      throw new DownloadFailed(
        `${url}: received ${loaded} bytes but ${o.expectedSize} were expected; refresh the file listing and load again`,
      );
    }
    const done: FileMeta = { ...meta, size: loaded, complete: true, storedAt: Date.now() };
    if (sha) {
      const h = new Sha256();
      for (let i = 0; i < done.hashes.length; i++) h.update((await kv.get(ck(url, i))) as Uint8Array);
      const got = h.hex();
      if (got !== sha) {
        await remove(url);
        throw new DownloadFailed(`${url}: SHA-256 ${got} differs from the expected ${sha}; the download was corrupted: load again`);
      }
    }
    await put([[mk(url), done]]);
    return done;
  }

  /**
   * A ByteSource over the stored chunks of a file (complete, or the chunks a read needs of a sparse one); every chunk
   * is checked against its SHA-256. `recent` keeps the last two verified chunks (shared by the readers of one file:
   * a stored chunk never changes).
   */
  function storedSource(meta: FileMeta, recent = new Map<number, Uint8Array>()): ByteSource {
    const { url, chunkBytes: C0 } = meta;
    const size = meta.size!;
    const chunk = async (i: number): Promise<Uint8Array> => {
      const hit = recent.get(i);
      if (hit) return hit;
      const data = (await kv.get(ck(url, i))) as Uint8Array | undefined;
      const want = Math.min(C0, size - i * C0);
      if (!data || data.byteLength !== want || (await sha256Hex(data)) !== meta.hashes[i]) {
        await remove(url);
        throw new CorruptCheckpoint(`${url}: stored chunk ${i} is ${data ? 'damaged (its SHA-256 differs)' : 'missing'}; ` +
          'the file was removed from the cache: load the model again to re-download it');
      }
      recent.set(i, data);
      if (recent.size > 2) recent.delete(recent.keys().next().value!);
      return data;
    };
    return {
      name: url,
      size: async () => size,
      async read(offset, length) {
        if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
          throw new InvalidArgument(`${url}: read(${offset}, ${length}) needs non-negative integer offset and length`);
        }
        if (offset + length > size)
          throw new CorruptCheckpoint(`${url}: needs bytes ${offset}..${offset + length} but the file has ${size}; re-download it`);
        const out = new Uint8Array(length);
        for (let at = offset; at < offset + length;) {
          const i = Math.floor(at / C0);
          const data = await chunk(i);
          const from = at - i * C0;
          const n = Math.min(data.byteLength - from, offset + length - at);
          out.set(data.subarray(from, from + n), at - offset);
          at += n;
        }
        return out;
      },
    };
  }

  /** One meta update at a time per URL (concurrent reads of one file add chunks to one meta). */
  const locks = new Map<string, Promise<unknown>>();
  const locked = <T>(url: string, fn: () => Promise<T>): Promise<T> => {
    const p = (locks.get(url) ?? Promise.resolve()).catch(() => {}).then(fn);
    locks.set(url, p);
    return p.finally(() => {
      if (locks.get(url) === p) locks.delete(url);
    });
  };

  /**
   * `url` read in place: the chunks a read touches are downloaded (one Range request per run of missing chunks)
   * and kept, the rest of the file never. A complete file is read as stored; a server that ignores Range gives
   * the whole file (stored whole).
   */
  async function rangedSource(url: string, o: SourceOptions): Promise<ByteSource> {
    const first = (await kv.get(mk(url))) as FileMeta | undefined;
    if (first?.complete) return storedSource(first);
    let whole: ByteSource | null = null;
    const recent = new Map<number, Uint8Array>();
    const metaOf = async () => (await kv.get(mk(url))) as FileMeta | undefined;

    /** Downloads chunks [i0, i1] (i1 inclusive; clipped to the file once its size is known) into the store. */
    const fetchRun = (i0: number, i1: number) => locked(url, () => againIfDropped(() => fetchRunOnce(i0, i1)));
    const fetchRunOnce = async (i0: number, i1: number) => {
      let meta = await metaOf();
      const C0 = meta && !meta.missing ? meta.chunkBytes : C;
      if (meta?.complete) return;
      const a = i0 * C0;
      const b = meta?.size != null ? Math.min((i1 + 1) * C0, meta.size) - 1 : (i1 + 1) * C0 - 1;
      if (meta?.size != null && a >= meta.size) return;
      let res: Response;
      try {
        res = await doFetch(url, { headers: { ...opts.headers, Range: `bytes=${a}-${b}` }, signal: o.signal });
      } catch (e) {
        if (o.signal?.aborted) throw new Cancelled(`reading ${url} was cancelled; the chunks read so far are kept`);
        // offline or out of reach: a file the server lacked when last asked is still taken as lacking, as download() does
        if (meta?.missing) throw notFoundError(`${url} was not on the server when last asked (and it cannot be asked now)`, 404);
        if (e instanceof RmasError) throw e;
        throw new DownloadFailed(`${url}: network error (${(e as Error).message}); check the connection and load again`);
      }
      if (res.status === 404 || res.status === 410) {
        await remove(url);
        await kv.setMany([[mk(url), { url, size: null, chunkBytes: C, hashes: [], complete: false, storedAt: Date.now(), missing: true }]]);
        throw notFoundError(`${url} does not exist (HTTP ${res.status}); check the URL, or that the repository has this file`, res.status);
      }
      if (res.status === 200) {
        // no Range support: the whole file, stored as download() stores it (from the start)
        void res.body?.cancel();
        if (meta) await remove(url);
        whole = storedSource(await download(url, o));
        return;
      }
      if (res.status !== 206) {
        void res.body?.cancel();
        throw Object.assign(
          new DownloadFailed(
            `${url}: HTTP ${res.status} ${res.statusText}; ` +
              (res.status === 401 || res.status === 403
                ? 'the repository is gated or private: accept its terms and give an access token'
                : 'check the URL and load again later'),
          ),
          { status: res.status },
        );
      }
      const cr = parseContentRange(res.headers.get('content-range'));
      if (!cr || cr.total === undefined || cr.start !== a || (meta?.size != null && cr.total !== meta.size)) {
        void res.body?.cancel();
        await remove(url);
        throw new DownloadFailed(`${url}: the server answered bytes ${res.headers.get('content-range')} to a request for ${a}-${b} of a ` +
          `${meta?.size ?? 'new'}-byte file (the file changed on the server, or the server is broken); load again`);
      }
      const total = cr.total;
      let body: Uint8Array;
      try {
        body = new Uint8Array(await res.arrayBuffer());
      } catch (e) {
        if (o.signal?.aborted) throw new Cancelled(`reading ${url} was cancelled; the chunks read so far are kept`);
        throw dropped(new DownloadFailed(
          `${url}: the connection dropped while reading bytes ${a}-${b} (${(e as Error).message}); load again: the chunks read so far are kept`,
        ));
      }
      const end = Math.min(b, total - 1);
      if (body.byteLength !== end - a + 1) {
        await remove(url);
        throw new DownloadFailed(`${url}: bytes ${a}-${end} came back as ${body.byteLength} bytes; load again`);
      }
      const base: FileMeta =
        meta && !meta.missing
          ? meta
          : { url, size: total, chunkBytes: C0, hashes: [], complete: false, storedAt: Date.now(), sparse: true };
      const hashes = [...base.hashes];
      const entries: [string, unknown][] = [];
      for (let i = i0; i * C0 <= end; i++) {
        const part = body.slice(i * C0 - a, Math.min((i + 1) * C0, end + 1) - a);
        while (hashes.length < i) hashes.push('');
        hashes[i] = await sha256Hex(part);
        entries.push([ck(url, i), part]);
      }
      const chunks = Math.ceil(total / C0);
      const complete = hashes.length === chunks && hashes.every(Boolean);
      const next: FileMeta = { ...base, size: total, hashes, sparse: true, complete, storedAt: Date.now() };
      try {
        await kv.setMany([...entries, [mk(url), next]]);
      } catch (e) {
        if (isQuota(e)) {
          throw new QuotaExceeded(
            `storing ${end - a + 1} bytes of ${url} needs more space than the browser allows this site ` +
              `(${storedBytes(base)} bytes of it are stored and kept); delete models or checkpoints you no longer need in the cache manager, then load again (${(e as Error).message})`,
          );
        }
        throw e;
      }
    };

    let sizeKnown = first?.size ?? null;
    const ensure = async (offset: number, length: number) => {
      if (sizeKnown === null) {
        // the first request tells the size (Content-Range): it asks for the chunks this read touches
        await fetchRun(Math.floor(offset / C), Math.floor((offset + Math.max(length, 1) - 1) / C));
        sizeKnown = (await metaOf())?.size ?? null;
      }
      const meta = await metaOf();
      if (!meta || meta.complete) return;
      const C0 = meta.chunkBytes;
      const lastChunk = Math.floor((Math.min(offset + length, meta.size!) - 1) / C0);
      let run: number | null = null;
      for (let i = Math.floor(offset / C0); i <= lastChunk + 1; i++) {
        const missing = i <= lastChunk && !meta.hashes[i];
        if (missing && run === null) run = i;
        if (!missing && run !== null) {
          await fetchRun(run, i - 1);
          run = null;
        }
      }
    };
    return {
      name: url,
      async size() {
        if (whole) return whole.size();
        const known = (await metaOf())?.size;
        if (known != null) return known;
        await ensure(0, 1);
        if (whole) return (whole as ByteSource).size();
        return (await metaOf())!.size!;
      },
      async read(offset, length) {
        if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
          throw new InvalidArgument(`${url}: read(${offset}, ${length}) needs non-negative integer offset and length`);
        }
        if (!whole) await ensure(offset, length);
        if (whole) return (whole as ByteSource).read(offset, length);
        return storedSource((await metaOf())!, recent).read(offset, length);
      },
    };
  }

  const cache = {
    /** `url` read in place (rangedSource): only the chunks its reads touch are downloaded and kept. */
    ranged: (url: string, o: SourceOptions = {}) => rangedSource(url, o),
    /**
     * Bytes offset..offset + length of `url` (clipped to the file; default to its end) and the file's size, if the
     * cache holds every chunk they lie in (checked), else null; never the network (an offline plan reads a
     * checkpoint's header this way).
     */
    async peek(url: string, offset: number, length?: number): Promise<{ bytes: Uint8Array; size: number } | null> {
      const meta = (await kv.get(mk(url))) as FileMeta | undefined;
      if (!meta || meta.missing || meta.size === null || offset >= meta.size) return null;
      const n = Math.min(length ?? meta.size, meta.size - offset);
      if (!meta.complete) {
        for (let i = Math.floor(offset / meta.chunkBytes); i * meta.chunkBytes < offset + n; i++) if (!meta.hashes[i]) return null;
      }
      return { bytes: await storedSource(meta).read(offset, n), size: meta.size };
    },
    /** The file at `url`, from the cache or downloaded into it first. Parallel calls for one URL share a download. */
    async source(url: string, o: SourceOptions = {}): Promise<ByteSource> {
      let p = inflight.get(url);
      if (!p) {
        // a whole download that broke off goes on from its stored chunks, twice, before the error reaches the caller
        p = againIfDropped(() => download(url, o)).finally(() => inflight.delete(url));
        inflight.set(url, p);
      }
      return storedSource(await p);
    },
    /** A whole small file (config.json, tokenizer.json). */
    async bytes(url: string, o: SourceOptions = {}): Promise<Uint8Array> {
      const s = await cache.source(url, o);
      return s.read(0, await s.size());
    },
    /**
     * `(file) => ByteSource` for the files of the folder `root`, downloading through the cache on first use:
     * the `open` option of loadDecoderFromUrl, loadTokenizerFromUrl and openCheckpoint. A missing file is a
     * CorruptCheckpoint marked not-found (what those loaders probe optional files with).
     */
    opener(root: string, o: { onProgress?: (file: string, loaded: number, total: number) => void; signal?: AbortSignal;
      sha256?: Record<string, string>; sizes?: Record<string, number> } = {}) {
      return (file: string): ByteSource => {
        const url = new URL(file, root.endsWith('/') ? root : `${root}/`).href;
        let src: Promise<ByteSource> | undefined;
        const open = () => (src ??= cache.source(url, {
          onProgress: o.onProgress && ((l, t) => o.onProgress!(file, l, t)), signal: o.signal,
          sha256: o.sha256?.[file], expectedSize: o.sizes?.[file],
        }).catch((e) => {
          src = undefined;
          if (isMissingFile(e)) throw Object.assign(new CorruptCheckpoint((e as Error).message), { notFound: true });
          throw e;
        }));
        return { name: url, size: async () => (await open()).size(), read: async (a, n) => (await open()).read(a, n) };
      };
    },
    async list(): Promise<CachedFile[]> {
      const metas = await Promise.all((await kv.keys()).filter((k) => k.startsWith('m|')).map((k) => kv.get(k) as Promise<FileMeta>));
      return metas.filter((m) => m && !m.missing).map((m) => ({
        url: m.url, size: m.size, complete: m.complete, storedAt: m.storedAt, ...(m.sparse ? { sparse: true } : {}),
        bytes: m.complete ? m.size! : storedBytes(m),
      })).sort((a, b) => a.url.localeCompare(b.url));
    },
    /** Whether the server answered 404 for `url` when last asked (what a cache-only load may take as "not there"). */
    async knownMissing(url: string): Promise<boolean> {
      return ((await kv.get(mk(url))) as FileMeta | undefined)?.missing === true;
    },
    remove,
    clear: () => kv.clear(),
    /** navigator.storage.estimate() and persisted(); zeros where the Storage API is absent. */
    async usage(): Promise<{ usage: number; quota: number; persisted: boolean }> {
      const st = (globalThis as { navigator?: { storage?: StorageManager } }).navigator?.storage;
      const e = st?.estimate ? await st.estimate() : {};
      return { usage: e.usage ?? 0, quota: e.quota ?? 0, persisted: st?.persisted ? await st.persisted() : false };
    },
    /** Asks the browser to keep this site's storage under pressure (navigator.storage.persist()). */
    async persist(): Promise<boolean> {
      const st = (globalThis as { navigator?: { storage?: StorageManager } }).navigator?.storage;
      return st?.persist ? st.persist() : false;
    },
  };
  return cache;
}

export type ModelCache = ReturnType<typeof modelCache>;
