/**
 * A decoder from a Hugging Face model folder served over HTTP (the browser path; no node:fs):
 * config.json, then the sharded index or model.safetensors, read with Range requests through urlSource.
 */
import { CorruptCheckpoint, MissingCheckpoint } from '../errors';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { type ByteSource, type UrlSourceOptions, isNotFound, readAll, urlSource } from '../formats/sources';
import type { Backend } from '../tensor/backend';
import { parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import { type LoadOptions, loadDecoderWeights } from './weights';

/** `base` as an absolute folder URL ending in '/'; relative bases resolve against the page or worker location. */
export function folderUrl(base: string): string {
  const here = (globalThis as { location?: { href: string } }).location?.href;
  let u: URL;
  try {
    u = here ? new URL(base, here) : new URL(base);
  } catch {
    throw new MissingCheckpoint(`model URL '${base}' is not a URL and there is no page location to resolve it against; give an absolute http(s) URL`);
  }
  return u.href.endsWith('/') ? u.href : `${u.href}/`;
}

/**
 * `fetch` that reports a missing file as 404 also where the server answers it with its HTML page (a
 * single-page-app fallback, as Vite's dev server and many static hosts do), since no model file is HTML.
 */
export function modelFetch(inner: typeof fetch = globalThis.fetch.bind(globalThis)): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (res.ok && /^text\/html/i.test(res.headers.get('content-type') ?? '') && !/\.html?$/i.test(new URL(url, 'http://x/').pathname)) {
      await res.body?.cancel();
      return new Response(null, { status: 404, statusText: 'Not Found (the server sent its HTML page instead)' });
    }
    return res;
  };
}

export interface UrlLoadOptions extends UrlSourceOptions {
  /**
   * How a file name of the folder becomes a source (e.g. the model cache's `opener(root)`, so that a worker
   * reads through IndexedDB); default: urlSource with Range requests. A missing file must raise a
   * CorruptCheckpoint that `isNotFound` recognizes.
   */
  open?: (file: string) => ByteSource;
}

/** Fetches a whole small file of a model folder (config or tokenizer JSON); undefined on 404 when `optional`. */
export async function fetchModelFile(base: string, file: string, opts: UrlLoadOptions & { optional?: boolean } = {}): Promise<Uint8Array | undefined> {
  const url = new URL(file, folderUrl(base)).href;
  try {
    return await readAll(opts.open ? opts.open(file) : urlSource(url, { ...opts, fetch: modelFetch(opts.fetch) }));
  } catch (e) {
    if (isNotFound(e) && opts.optional) return undefined;
    throw e;
  }
}

/** A decoder from the model folder URL `base` (relative URLs resolve against the page or worker); MissingCheckpoint names the missing URL. */
export async function loadDecoderFromUrl(
  base: string,
  backend: Backend,
  opts: LoadOptions & UrlLoadOptions & { what?: string } = {},
): Promise<Decoder> {
  const root = folderUrl(base);
  const configUrl = `${root}config.json`;
  let bytes: Uint8Array;
  try {
    bytes = (await fetchModelFile(root, 'config.json', opts))!;
  } catch (e) {
    if (!(e instanceof CorruptCheckpoint)) throw e;
    throw new MissingCheckpoint(`${opts.what ?? 'model'}: cannot fetch ${configUrl} (${e.message}); give the URL of a Hugging Face model folder`);
  }
  const config = parseDecoderConfig(new TextDecoder().decode(bytes), configUrl);
  let store: Awaited<ReturnType<typeof openCheckpoint>>;
  try {
    store = await openCheckpoint(root, { ...opts, fetch: modelFetch(opts.fetch) });
  } catch (e) {
    if (e instanceof CorruptCheckpoint && /has neither/.test(e.message)) throw new MissingCheckpoint(`${opts.what ?? 'model'}: ${e.message}`);
    throw e;
  }
  try {
    return new Decoder(config, await loadDecoderWeights(config, store, backend, opts));
  } finally {
    await store.close();
  }
}
