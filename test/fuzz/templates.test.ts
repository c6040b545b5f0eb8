/**
 * Fuzzing what a model folder makes the process run: its chat template and its tokenizer.json patterns (issue 39, 3);
 * test/fuzz/harness.ts has the property (a result, or a named error naming the folder; never a hang or a crash).
 */
import { describe, expect, it } from 'vitest';
import { fuzzReader, fuzzTimeout } from './harness';

describe('fuzz: chat templates and tokenizer patterns', () => {
  it('a chat template: a prompt of at most 8 Mi characters, or TokenizerError / TemplateLimitExceeded naming the folder', async () => {
    expect(await fuzzReader('templates.ts', 'chatTemplate', 600)).toEqual([]);
  }, fuzzTimeout());

  it('tokenizer.json patterns: a tokenizer that encodes hostile texts, or a named error (UnsafeTokenizerPattern) at load', async () => {
    expect(await fuzzReader('templates.ts', 'tokenizerPatterns', 1000)).toEqual([]);
  }, fuzzTimeout());
});
