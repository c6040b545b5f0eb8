/**
 * Random-access byte sources for checkpoint readers: an in-memory buffer or Blob, a local file (Node),
 * or a URL read with HTTP Range requests. Readers fetch the header first and then one tensor at a time,
 * so a multi-GB checkpoint is never held in memory whole (except from a server that ignores Range,
 * where the one full download is kept, up to `maxFullBytes`).
 */
import { CorruptCheckpoint, DownloadFailed, InvalidArgument, RmasError } from '../errors';
import { nodeImport } from '../util/node-import';

export interface ByteSource {
  /** The file name or URL, used in error messages. */
  readonly name: string;
  size(): Promise<number>;
  /** Exactly `length` bytes from `offset`; rejects reads past the end. */
  read(offset: number, length: number): Promise<Uint8Array>;
  close?(): Promise<void>;
}

/** A CorruptCheckpoint for a file that is not there, marked so that callers can probe for optional files. */
const notFound = (msg: string) => Object.assign(new CorruptCheckpoint(msg), { notFound: true });
export const isNotFound = (e: unknown) => e instanceof CorruptCheckpoint && (e as { notFound?: boolean }).notFound === true;

function checkRange(name: string, offset: number, length: number, size: number) {
  if (!Number.isSafeInteger(offset) || !Number.isSafeInteger(length) || offset < 0 || length < 0) {
    throw new InvalidArgument(`${name}: read(${offset}, ${length}) needs non-negative integer offset and length`);
  }
  if (offset + length > size) {
    throw new CorruptCheckpoint(
      `${name}: needs bytes ${offset}..${offset + length} but the file has only ${size} bytes; ` +
        'the file is truncated: re-download it',
    );
  }
}

/** A source over bytes already in memory (a Uint8Array, or a Blob/File from an <input> or drag-and-drop). */
export function memorySource(data: Uint8Array | Blob, name = 'memory'): ByteSource {
  if (data instanceof Uint8Array) {
    return {
      name,
      size: async () => data.byteLength,
      read: async (offset, length) => {
        checkRange(name, offset, length, data.byteLength);
        return data.subarray(offset, offset + length);
      },
    };
  }
  const blob = data;
  const label = name === 'memory' && 'name' in blob && typeof blob.name === 'string' ? blob.name : name;
  return {
    name: label,
    size: async () => blob.size,
    read: async (offset, length) => {
      checkRange(label, offset, length, blob.size);
      return new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer());
    },
  };
}

type FsPromises = typeof import('node:fs/promises');
type FileHandle = Awaited<ReturnType<FsPromises['open']>>;

/**
 * A local file in Node, opened lazily on first use. A missing file raises CorruptCheckpoint naming the path
 * (a checkpoint folder that lacks a file it needs is incomplete).
 */
export function fileSource(path: string): ByteSource {
  let handle: Promise<FileHandle> | undefined;
  let size: number | undefined;
  const open = () =>
    (handle ??= nodeImport('node:fs/promises')
      .then((fs) => fs.open(path, 'r'))
      .catch((e: NodeJS.ErrnoException) => {
        handle = undefined;
        if (e.code === 'ENOENT')
          throw notFound(`${path} does not exist; check the path, or re-download the checkpoint so that the file is there`);
        throw new CorruptCheckpoint(`${path} cannot be opened (${e.code ?? e.message}); check the path and its permissions`);
      }));
  const src: ByteSource = {
    name: path,
    async size() {
      if (size === undefined) {
        const st = await (await open()).stat();
        // a folder opens for reading too, and fails only at the first read (EISDIR)
        if (!st.isFile()) throw new CorruptCheckpoint(`${path} is a folder or a device, not a file; check the path`);
        size = Number(st.size);
      }
      return size;
    },
    async read(offset, length) {
      checkRange(path, offset, length, await src.size());
      const fh = await open();
      const out = new Uint8Array(length);
      let done = 0;
      while (done < length) {
        const { bytesRead } = await fh.read(out, done, length - done, offset + done).catch((e: NodeJS.ErrnoException) => {
          throw new CorruptCheckpoint(`${path} cannot be read (${e.code ?? e.message}); check the file and its permissions`);
        });
        if (bytesRead === 0) {
          throw new CorruptCheckpoint(
            `${path}: the file ended at byte ${offset + done} while reading; it changed or is truncated: re-download it`,
          );
        }
        done += bytesRead;
      }
      return out;
    },
    async close() {
      const h = handle;
      handle = undefined;
      if (h) await (await h).close();
    },
  };
  return src;
}

export interface UrlSourceOptions {
  /** Injected fetch (tests, auth headers); defaults to globalThis.fetch. */
  fetch?: typeof fetch;
  /** Extra request headers (e.g. Authorization for gated Hugging Face repos). */
  headers?: Record<string, string>;
  /** Largest whole-file download accepted when the server ignores Range requests (default 2 GiB). */
  maxFullBytes?: number;
}

/** Parses `bytes a-b/total` (total may be `*`). */
export function parseContentRange(v: string | null): { start: number; end: number; total: number | undefined } | undefined {
  const m = v ? /^bytes\s+(\d+)-(\d+)\/(\d+|\*)$/i.exec(v.trim()) : null;
  if (!m) return undefined;
  return { start: Number(m[1]), end: Number(m[2]), total: m[3] === '*' ? undefined : Number(m[3]) };
}

/**
 * A URL read with `Range: bytes=a-b` requests. Each response must be 206 with a Content-Range that matches
 * the request. A server that answers 200 (ignores ranges) is served by one full download kept in memory.
 */
