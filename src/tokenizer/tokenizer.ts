/**
 * Tokenizers and chat templates through transformers.js. Nothing is reimplemented here: the BPE, the
 * pre-tokenizer regexes, added/special tokens and the Jinja renderer are those of
 * @huggingface/transformers (v4: @huggingface/tokenizers + @huggingface/jinja), constructed offline from
 * the parsed JSON objects so that Node (files) and the browser (bytes from IndexedDB) share one path.
 */
import * as HF from '@huggingface/transformers';
import { PreTrainedTokenizer } from '@huggingface/transformers';
import { TemplateLimitExceeded, TokenizerError } from '../errors.ts';
import { CONFIG_LIMITS } from '../model/config.ts';
import { showValue } from '../util/show.ts';
import { checkPatterns } from './patterns.ts';
import { BoundedTemplate } from './template.ts';

/** JSON content as an object, as text, or as the raw bytes of the file. */
export type JsonInput = Record<string, unknown> | string | Uint8Array | ArrayBuffer;

export interface LoadTokenizerOptions {
  /** tokenizer.json (Hugging Face `tokenizers` format). */
  tokenizerJson: JsonInput;
  /** tokenizer_config.json; optional, though without it there is no eos token or chat template. */
  tokenizerConfig?: JsonInput;
  /** Content of chat_template.jinja; takes precedence over tokenizer_config's chat_template, as in transformers. */
  chatTemplateJinja?: string | Uint8Array | ArrayBuffer;
  /** Where the files came from (a folder, a model id), used in error messages. */
  source?: string;
}

export interface ChatMessage {
  role: string;
  content: string;
  [key: string]: unknown;
}

