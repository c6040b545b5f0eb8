/** Loading a tokenizer from a Hugging Face model folder served over HTTP (the browser path; no node:fs). */
import { CorruptCheckpoint, TokenizerError } from '../errors.ts';
import { type ByteSource, isNotFound, readAll, urlSource } from '../formats/sources.ts';
import { modelFetch } from '../model/url.ts';
import { loadTokenizer, parseJsonFile, type Tokenizer } from './tokenizer.ts';

/**
 * Fetches tokenizer.json (required), tokenizer_config.json and the chat template (chat_template.jinja,
 * else chat_template.json, else tokenizer_config's; optional: a 404 is fine) from the folder URL `base`.
 */
export async function loadTokenizerFromUrl(
  base: string,
  opts: { fetch?: typeof fetch; headers?: Record<string, string>; open?: (file: string) => ByteSource } = {},
): Promise<Tokenizer> {
  const here = (globalThis as { location?: { href: string } }).location?.href;
  let root: string;
  try {
    root = (here ? new URL(base, here) : new URL(base)).href.replace(/\/?$/, '/');
  } catch {
    throw new TokenizerError(
      `tokenizer URL '${base}' is not a URL and there is no page location to resolve it against; give an absolute http(s) URL`,
    );
  }
  const get = async (file: string, optional: boolean): Promise<Uint8Array | undefined> => {
    try {
      // `open` (e.g. the model cache's opener) reads the folder's files another way; default: HTTP.
      return await readAll(opts.open ? opts.open(file) : urlSource(root + file, { ...opts, fetch: modelFetch(opts.fetch) }));
    } catch (e) {
      if (optional && isNotFound(e)) return undefined;
      if (!(e instanceof CorruptCheckpoint)) throw e;
      throw new TokenizerError(
        optional
          ? `cannot fetch ${root}${file} (${e.message})`
          : `cannot fetch ${root}${file} (${e.message}); only fast-tokenizer folders with tokenizer.json are supported: check the URL`,
      );
    }
  };
  const [json, config, jinja, templateJson] = await Promise.all([
    get('tokenizer.json', false), get('tokenizer_config.json', true), get('chat_template.jinja', true), get('chat_template.json', true),
  ]);
  let chatTemplateJinja: Uint8Array | string | undefined = jinja;
  if (chatTemplateJinja === undefined && templateJson !== undefined) {
    const t = parseJsonFile(templateJson, `${root}chat_template.json`).chat_template;
    if (typeof t === 'string') chatTemplateJinja = t;
  }
  return loadTokenizer({
    tokenizerJson: json!,
    ...(config === undefined ? {} : { tokenizerConfig: config }),
    ...(chatTemplateJinja === undefined ? {} : { chatTemplateJinja }),
    source: root,
  });
}
