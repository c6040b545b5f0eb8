/**
 * Deterministic builder of the tiny byte-level BPE tokenizer that the tiny test checkpoints ship.
 *
 * The layout follows Qwen2/Qwen2.5/Qwen3 `tokenizer.json` exactly (NFC normalizer, a Split pre-tokenizer
 * with the Qwen/GPT-4-style regex followed by ByteLevel with use_regex false, ByteLevel post-processor
 * and decoder, BPE model over the GPT-2 bytes_to_unicode alphabet), so that the engine's tokenizer path
 * is exercised on the same configuration real Qwen folders use. transformers.js (@huggingface/tokenizers)
 * supports this setup, including the `(?i:...)` group of the regex.
 *
 * Vocabulary ids: 0..255 are the single bytes in byte order (id = byte value, which keeps hand-derived
 * expectations in tests simple), then one id per new merged token in merge order, then the added special
 * tokens. Merges are learned by plain pair counting over a small built-in corpus; ties go to the pair
 * whose (left, right) strings sort first, so the result is a pure function of the merge count.
 */

/** The Qwen2 pre-tokenizer regex (Rust `fancy-regex` syntax, as stored in tokenizer.json). */
export const QWEN2_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** Llama 3's pre-tokenizer regex: the same, except that digits go in groups of up to three. */
export const LLAMA3_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The same regex in JS syntax: JS has no inline (?i:...) groups (before ES2025), so the contractions are
// spelled out per case. Used only to pre-tokenize the training corpus here.
const JS_SPLIT_REGEX =
  /'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

export const SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;
/** Added as non-special tokens, as Qwen3 does, so that decode(skipSpecialTokens) keeps them. */
export const THINK_TOKENS = ['<think>', '</think>'] as const;

/**
 * Qwen-style ChatML template. With `enable_thinking=false` the generation prompt gets the empty think
 * block Qwen3 inserts, which makes the model answer without reasoning.
 */
export const CHATML_TEMPLATE =
  "{%- for message in messages %}" +
  "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}" +
  '{%- endfor %}' +
  '{%- if add_generation_prompt %}' +
  "{{- '<|im_start|>assistant\\n' }}" +
  '{%- if enable_thinking is defined and enable_thinking is false %}' +
  "{{- '<think>\\n\\n</think>\\n\\n' }}" +
  '{%- endif %}' +
  '{%- endif %}';

/** Small English and math corpus the merges are learned from. Changing it changes every tiny model. */
export const CORPUS = [
  'The quick brown fox jumps over the lazy dog.',
  'Let x be a real number such that x + 3 = 7. Then x = 4.',
  'What is the sum of 12 and 30? The answer is 42.',
  'A triangle has three sides and three angles; the angles sum to 180 degrees.',
  'If f(x) = 2x + 1, then f(3) = 7 and f(0) = 1.',
  'The agents think step by step, then they share the answer with each other.',
  'Solve for y: 2y - 5 = 11, so 2y = 16 and y = 8.',
  'The product of 6 and 7 is 42, and the quotient of 42 by 6 is 7.',
  'There are 60 minutes in an hour and 24 hours in a day.',
  'Write the answer in the box: \\boxed{42}.',
  'The square root of 81 is 9, and 9 squared is 81.',
  "Let's think about the problem. We know that the total is 100.",
  'The planner writes a plan, the critic checks the plan, and the solver solves the problem.',
  'Question: How many apples are left if you have 10 and eat 3? Answer: 7 apples.',
  'The probability of heads is 1/2, and the probability of two heads is 1/4.',
  'In the beginning of the story, the teacher asks the students a question.',
  'The value of the expression (3 + 4) * 2 is 14.',
  'An even number is divisible by 2; an odd number is not.',
  'They went to the market and bought bread, milk and eggs.',
  'Therefore, the final answer is 25.',
].join('\n');

/** GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 onwards. */
export function bytesToUnicode(): string[] {
  const table: string[] = new Array(256);
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table[b] = String.fromCodePoint(printable ? b : 256 + n++);
  }
  return table;
}

/** Pre-tokenize with the Qwen2 regex and map every piece to its byte-level symbols. */
const JS_SPLIT_REGEX_DIGIT_GROUPS = new RegExp(JS_SPLIT_REGEX.source.replace('|\\p{N}|', '|\\p{N}{1,3}|'), 'gu');

export function byteLevelWords(text: string, table: string[] = bytesToUnicode(), digitGroups = false): string[][] {
  const enc = new TextEncoder();
  return (text.normalize('NFC').match(digitGroups ? JS_SPLIT_REGEX_DIGIT_GROUPS : JS_SPLIT_REGEX) ?? []).map((piece) =>
    Array.from(enc.encode(piece), (b) => table[b]!),
  );
}

/**
 * Learn up to `count` merges by pair counting. Stops early when every word is a single symbol (the corpus
 * bounds how many merges exist; about 700 for the built-in one).
 */