export interface ApplyChatTemplateOptions {
  /** End with the assistant header so that the model continues as the assistant. Default false. */
  addGenerationPrompt?: boolean;
  /** Extra template variables, e.g. `{ enable_thinking: false }` for Qwen3. */
  kwargs?: Record<string, unknown>;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

function toText(input: string | Uint8Array | ArrayBuffer, what: string): string {
  if (typeof input === 'string') return input;
  try {
    return decoder.decode(input instanceof ArrayBuffer ? new Uint8Array(input) : input);
  } catch {
    throw new TokenizerError(`${what} is not valid UTF-8; the file is damaged, download it again`);
  }
}

/** Parse one of the JSON files; `what` names the file (with its folder) for the message. */
export function parseJsonFile(input: JsonInput, what: string): Record<string, unknown> {
  if (typeof input === 'object' && !(input instanceof Uint8Array) && !(input instanceof ArrayBuffer)) {
    if (input === null || Array.isArray(input)) throw new TokenizerError(`${what} must hold a JSON object; download it again`);
    return input;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(toText(input, what));
  } catch (e) {
    if (e instanceof TokenizerError) throw e;
    throw new TokenizerError(`${what} is not valid JSON (${(e as Error).message}); the file is truncated or damaged, download it again`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new TokenizerError(`${what} must hold a JSON object; download it again`);
  }
  return parsed as Record<string, unknown>;
}

type TokenizerClass = new (json: unknown, config: unknown) => PreTrainedTokenizer;

// Mirror AutoTokenizer: the class named by tokenizer_class (without "Fast"), else the base class. Some
// subclasses change behaviour (legacy Llama/SentencePiece handling), so the choice matters for real folders.
function tokenizerClass(config: Record<string, unknown>): TokenizerClass {
  const name = typeof config.tokenizer_class === 'string' ? config.tokenizer_class.replace(/Fast$/, '') : '';
  const cls = (HF as unknown as Record<string, unknown>)[name];
  if (typeof cls === 'function' && (cls === PreTrainedTokenizer || cls.prototype instanceof PreTrainedTokenizer)) {
    return cls as TokenizerClass;
  }
  return PreTrainedTokenizer as unknown as TokenizerClass;
}

/**
 * Refuses a vocabulary that is neither {token: id} (BPE, WordPiece, WordLevel) nor a list of [token, score] (Unigram), and
 * token ids (there and in added_tokens) that are not integers in [0, the vocab_size limit of config.json): transformers.js
 * takes them as they are, so an object came out of encode() as a "token id", and an id of 2^31 made get_vocab() walk
 * 2^31 slots.
 */
function checkIds(json: Record<string, unknown>, what: string): void {
  const limit = CONFIG_LIMITS.vocab_size!;
  const isId = (id: unknown) => Number.isSafeInteger(id) && (id as number) >= 0 && (id as number) < limit;
  const bad = (token: unknown, id: unknown) =>
    new TokenizerError(`${what} maps the token ${showValue(token)} to ${showValue(id)}, which is not a token id (an integer from 0 ` +
      `to ${limit - 1}); the file is damaged, download it again`);
  const vocab = (json.model as { vocab?: unknown }).vocab;
  if (Array.isArray(vocab)) {
    for (const e of vocab) if (!Array.isArray(e) || typeof e[0] !== 'string') throw bad(e, 'a list entry that is not [token, score]');
  } else if (vocab && typeof vocab === 'object') {
    for (const [token, id] of Object.entries(vocab)) if (!isId(id)) throw bad(token, id);
  } else if (vocab !== undefined) {
    throw new TokenizerError(`${what}: model.vocab is ${showValue(vocab)}, neither a {token: id} map nor a list of [token, score]; ` +
      'the file is damaged, download it again');
  }
  const added = json.added_tokens;
  if (Array.isArray(added)) {
    for (const t of added as { id?: unknown; content?: unknown }[]) {
      if (!t || typeof t !== 'object' || !isId(t.id)) throw bad(t?.content, t?.id);
    }
  }
}

/** Build a Tokenizer from file contents (objects, text or bytes). */
export function loadTokenizer(opts: LoadTokenizerOptions): Tokenizer {
  const src = opts.source ? `${opts.source.replace(/\/+$/, '')}/` : '';
  const json = parseJsonFile(opts.tokenizerJson, `${src}tokenizer.json`);
  if (typeof json.model !== 'object' || json.model === null) {
    throw new TokenizerError(
      `${src}tokenizer.json has no "model" section, so it is not a Hugging Face tokenizers file; ` +
        'use the tokenizer.json that ships with the model (save_pretrained of a fast tokenizer writes one)',
    );
  }
  const config = { ...(opts.tokenizerConfig === undefined ? {} : parseJsonFile(opts.tokenizerConfig, `${src}tokenizer_config.json`)) };
  if (opts.chatTemplateJinja !== undefined) config.chat_template = toText(opts.chatTemplateJinja, `${src}chat_template.jinja`);
  checkIds(json, `${src}tokenizer.json`);
  checkPatterns(json, `${src}tokenizer.json`);
  let hf: PreTrainedTokenizer;
  try {
    hf = new (tokenizerClass(config))(json, config);
  } catch (e) {
    throw new TokenizerError(
      `${src}tokenizer.json could not be loaded by transformers.js (${(e as Error).message}); ` +
        'check that it matches tokenizer_config.json and comes from the same model',
    );
  }
  return new Tokenizer(hf, opts.source?.replace(/\/+$/, '') || 'the tokenizer');
}

/** At most this many inputs are remembered per table, each of at most MEMO_CHARS characters. */
const MEMO_ENTRIES = 256;
const MEMO_CHARS = 8192;

/** Keeps `value` under `key` (an input of at most MEMO_CHARS), dropping the oldest entry past MEMO_ENTRIES. */
function remember<T>(memo: Map<string, T>, key: string, value: T, chars: number) {
  if (chars > MEMO_CHARS) return;
  if (memo.size >= MEMO_ENTRIES) memo.delete(memo.keys().next().value!);
  memo.set(key, value);
}

/** The engine's view of a tokenizer: ids in and out, chat rendering, eos ids. */
export class Tokenizer {
  /** Ids that end generation: the tokenizer_config eos token (merge generation_config's list on top). */
  readonly eosTokenIds: number[];
  /** One past the largest id, added tokens included (the model's embedding may be larger). */
  readonly vocabSize: number;
  /**
   * The last texts encoded and rendered, by their inputs (both are pure functions of them). A latent stage's prompt
   * pieces around its slots are the same text in every round and for every question of a task (the chat's tail),
   * and the page renders and encodes a prompt again to show it.
   */
  private readonly encoded = new Map<string, readonly number[]>();
  private readonly rendered = new Map<string, string>();

  constructor(
    /** The underlying transformers.js tokenizer, for anything this wrapper does not cover. */
    readonly hf: PreTrainedTokenizer,
    private readonly source: string,
  ) {
    const eos = hf.eos_token_id as number | undefined;
    this.eosTokenIds = eos === undefined || eos === null ? [] : [eos];
    let max = -1;
    for (const id of hf.get_vocab().values()) if (id > max) max = id;
    this.vocabSize = max + 1;
  }

  /** The chat template in use (chat_template.jinja over tokenizer_config), or null. */
  get chatTemplate(): string | null {
    const t: unknown = this.hf.chat_template;
    return typeof t === 'string' ? t : null;
  }

  /**
   * Text to ids. Added-token strings in the text (`<|im_start|>`, `<|begin_of_text|>`) become their ids.
   * addSpecialTokens (default true, as in transformers) applies the post-processor, e.g. Llama 3's
   * leading <|begin_of_text|>; pass false for text rendered by a chat template that already has it.
   */
  encode(text: string, opts: { addSpecialTokens?: boolean } = {}): number[] {
    const special = opts.addSpecialTokens ?? true;
    const key = `${special ? 1 : 0}${text}`;
    const known = this.encoded.get(key);
    if (known) return [...known];
    const ids = this.named('encode', () => this.hf.encode(text, { add_special_tokens: special }));
    remember(this.encoded, key, ids, text.length);
    return [...ids];
  }

  /**
   * transformers.js reads most of tokenizer.json only when it first encodes (a pre-tokenizer's settings, say): what it
   * throws then is a damaged file's doing, and is named after it.
   */
  private named<T>(what: string, f: () => T): T {
    try {
      return f();
    } catch (e) {
      if (e instanceof TokenizerError) throw e;
      throw new TokenizerError(`${this.source}: the tokenizer failed to ${what} (${(e as Error).message}); tokenizer.json or ` +
        'tokenizer_config.json is damaged: download them again');
    }
  }

  /**
   * Ids to text. cleanUpSpaces defaults to the tokenizer's own setting (as transformers does); pass
   * false to get exactly the bytes the tokens stand for.
   */
  decode(ids: readonly number[], opts: { skipSpecialTokens?: boolean; cleanUpSpaces?: boolean } = {}): string {
    if (ids.length === 0) return '';
    return this.named('decode', () => this.hf.decode([...ids], {
      skip_special_tokens: opts.skipSpecialTokens ?? false,
      ...(opts.cleanUpSpaces === undefined ? {} : { clean_up_tokenization_spaces: opts.cleanUpSpaces }),
    }));
  }

  /**
   * The text of tokens still being generated: decode without special tokens, holding back an incomplete UTF-8
   * tail (the U+FFFD a token cut inside a character decodes to). Once generation ends, decode(ids,
   * { skipSpecialTokens: true }) gives the whole text.
   */
  decodeStreaming(ids: readonly number[]): string {
    return this.decode(ids, { skipSpecialTokens: true }).replace(/\uFFFD+$/, '');
  }

  /** Render (not tokenize) a conversation with the model's chat template. */
  applyChatTemplate(messages: readonly ChatMessage[], opts: ApplyChatTemplateOptions = {}): string {
    const template = this.chatTemplate;
    if (template === null) {
      throw new TokenizerError(
        `${this.source} has no chat template: add chat_template.jinja to the folder or a "chat_template" ` +
          'to tokenizer_config.json, or encode plain text without chat formatting',
      );
    }
    const key = JSON.stringify([messages, opts.addGenerationPrompt ?? false, opts.kwargs ?? {}]);
    const known = this.rendered.get(key);
    if (known !== undefined) return known;
    try {
      // transformers.js renders through its compiled-template cache: the bounded renderer takes the template's place there
      const cache = (this.hf as unknown as { _compiled_template_cache?: unknown })._compiled_template_cache;
      if (!(cache instanceof Map)) throw new Error('transformers.js has no _compiled_template_cache; the bounded renderer cannot be used');
      if (!cache.has(template)) cache.set(template, new BoundedTemplate(template, this.source));
      const text = this.hf.apply_chat_template(messages as ChatMessage[], {
        ...opts.kwargs,
        chat_template: template,
        add_generation_prompt: opts.addGenerationPrompt ?? false,
        tokenize: false,
      }) as string;
      remember(this.rendered, key, text, key.length);
      return text;
    } catch (e) {
      if (e instanceof TemplateLimitExceeded) throw e;
      throw new TokenizerError(
        `the chat template of ${this.source} failed to render (${(e as Error).message}); ` +
          'check the template in chat_template.jinja / tokenizer_config.json and the message fields it expects',
      );
    }
  }

  /** Id of a token string (vocabulary or added token), or undefined. */
  idOf(token: string): number | undefined {
    const id = this.hf.get_vocab().get(token);
    return id === undefined ? undefined : id;
  }
}
