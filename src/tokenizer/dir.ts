/** Loading a tokenizer from a local Hugging Face model folder (Node only). */
import { TokenizerError, UnsafeModelFile } from '../errors.ts';
import { readModelFile } from '../formats/model-file.ts';
import { loadTokenizer, parseJsonFile, type Tokenizer } from './tokenizer.ts';

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readModelFile(path);
  } catch (e) {
    if (e instanceof UnsafeModelFile) throw e;
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new TokenizerError(`${path} cannot be read (${(e as Error).message}); check its permissions`);
  }
}

/**
 * Read tokenizer.json, tokenizer_config.json (optional) and the chat template from `dir`. The template
 * comes, in transformers' order of precedence, from chat_template.jinja, chat_template.json or
 * tokenizer_config.json.
 */
export async function loadTokenizerFromDir(dir: string): Promise<Tokenizer> {
  const base = dir.replace(/\/+$/, '');
  const [json, config, jinja, templateJson] = await Promise.all(
    ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', 'chat_template.json'].map((f) =>
      readOptional(`${base}/${f}`),
    ),
  );
  if (json === undefined) {
    throw new TokenizerError(
      `${base}/tokenizer.json does not exist; download it with the model (only fast-tokenizer folders with ` +
        'tokenizer.json are supported, not vocab.json + merges.txt or tokenizer.model alone)',
    );
  }
  let chatTemplateJinja = jinja;
  if (chatTemplateJinja === undefined && templateJson !== undefined) {
    const t = parseJsonFile(templateJson, `${base}/chat_template.json`).chat_template;
    if (typeof t === 'string') chatTemplateJinja = t;
  }
  return loadTokenizer({
    tokenizerJson: json,
    ...(config === undefined ? {} : { tokenizerConfig: config }),
    ...(chatTemplateJinja === undefined ? {} : { chatTemplateJinja }),
    source: base,
  });
}
