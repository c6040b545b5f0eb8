// Chat templates and tokenizer.json patterns from a model folder are outside input: bounded, or refused by name (issue 39, 3).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TemplateLimitExceeded, TokenizerError, UnsafeTokenizerPattern } from '../errors.ts';
import { CHATML_TEMPLATE, buildTinyTokenizer } from '../../scripts/tiny-system/tokenizer.ts';
import { catastrophicGroup } from './patterns.ts';
import { BoundedTemplate, TEMPLATE_LIMITS } from './template.ts';
import { loadTokenizer } from './tokenizer.ts';

const tiny = buildTinyTokenizer({ merges: 300 });
/** The tiny tokenizer with `template` as its chat template, from folder "m". */
const withTemplate = (template: string) => loadTokenizer({ ...tiny, chatTemplateJinja: template, source: 'm' });
const hi = [{ role: 'user', content: 'hi' }];

/** `f`'s error, with the milliseconds and the heap bytes it took. */
function timed(f: () => unknown): { error: unknown; ms: number; heapMb: number } {
  const heap0 = process.memoryUsage().heapUsed;
  const t0 = performance.now();
  try {
    f();
  } catch (error) {
    return { error, ms: performance.now() - t0, heapMb: (process.memoryUsage().heapUsed - heap0) / 2 ** 20 };
  }
  throw new Error('no error');
}

describe('chat templates under bounds', () => {
  it('renders the ChatML template as transformers.js does', () => {
    expect(withTemplate(CHATML_TEMPLATE).applyChatTemplate(hi, { addGenerationPrompt: true }))
      .toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    expect(new BoundedTemplate('{{ bos_token }}{% for i in range(3) %}{{ i }}{% endfor %}{{ range(10, 0, -3) | join(",") }}', 'm')
      .render({ bos_token: '<s>' })).toBe('<s>01210,7,4,1');
  });

  it('range(1000000000) is TemplateLimitExceeded at once (it killed Node: V8 fatal at 2.8 GB)', () => {
    const tok = withTemplate('{% for i in range(1000000000) %}x{% endfor %}');
    const r = timed(() => tok.applyChatTemplate(hi));
    expect(r.error).toEqual(new TemplateLimitExceeded('the chat template of m asked for range(0, 1000000000, 1), more than 100,000 items ' +
      '(the cap of Hugging Face\'s Jinja sandbox), so it was stopped; use the template that ships with the model, or fix ' +
      'chat_template.jinja / tokenizer_config.json'));
    expect(r.ms).toBeLessThan(500);
    expect(r.heapMb).toBeLessThan(50);
    // the cap itself is allowed
    expect(withTemplate('{{ range(100000) | length }}').applyChatTemplate(hi)).toBe('100000');
  });

  it('nested loops of allowed ranges stop at the step bound, in seconds', () => {
    const tok = withTemplate('{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}');
    const r = timed(() => tok.applyChatTemplate(hi));
    expect(r.error).toBeInstanceOf(TemplateLimitExceeded);
    // the step bound, or on a slow machine the time bound (5 s) first
    expect((r.error as Error).message).toMatch(new RegExp('^the chat template of m took more than (1,000,000 steps|5 s), so it was ' +
      'stopped; a chat template only formats the messages: use the template that ships with the model, or fix chat_template\\.jinja'));
    expect(r.ms).toBeLessThan(TEMPLATE_LIMITS.ms + 1000);
  }, 30_000);

  it('a string or a list that doubles is stopped at its cap, before memory runs out', () => {
    const s = timed(() => withTemplate('{% set ns = namespace(s="ab") %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}' +
      '{% endfor %}{{ ns.s }}').applyChatTemplate(hi));
    expect((s.error as Error).message).toMatch(/^the chat template of m made a string of more than 8,388,608 characters, so it was/);
    expect(s.heapMb).toBeLessThan(200);
    const l = timed(() => withTemplate('{% set ns = namespace(a=[1]) %}{% for i in range(64) %}{% set ns.a = ns.a + ns.a %}' +
      '{% endfor %}').applyChatTemplate(hi));
    expect((l.error as Error).message).toMatch(/^the chat template of m made a list of more than 1,000,000 items/);
    // a string under the cap emitted many times: the work bound
    const w = timed(() => withTemplate('{% set ns = namespace(s="ab") %}{% for i in range(22) %}{% set ns.s = ns.s ~ ns.s %}' +
      '{% endfor %}{% for i in range(100000) %}{{ ns.s }}{% endfor %}').applyChatTemplate(hi));
    expect((w.error as Error).message).toMatch(/^the chat template of m made (more than 268,435,456 characters in all|a string of more)/);
    expect(w.ms).toBeLessThan(5000);
  });

  it('a failing template is still a TokenizerError naming the folder', () => {
    expect(() => withTemplate('{{ raise_exception("no system role") }}').applyChatTemplate(hi)).toThrow(
      new TokenizerError('the chat template of m failed to render (no system role); check the template in chat_template.jinja / ' +
        'tokenizer_config.json and the message fields it expects'));
  });

  it('strftime_now is the library\'s', () => {
    const year = String(new Date().getFullYear());
    expect(new BoundedTemplate('{{ strftime_now("%Y") }}', 'm').render()).toBe(year);
  });
});