export function urlSource(url: string, opts: UrlSourceOptions = {}): ByteSource {
  const doFetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
  const maxFull = opts.maxFullBytes ?? 2 ** 31;
  let size: number | undefined;
  let full: Promise<Uint8Array> | undefined; // set once we know the server ignores ranges

  const get = async (range?: [number, number]) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (range) headers.Range = `bytes=${range[0]}-${range[1]}`;
    let res: Response;
    try {
      res = await doFetch(url, { headers });
    } catch (e) {
      // the network, not the file: nothing was read, so nothing can be corrupt (a fetch's own named error passes as it is)
      if (e instanceof RmasError) throw e;
      throw new DownloadFailed(`${url}: the request failed (${(e as Error).message}); check the URL and the network`);
    }
    if (res.status === 404 || res.status === 410) {
      throw notFound(`${url} does not exist (HTTP ${res.status}); check the URL, or that the repository has this file`);
    }
    if (!res.ok) {
      throw new DownloadFailed(
        `${url}: HTTP ${res.status} ${res.statusText}; check the URL, access rights (gated repos need a token) and the server`,
      );
    }
    return res;
  };

  const readFull = async (res: Response): Promise<Uint8Array> => {
    const declared = Number(res.headers.get('content-length') ?? NaN);
    if (declared > maxFull) {
      await res.body?.cancel();
      throw new CorruptCheckpoint(
        `${url}: the server ignores HTTP Range requests and the file is ${declared} bytes, more than the ` +
          `${maxFull} allowed for a whole download; download the file and open it locally, or use a server that supports ranges`,
      );
    }
    const buf = new Uint8Array(await res.arrayBuffer());
    if (buf.byteLength > maxFull) {
      throw new CorruptCheckpoint(
        `${url}: the server ignores HTTP Range requests and sent ${buf.byteLength} bytes, more than ${maxFull}; download the file and open it locally`,
      );
    }
    if (Number.isFinite(declared) && declared !== buf.byteLength) {
      throw new CorruptCheckpoint(
        `${url}: the server announced ${declared} bytes but sent ${buf.byteLength}; the download was cut off: retry`,
      );
    }
    size = buf.byteLength;
    return buf;
  };

  const src: ByteSource = {
    name: url,
    async size() {
      if (size !== undefined) return size;
      if (full) return (await full).byteLength;
      // A one-byte range probe both reports the total size and tells whether ranges are honoured.
      const res = await get([0, 0]);
      if (res.status === 206) {
        const cr = parseContentRange(res.headers.get('content-range'));
        await res.body?.cancel();
        if (cr?.total !== undefined) return (size = cr.total);
        // Browsers hide Content-Range unless CORS exposes it; a HEAD's Content-Length still gives the size.
        const head = await doFetch(url, { method: 'HEAD', headers: opts.headers }).catch(() => undefined);
        const len = Number(head?.ok ? head.headers.get('content-length') ?? NaN : NaN);
        if (Number.isSafeInteger(len)) return (size = len);
        throw new CorruptCheckpoint(
          `${url}: the server answered a Range request without the total size in Content-Range ` +
            `(got "${res.headers.get('content-range')}") nor a Content-Length to HEAD, so the file size is unknown; ` +
            'use a server that reports it, or download the file and open it locally',
        );
      }
      full = readFull(res);
      return (await full).byteLength;
    },
    async read(offset, length) {
      checkRange(url, offset, length, await src.size());
      if (full) return (await full).subarray(offset, offset + length);
      if (length === 0) return new Uint8Array(0);
      // a range read is idempotent: a connection dropped mid-body is asked again, twice, before it is an error
      for (let attempt = 0; ; attempt++) {
        try {
          return await readRange(offset, length);
        } catch (e) {
          if (!(e instanceof TypeError) || attempt >= 2) {
            if (e instanceof TypeError)
              throw new DownloadFailed(`${url}: the connection dropped while reading bytes ${offset}-${offset + length - 1} ` +
                `(${e.message}) three times; check the network and load again`);
            throw e;
          }
        }
      }
    },
  };

  /** One Range request's bytes (a server that ignores ranges: from the one full download). */
  async function readRange(offset: number, length: number): Promise<Uint8Array> {
    const res = await get([offset, offset + length - 1]);
    if (res.status !== 206) {
      full = readFull(res);
      return (await full).subarray(offset, offset + length);
    }
    // A missing Content-Range (hidden by CORS) is accepted; the length check below still applies.
    const raw = res.headers.get('content-range');
    const cr = parseContentRange(raw);
    if (raw !== null && (!cr || cr.start !== offset || cr.end !== offset + length - 1)) {
      await res.body?.cancel();
      throw new CorruptCheckpoint(
        `${url}: asked for bytes ${offset}-${offset + length - 1}, the server answered Content-Range ` +
          `"${res.headers.get('content-range')}"; the server mishandles ranges: download the file and open it locally`,
      );
    }
    const buf = new Uint8Array(await res.arrayBuffer());
    if (buf.byteLength !== length) {
      throw new CorruptCheckpoint(
        `${url}: expected ${length} bytes at ${offset}, received ${buf.byteLength}; the download was cut off: retry`,
      );
    }
    return buf;
  }
  return src;
}

export const isUrl = (s: string) => /^(https?|blob|data):/i.test(s);

/** Resolves `file` against a base folder path or URL (the folder of a model, or its index file's folder). */
export function resolveSource(base: string, file: string, opts?: UrlSourceOptions): ByteSource {
  if (isUrl(base)) return urlSource(new URL(file, base.endsWith('/') ? base : `${base}/`).href, opts);
  return fileSource(base ? `${base.replace(/\/+$/, '')}/${file}` : file);
}

/** Reads a whole (small) source, e.g. an index JSON. */
export async function readAll(src: ByteSource): Promise<Uint8Array> {
  return src.read(0, await src.size());
}
