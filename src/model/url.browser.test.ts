// The browser loaders: a tiny model folder fetched from the test server (the repo root), and the named
// errors when a required file is missing. Figures are those of the Node loaders (loadDecoderFromDir / loadTokenizerFromDir).
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../tensor/cpu';
import { loadTokenizerFromUrl } from '../tokenizer';
import { loadDecoderFromUrl } from './index';

describe('loading a model folder by URL (chromium)', () => {
  it('loads qwen3-tiny weights as the Node loader does', async () => {
    const d = await loadDecoderFromUrl('/models/tiny/qwen3-tiny/', new CpuBackend());
    try {
      expect(d.config.hidden).toBe(48);
      expect(d.weights.totalBytes).toBe(155456);
      expect(d.weights.embed.shape).toEqual([461, 48]);
      const e = await d.weights.embed.read();
      expect(Array.from(e.slice(0, 4))).toEqual([1.546875, 0.984375, -1.6875, 0.609375]);
      expect(e.reduce((a, b) => a + b, 0)).toBeCloseTo(42.35365968942642, 6);
    } finally {
      d.dispose();
    }
  });

  it('loads tokenizers with and without chat_template.jinja (an absent optional file is fine)', async () => {
    for (const m of ['qwen3-tiny', 'llama-tiny']) {
      const t = await loadTokenizerFromUrl(`/models/tiny/${m}`);
      expect(t.encode('What is 3 + 4?'), m).toEqual([387, 266, 32, 51, 314, 32, 52, 63]);
      expect(t.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true, kwargs: { enable_thinking: false } }), m)
        .toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
    }
  });

  it('names the missing URL: MissingCheckpoint for a model, TokenizerError for a tokenizer', async () => {
    const err = await loadDecoderFromUrl('/models/tiny/no-such-model/', new CpuBackend()).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'MissingCheckpoint' });
    expect((err as Error).message).toMatch(/\/models\/tiny\/no-such-model\/config\.json/);
    const terr = await loadTokenizerFromUrl('/models/tiny/no-such-model/').catch((e: Error) => e);
    expect(terr).toMatchObject({ name: 'TokenizerError' });
    expect((terr as Error).message).toMatch(/\/models\/tiny\/no-such-model\/tokenizer\.json/);
  });
});