describe('tokenizer.json patterns', () => {
  it('the released pre-tokenizers pass; nested or alternating repeats do not', () => {
    const released = [
      // Qwen2/2.5/3 and Llama 3
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      // Mistral Nemo (Tekken)
      '[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+',
      // GPT-2
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
      // Qwen3.5
      "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}|\\s+(?!\\S)|\\s+",
      '[一-龥぀-ゟ゠-ヿ]+', '(?:\\r?\\n)+', '[(+)]+', '\\(+', '(?i)abc+',
    ];
    for (const p of released) expect(catastrophicGroup(p), p).toBeNull();
    expect(['(a+)+$', '(a*)*b', '(a|aa)*c', '(\\w+\\s?)+$', '((ab)+c)*', '(?:x{1,3})+', '(?<n>a+){2,}'].map(catastrophicGroup))
      .toEqual(['(a+)+', '(a*)*', '(a|aa)*', '(\\w+\\s?)+', '((ab)+c)*', '(?:x{1,3})+', '(?<n>a+){2,}']);
  });

  it('a pre-tokenizer (a+)+$ is UnsafeTokenizerPattern at load, in milliseconds (it took 7.5 s for 24 characters and hung for 35)', () => {
    const j = JSON.parse(readFileSync(new URL('../../models/tiny/qwen3-tiny/tokenizer.json', import.meta.url), 'utf8')) as {
      pre_tokenizer: { pretokenizers: { pattern?: unknown }[] };
    };
    const split = j.pre_tokenizer.pretokenizers.find((p) => p.pattern)!;
    split.pattern = { Regex: '(a+)+$' };
    const r = timed(() => loadTokenizer({ tokenizerJson: JSON.stringify(j), source: 'm' }).encode('a'.repeat(34) + '!'));
    expect(r.error).toEqual(new UnsafeTokenizerPattern('m/tokenizer.json: the pattern "(a+)+$" at pre_tokenizer.pretokenizers.0.pattern ' +
      'repeats "(a+)+", a group that itself repeats or alternates, which can backtrack for hours on a short text; it was refused ' +
      'before any text met it. Use the tokenizer.json that ships with the model'));
    expect(r.ms).toBeLessThan(1000);
  });

  it('a normalizer Replace pattern is checked too', () => {
    const json = { ...tiny.tokenizerJson, normalizer: { type: 'Replace', pattern: { Regex: '(x|xx)+y' }, content: '' } };
    expect(() => loadTokenizer({ tokenizerJson: json, source: 'm' }))
      .toThrow(/^m\/tokenizer\.json: the pattern "\(x\|xx\)\+y" at normalizer/);
  });
});
