import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenizerError } from '../errors.ts';
import { CHATML_TEMPLATE, buildTinyTokenizer, byteLevelWords, learnMerges } from '../../scripts/tiny-system/tokenizer.ts';
import { loadTokenizer, loadTokenizerFromDir, type Tokenizer } from './index.ts';

const tiny = buildTinyTokenizer({ merges: 300 });
const tok = loadTokenizer(tiny);
const model = tiny.tokenizerJson.model as { vocab: Record<string, number>; merges: [string, string][] };

// Reference BPE straight from the merge table: repeatedly merge the lowest-ranked adjacent pair.
function referenceEncode(text: string): number[] {
  const rank = new Map(model.merges.map(([a, b], i) => [`${a} ${b}`, i]));
  const ids: number[] = [];
  for (let syms of byteLevelWords(text)) {
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < syms.length; i++) {
        const r = rank.get(`${syms[i]} ${syms[i + 1]}`);
        if (r !== undefined && r < bestRank) [best, bestRank] = [i, r];
      }
      if (best < 0) break;
      syms = [...syms.slice(0, best), syms[best]! + syms[best + 1]!, ...syms.slice(best + 2)];
    }
    for (const s of syms) ids.push(model.vocab[s]!);
  }
  return ids;
}

describe('tiny tokenizer builder', () => {
  it('learns merges by pair counting with ties broken by (left, right) order', () => {
    // ab and bc both occur twice: ab sorts first. Then (ab,c) and (b,c) both once: "ab" < "b".
    expect(learnMerges([['a', 'b', 'c'], ['a', 'b'], ['b', 'c']], 5)).toEqual([['a', 'b'], ['ab', 'c'], ['b', 'c']]);
  });

  it('is deterministic and lays out ids as bytes, merges, added tokens', () => {
    expect(JSON.stringify(buildTinyTokenizer({ merges: 300, seed: 7 }))).toBe(JSON.stringify(tiny));
    const one = buildTinyTokenizer({ merges: 1 });
    const m = one.tokenizerJson.model as typeof model;
    expect(m.merges).toEqual([['h', 'e']]); // "he" is the most frequent pair of the corpus
    expect(m.vocab['A']).toBe(65);
    expect(m.vocab['Ġ']).toBe(32); // bytes_to_unicode: space
    expect(m.vocab['Ċ']).toBe(10); // newline
    expect(m.vocab['he']).toBe(256);
    const added = one.tokenizerJson.added_tokens as { id: number; content: string; special: boolean }[];
    expect(added.map((t) => [t.id, t.content, t.special])).toEqual([
      [257, '<|endoftext|>', true], [258, '<|im_start|>', true], [259, '<|im_end|>', true],
      [260, '<think>', false], [261, '</think>', false],
    ]);
  });
});