export function learnMerges(words: string[][], count: number): [string, string][] {
  // Identical pre-tokens are merged identically, so count each distinct word once with its frequency.
  const freq = new Map<string, { syms: string[]; n: number }>();
  for (const w of words) {
    const key = w.join('\u0000');
    const e = freq.get(key);
    if (e) e.n++;
    else freq.set(key, { syms: [...w], n: 1 });
  }
  const entries = [...freq.values()];
  const merges: [string, string][] = [];
  while (merges.length < count) {
    const pairs = new Map<string, number>();
    for (const { syms, n } of entries) {
      for (let i = 0; i + 1 < syms.length; i++) {
        const k = syms[i] + '\u0000' + syms[i + 1];
        pairs.set(k, (pairs.get(k) ?? 0) + n);
      }
    }
    let best: string | null = null;
    let bestN = 0;
    for (const [k, n] of pairs) {
      if (n > bestN || (n === bestN && best !== null && comparePairs(k, best) < 0)) {
        best = k;
        bestN = n;
      }
    }
    if (best === null) break;
    const [a, b] = best.split('\u0000') as [string, string];
    merges.push([a, b]);
    for (const e of entries) e.syms = applyMerge(e.syms, a, b);
  }
  return merges;
}

// Compare by (left, right) code units so that ties do not depend on Map iteration order.
function comparePairs(x: string, y: string): number {
  const [xa, xb] = x.split('\u0000') as [string, string];
  const [ya, yb] = y.split('\u0000') as [string, string];
  if (xa !== ya) return xa < ya ? -1 : 1;
  return xb < yb ? -1 : xb > yb ? 1 : 0;
}

/** Apply one merge left to right, as BPE does within a word. */
export function applyMerge(syms: string[], a: string, b: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < syms.length; i++) {
    if (i + 1 < syms.length && syms[i] === a && syms[i + 1] === b) {
      out.push(a + b);
      i++;
    } else out.push(syms[i]!);
  }
  return out;
}

export interface TinyTokenizerOptions {
  /** Number of merges to learn (capped by what the corpus offers). */
  merges: number;
  /** Text the merges are learned from (default: the built-in CORPUS). */
  corpus?: string;
  /** Pre-tokenize digits in groups of up to three (Llama 3's regex) rather than one by one (Qwen's). */
  digitGroups?: boolean;
  /** Accepted so callers can pass their generator options; merge learning has no randomness. */
  seed?: number;
  /** Add `<think>` and `</think>` as added (non-special) tokens, as Qwen3 does. Default true. */
  thinkTokens?: boolean;
}

export interface TinyTokenizer {
  /** Hugging Face tokenizer.json content (a plain JSON object). */
  tokenizerJson: Record<string, unknown>;
  /** tokenizer_config.json content; holds the chat template too. */
  tokenizerConfig: Record<string, unknown>;
  /** The ChatML template, for writing a separate chat_template.jinja. */
  chatTemplate: string;
}

export function buildTinyTokenizer(opts: TinyTokenizerOptions): TinyTokenizer {
  const table = bytesToUnicode();
  const merges = learnMerges(byteLevelWords(opts.corpus ?? CORPUS, table, opts.digitGroups), Math.max(0, Math.floor(opts.merges)));
  const vocab: Record<string, number> = {};
  let next = 0;
  for (const s of table) vocab[s] = next++;
  // A merge can produce a string an earlier merge already made (ab+c vs a+bc); it keeps the first id.
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = next++;

  const added = [
    ...SPECIAL_TOKENS.map((content) => ({ content, special: true })),
    ...(opts.thinkTokens === false ? [] : THINK_TOKENS.map((content) => ({ content, special: false }))),
  ].map(({ content, special }) => ({
    id: next++, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special,
  }));

  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false };
  const tokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: 'NFC' },
    pre_tokenizer: {
      type: 'Sequence',
      pretokenizers: [
        {
          type: 'Split',
          pattern: { Regex: opts.digitGroups ? LLAMA3_SPLIT_REGEX : QWEN2_SPLIT_REGEX },
          behavior: 'Isolated',
          invert: false,
        },
        byteLevel,
      ],
    },
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };

  const addedTokensDecoder: Record<string, unknown> = {};
  for (const { id, ...rest } of added) addedTokensDecoder[String(id)] = rest;
  const tokenizerConfig = {
    add_bos_token: false,
    add_prefix_space: false,
    added_tokens_decoder: addedTokensDecoder,
    additional_special_tokens: ['<|im_start|>', '<|im_end|>'],
    bos_token: null,
    chat_template: CHATML_TEMPLATE,
    clean_up_tokenization_spaces: false,
    eos_token: '<|im_end|>',
    errors: 'replace',
    model_max_length: 4096,
    pad_token: '<|endoftext|>',
    split_special_tokens: false,
    tokenizer_class: 'Qwen2Tokenizer',
    unk_token: null,
  };
  return { tokenizerJson, tokenizerConfig, chatTemplate: CHATML_TEMPLATE };
}
