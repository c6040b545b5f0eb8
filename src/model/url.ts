/**
 * A decoder from a Hugging Face model folder served over HTTP (the browser path; no node:fs):
 * config.json, then the sharded index or model.safetensors, read with Range requests through urlSource.
 * A URL ending in `.gguf` (or `opts.gguf`) names a llama.cpp GGUF file instead: its header and then one
 * tensor at a time are read by Range through the same fetch (loadGgufDecoderFromUrl).
 */
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint } from '../errors';
import { readGgufHeader } from '../formats/gguf';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { type ByteSource, type UrlSourceOptions, isNotFound, readAll, urlSource } from '../formats/sources';
import type { Backend } from '../tensor/backend';
import { parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import { type GgufDecoder, loadDecoderFromGguf } from './gguf';
import { type LoadOptions, loadDecoderWeights } from './weights';

/** `base` as an absolute folder URL ending in '/'; relative bases resolve against the page or worker location. */
export function folderUrl(base: string): string {
  const here = (globalThis as { location?: { href: string } }).location?.href;
  let u: URL;
  try {
    u = here ? new URL(base, here) : new URL(base);
  } catch {
    throw new MissingCheckpoint(
      `model URL '${base}' is not a URL and there is no page location to resolve it against; give an absolute http(s) URL`,
    );
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
export async function fetchModelFile(
  base: string,
  file: string,
  opts: UrlLoadOptions & { optional?: boolean } = {},
): Promise<Uint8Array | undefined> {
  const url = new URL(file, folderUrl(base)).href;
  try {
    return await readAll(opts.open ? opts.open(file) : urlSource(url, { ...opts, fetch: modelFetch(opts.fetch) }));
  } catch (e) {
    if (isNotFound(e) && opts.optional) return undefined;
    throw e;
  }
}

/** Whether a model URL names a GGUF file (its path ends in `.gguf`; query and fragment aside). */
export function isGgufUrl(url: string): boolean {
  return /\.gguf$/i.test(url.replace(/[?#].*$/, ''));
}

/** `url` as an absolute file URL (relative ones resolve against the page or worker location). */
export function fileUrl(url: string): string {
  return folderUrl(url).replace(/\/$/, '');
}

/**
 * The folder a GGUF role reads its tokenizer, generation_config.json and (when none is given) its inner
 * link from: GGUF repos ship no tokenizer.json, so the role must name one; InvalidArgument says how.
 */
export function ggufTokenizerFolder(what: string, role: { model: string; tokenizer?: string | undefined }): string {
  if (!role.tokenizer) {
    throw new InvalidArgument(`${what}: model ${role.model} is a GGUF file, which brings no tokenizer.json; add tokenizer, the URL of a ` +
      'Hugging Face folder with the same model\'s tokenizer files (e.g. https://huggingface.co/Qwen/Qwen3-1.7B/resolve/main/)');
  }
  return folderUrl(role.tokenizer);
}

/**
 * A ByteSource that keeps the contiguous prefix read until `seal()` (the GGUF parser's chunks from offset 0)
 * and serves later reads inside it from memory, fetching only the part past it, so that a file's Range reads
 * add up to its size once. `drop()` lets the kept bytes go.
 */
function prefixSource(src: ByteSource): ByteSource & { seal(): void; drop(): void } {
  let kept = new Uint8Array(0);
  let recording = true;
  return {
    name: src.name,
    size: () => src.size(),
    async read(offset, length) {
      const end = offset + length;
      if (end <= kept.length) return kept.slice(offset, end);
      const from = Math.max(offset, kept.length);
      const tail = await src.read(from, end - from);
      const out = from === offset ? tail : new Uint8Array(length);
      if (from !== offset) { out.set(kept.subarray(offset), 0); out.set(tail, from - offset); }
      if (recording && offset <= kept.length) {
        const grown = new Uint8Array(end);
        grown.set(kept, 0);
        grown.set(out, offset);
        kept = grown;
      }
      return out;
    },
    seal() { recording = false; },
    drop() { recording = false; kept = new Uint8Array(0); },
    ...(src.close ? { close: () => src.close!() } : {}),
  };
}

/**
 * A decoder from the GGUF file at `url` (q8_0/q4_0 tensors pass through as stored, others as readGgufTensor
 * converts them); reads go through `opts.fetch` by Range (or `opts.open`), so the caller's progress and cache apply.
 * MissingCheckpoint names a URL that does not exist.
 */
export async function loadGgufDecoderFromUrl(
  url: string,
  backend: Backend,
  opts: LoadOptions & UrlLoadOptions & { what?: string } = {},
): Promise<GgufDecoder & { decoder: Decoder }> {
  const abs = fileUrl(url);
  // `open` names files relative to the GGUF's folder (the model cache's opener of that folder)
  const src = prefixSource(
    opts.open ? opts.open(decodeURIComponent(abs.replace(/^.*\//, ''))) : urlSource(abs, { ...opts, fetch: modelFetch(opts.fetch) }),
  );
  let file;
  try {
    file = await readGgufHeader(src, abs);
  } catch (e) {
    if (!isNotFound(e)) throw e;
    throw new MissingCheckpoint(
      `${opts.what ?? 'model'}: cannot fetch ${abs} (${(e as Error).message}); give the URL of a .gguf file (…/resolve/main/<name>.gguf on the hub)`,
    );
  }
  src.seal();
  try {
    const g = await loadDecoderFromGguf(file, backend, opts.quantize ? { quantize: opts.quantize } : {});
    return { ...g, decoder: new Decoder(g.config, g.weights) };
  } finally {
    src.drop();
  }
}

/**
 * A decoder from the model folder URL `base` (relative URLs resolve against the page or worker), or from a GGUF
 * file when `base` ends in `.gguf` or `opts.gguf` names one; MissingCheckpoint names the missing URL.
 */
export async function loadDecoderFromUrl(
  base: string,
  backend: Backend,
  opts: LoadOptions & UrlLoadOptions & { what?: string; gguf?: string } = {},
): Promise<Decoder> {
  if (opts.gguf !== undefined || isGgufUrl(base)) return (await loadGgufDecoderFromUrl(opts.gguf ?? base, backend, opts)).decoder;
  const root = folderUrl(base);
  const configUrl = `${root}config.json`;
  let bytes: Uint8Array;
  try {
    bytes = (await fetchModelFile(root, 'config.json', opts))!;
  } catch (e) {
    if (!(e instanceof CorruptCheckpoint)) throw e;
    throw new MissingCheckpoint(
      `${opts.what ?? 'model'}: cannot fetch ${configUrl} (${e.message}); give the URL of a Hugging Face model folder`,
    );
  }
  const config = parseDecoderConfig(new TextDecoder().decode(bytes), configUrl);
  let store: Awaited<ReturnType<typeof openCheckpoint>>;
  try {
    store = await openCheckpoint(root, { ...opts, fetch: modelFetch(opts.fetch) });
  } catch (e) {
    if (e instanceof CorruptCheckpoint && /has neither/.test(e.message))
      throw new MissingCheckpoint(`${opts.what ?? 'model'}: ${e.message}`);
    throw e;
  }
  try {
    return new Decoder(config, await loadDecoderWeights(config, store, backend, opts));
  } finally {
    await store.close();
  }
}
