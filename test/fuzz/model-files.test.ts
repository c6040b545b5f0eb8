/**
 * Fuzzing a model folder's small files: config.json, generation_config.json and the tokenizer files (with the chat
 * template); test/fuzz/harness.ts has the property. Below, the regression cases.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { RmasError, TokenizerError } from '../../src/errors';
import { parseDecoderConfig } from '../../src/model/config';
import { parseGenerationConfig } from '../../src/model/generate';
import { loadTokenizer } from '../../src/tokenizer/tokenizer';
import { fuzzReader, fuzzTimeout } from './harness';
import { deepJson } from './mutate';

/** The sizes of a small valid llama config, to reach the later checks. */
const TINY = '"model_type": "llama", "hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1, "intermediate_size": 16, ' +
  '"vocab_size": 10';

describe('fuzz: model folder files', () => {
  it('config.json: a config within the limits or a named error naming the file', async () => {
    expect(await fuzzReader('model-files.ts', 'config', 1000)).toEqual([]);
  }, fuzzTimeout());

  it('generation_config.json', async () => {
    expect(await fuzzReader('model-files.ts', 'generationConfig', 500)).toEqual([]);
  }, fuzzTimeout());

  it('tokenizer.json, tokenizer_config.json and the chat template: a tokenizer that encodes, or a TokenizerError naming the folder',
    async () => {
    expect(await fuzzReader('model-files.ts', 'tokenizer', 600)).toEqual([]);
  }, fuzzTimeout());
});

describe('model folder files: regressions', () => {
  /** The tiny Qwen3's tokenizer.json, changed by `edit`, loaded from folder "m". */
  const load = (edit: (j: { model: Record<string, unknown>; pre_tokenizer: { pretokenizers: Record<string, unknown>[] } }) => void) => {
    const j = JSON.parse(readFileSync(new URL('../../models/tiny/qwen3-tiny/tokenizer.json', import.meta.url), 'utf8')) as Parameters<
      typeof edit>[0];
    edit(j);
    return loadTokenizer({ tokenizerJson: JSON.stringify(j), source: 'm' });
  };

  it('a tokenizer.json vocabulary that maps a token to an object, or that is a string, is refused by name (found by the fuzzer: ' +
    'encode() returned the object, or the string\'s characters, as token ids)', () => {
    expect(() => load((j) => ((j.model.vocab as Record<string, unknown>)[':'] = { a: 1 }))).toThrow(
      new TokenizerError('m/tokenizer.json maps the token ":" to {"a":1}, which is not a token id (an integer from 0 to 4194303); ' +
        'the file is damaged, download it again'),
    );
    expect(() => load((j) => (j.model.vocab = '0x10'))).toThrow(/^m\/tokenizer\.json: model\.vocab is "0x10", neither a \{token: id\} map/);
  });

  it('a token id of 2^31 is refused at once (found by the fuzzer as a hang: get_vocab() walked 2^31 slots)', () => {
    const t0 = performance.now();
    expect(() => load((j) => ((j.model.vocab as Record<string, unknown>)['\u00a7'] = 2 ** 31))).toThrow(
      /^m\/tokenizer\.json maps the token "§" to 2147483648, which is not a token id/);
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  it('a pre-tokenizer setting of the wrong type fails encode() as a TokenizerError naming the folder (found by the fuzzer: a raw ' +
    'TypeError from transformers.js)', () => {
    const tok = load((j) => (j.pre_tokenizer.pretokenizers[0]!.behavior = { a: 1 }));
    expect(() => tok.encode('12 + 30')).toThrow(TokenizerError);
    expect(() => tok.encode('12 + 30')).toThrow(/^m: the tokenizer failed to encode \(.*\); tokenizer\.json or tokenizer_config/);
  });

  // Found by the fuzzer: JSON.stringify / String() of a file's value in an error message overflowed the stack on a value
  // nested ~5000 deep, and String() threw on an object whose toString is not a function; messages now use showValue.
  for (const [what, text] of [
    ['model_type nested 100 000 deep (config.ts:137, UnknownModelType message)', `{"model_type": ${deepJson(100_000)}}`],
    ['hidden_size nested 100 000 deep (config.ts:146, int())', `{"model_type": "llama", "hidden_size": ${deepJson(100_000)}}`],
    ['hidden_act nested 100 000 deep (config.ts:188, String(act))', `{${TINY}, "hidden_act": ${deepJson(100_000)}}`],
    ['hidden_act {"toString": 1} (config.ts:188, String(act): TypeError)', `{${TINY}, "hidden_act": {"toString": 1}}`],
  ] as const) {
    it(`config.json: ${what} is refused by name`, () => {
      expect(() => parseDecoderConfig(text, 'm/config.json')).toThrow(/^m\/config\.json/);
      expect(() => parseDecoderConfig(text, 'm/config.json')).toThrow(RmasError);
    });
  }

  // The same, in parseGenerationConfig's num().
  it('generation_config.json: a temperature nested 100 000 deep is refused by name (generate.ts:339 overflows the stack)', () => {
    expect(() => parseGenerationConfig(`{"do_sample": true, "temperature": ${deepJson(100_000)}}`, [], 'm/generation_config.json'))
      .toThrow(/^m\/generation_config\.json: "temperature" must be a number/);
  });
});

// Found by the 20x fuzz run: rope_scaling's type went into its message through a template, which overflowed the stack
// on a deep array and threw on an object whose toString is not a function.
describe('model folder files: what the long run found', () => {
  for (const [what, type] of [['nested 100 000 deep', deepJson(100_000)], ['{"toString": 1}', '{"toString": 1}']] as const) {
    it(`config.json: a rope_scaling type ${what} is refused by name`, () => {
      const text = `{${TINY}, "rope_scaling": {"rope_type": ${type}, "factor": 2}}`;
      expect(() => parseDecoderConfig(text, 'm/config.json')).toThrow(/^m\/config\.json: rope type/);
    });
  }
});