describe('Tokenizer (transformers.js) on the tiny tokenizer', () => {
  it('encodes to hand-derived ids with one merge', () => {
    const t = loadTokenizer(buildTinyTokenizer({ merges: 1 }));
    // Pre-tokens "hehe", " the", "!": bytes except the one merge h+e = 256; space is id 32.
    expect(t.encode('hehe the!')).toEqual([256, 256, 32, 116, 256, 33]);
    expect(t.vocabSize).toBe(262);
    expect(t.eosTokenIds).toEqual([259]);
  });

  it('matches a reference BPE over the merge table', () => {
    for (const s of ['The answer is 42.', "Let's solve 2y - 5 = 11.", 'the planner and the critic\n\nthink', 'x² + y² = r²']) {
      expect(tok.encode(s)).toEqual(referenceEncode(s));
    }
    // Pinned so that a change of corpus, regex or tie-breaking shows up here.
    expect(tok.encode('The answer is 42.')).toEqual([267, 297, 266, 32, 52, 50, 46]);
  });

  it('remembers what it encoded and rendered: equal results, each call its own array, and past the table the same again', () => {
    const fresh = loadTokenizer(tiny);
    const text = 'The answer is 42.';
    const first = fresh.encode(text);
    first.push(-1); // a caller's change to its array reaches no other call
    expect(fresh.encode(text)).toEqual(referenceEncode(text));
    expect(fresh.encode(text, { addSpecialTokens: false })).toEqual(referenceEncode(text));
    const chat = [{ role: 'user', content: text }];
    const rendered = fresh.applyChatTemplate(chat, { addGenerationPrompt: true });
    expect(fresh.applyChatTemplate(chat, { addGenerationPrompt: true })).toBe(rendered);
    expect(fresh.applyChatTemplate(chat)).toBe(rendered.slice(0, -'<|im_start|>assistant\n'.length));
    // more inputs than the table holds: the oldest are dropped and computed again
    for (let i = 0; i < 600; i++) expect(fresh.encode(`${i} ${text}`)).toEqual(referenceEncode(`${i} ${text}`));
    expect(fresh.encode(text)).toEqual(referenceEncode(text));
  });

  it('round-trips ASCII, unicode and math text', () => {
    for (const s of [
      'Hello, world! The quick brown fox.',
      '  leading and trailing spaces  \n\ttabs\r\n',
      'café, naïve, é, 中文, 日本語, emoji 😀👍🏽',
      'f(x) = ∑_{i=1}^{n} x_i² ≤ √2 · π, \\boxed{42}',
      '',
    ]) {
      expect(tok.decode(tok.encode(s))).toBe(s);
    }
  });

  it('maps special-token strings in text to their ids without splitting them', () => {
    const ids = tok.encode('<|im_start|>user\nhi<|im_end|><|endoftext|>');
    const [start, end, eot] = ['<|im_start|>', '<|im_end|>', '<|endoftext|>'].map((s) => tok.idOf(s)!);
    expect(ids[0]).toBe(start);
    expect(ids.slice(-2)).toEqual([end, eot]);
    expect(ids.slice(1, -2)).toEqual(referenceEncode('user\nhi'));
    expect(tok.decode(ids, { skipSpecialTokens: true })).toBe('user\nhi');
    // <think> is added but not special (as in Qwen3): one id, kept when special tokens are skipped.
    const think = tok.encode('<think>ok</think>');
    expect(think[0]).toBe(tok.idOf('<think>'));
    expect(think.at(-1)).toBe(tok.idOf('</think>'));
    expect(tok.decode(think, { skipSpecialTokens: true })).toBe('<think>ok</think>');
    expect(tok.idOf('<|im_end|>')).toBe(tok.eosTokenIds[0]);
    expect(tok.idOf('no such token')).toBeUndefined();
    expect(tok.vocabSize).toBe(Object.keys(model.vocab).length + 5);
  });
});

describe('chat templates', () => {
  const chat = [
    { role: 'system', content: 'You are a solver.' },
    { role: 'user', content: 'What is 6*7?' },
  ];
  const base = '<|im_start|>system\nYou are a solver.<|im_end|>\n<|im_start|>user\nWhat is 6*7?<|im_end|>\n';

  it('renders ChatML with and without the generation prompt and enable_thinking', () => {
    expect(tok.applyChatTemplate(chat)).toBe(base);
    expect(tok.applyChatTemplate(chat, { addGenerationPrompt: true })).toBe(`${base}<|im_start|>assistant\n`);
    expect(tok.applyChatTemplate(chat, { addGenerationPrompt: true, kwargs: { enable_thinking: true } }))
      .toBe(`${base}<|im_start|>assistant\n`);
    expect(tok.applyChatTemplate(chat, { addGenerationPrompt: true, kwargs: { enable_thinking: false } }))
      .toBe(`${base}<|im_start|>assistant\n<think>\n\n</think>\n\n`);
  });

  it('tokenizes a rendered prompt with the control tokens as single ids', () => {
    const ids = tok.encode(tok.applyChatTemplate(chat, { addGenerationPrompt: true }), { addSpecialTokens: false });
    const start = tok.idOf('<|im_start|>')!;
    const end = tok.idOf('<|im_end|>')!;
    expect(ids.filter((i) => i === start).length).toBe(3);
    expect(ids.filter((i) => i === end).length).toBe(2);
    const tail = [start, ...referenceEncode('assistant\n')];
    expect(ids.slice(-tail.length)).toEqual(tail);
  });

  it('prefers chatTemplateJinja over tokenizer_config', () => {
    const t = loadTokenizer({ ...tiny, chatTemplateJinja: "{% for m in messages %}[{{ m['content'] }}]{% endfor %}" });
    expect(t.applyChatTemplate(chat)).toBe('[You are a solver.][What is 6*7?]');
  });
});

describe('loading from a folder and errors', () => {
  let dir = '';
  const write = (name: string, text: string) => writeFile(join(dir, name), text);
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'rmas-tok-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('reads tokenizer.json, tokenizer_config.json and chat_template.jinja with the right precedence', async () => {
    await write('tokenizer.json', JSON.stringify(tiny.tokenizerJson));
    await write('tokenizer_config.json', JSON.stringify(tiny.tokenizerConfig));
    const fromConfig = await loadTokenizerFromDir(dir);
    expect(fromConfig.encode('The answer is 42.')).toEqual(tok.encode('The answer is 42.'));
    expect(fromConfig.chatTemplate).toBe(CHATML_TEMPLATE);
    await write('chat_template.jinja', '{{ messages[0].content }}!');
    const fromJinja = await loadTokenizerFromDir(`${dir}/`);
    expect(fromJinja.applyChatTemplate([{ role: 'user', content: 'hi' }])).toBe('hi!');
  });

  it('accepts bytes, as the browser passes them from IndexedDB', () => {
    const enc = new TextEncoder();
    const t = loadTokenizer({
      tokenizerJson: enc.encode(JSON.stringify(tiny.tokenizerJson)),
      tokenizerConfig: enc.encode(JSON.stringify(tiny.tokenizerConfig)).buffer as ArrayBuffer,
    });
    expect(t.encode('x² = 4')).toEqual(tok.encode('x² = 4'));
  });

  const expectTokenizerError = (fn: () => unknown, ...parts: string[]) => {
    let err: unknown;
    try {
      fn();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(TokenizerError);
    expect((err as Error).name).toBe('TokenizerError');
    for (const p of parts) expect((err as Error).message).toContain(p);
  };

  it('names the file and the fix', async () => {
    const empty = await mkdtemp(join(tmpdir(), 'rmas-tok-empty-'));
    await expect(loadTokenizerFromDir(empty)).rejects.toThrow(TokenizerError);
    await expect(loadTokenizerFromDir(empty)).rejects.toThrow(`${empty}/tokenizer.json does not exist; download it`);
    await writeFile(join(empty, 'tokenizer.json'), '{"model": {"type": "BPE"');
    await expect(loadTokenizerFromDir(empty)).rejects.toThrow(`${empty}/tokenizer.json is not valid JSON`);
    await rm(empty, { recursive: true, force: true });

    expectTokenizerError(() => loadTokenizer({ tokenizerJson: '{oops' }), 'tokenizer.json is not valid JSON', 'download it again');
    expectTokenizerError(() => loadTokenizer({ tokenizerJson: '{}' }), 'has no "model" section');
    expectTokenizerError(() => loadTokenizer({ tokenizerJson: new Uint8Array([0xff, 0xfe]) }), 'not valid UTF-8');
    expectTokenizerError(
      () => loadTokenizer({ tokenizerJson: tiny.tokenizerJson, tokenizerConfig: '[1]', source: 'models/x' }),
      'models/x/tokenizer_config.json must hold a JSON object',
    );
    const { chat_template: _, ...noTemplate } = tiny.tokenizerConfig;
    const bare: Tokenizer = loadTokenizer({ tokenizerJson: tiny.tokenizerJson, tokenizerConfig: noTemplate, source: 'models/x' });
    expect(bare.encode('hi')).toEqual(tok.encode('hi'));
    expectTokenizerError(
      () => bare.applyChatTemplate([{ role: 'user', content: 'hi' }]),
      'models/x has no chat template',
      'chat_template.jinja',
    );
    const broken = loadTokenizer({ ...tiny, chatTemplateJinja: '{% for m in messages %}' });
    expectTokenizerError(() => broken.applyChatTemplate([{ role: 'user', content: 'hi' }]), 'failed to render');
  });
});
