import { describe, expect, it } from 'vitest';
import { buildTinyTokenizer } from '../../scripts/tiny-system/tokenizer.ts';
import { loadTokenizer } from './index.ts';

// The browser path: bytes in (as from IndexedDB), same ids and chat rendering as in Node.
describe('tokenizer in the browser', () => {
  it('encodes, decodes and renders the tiny tokenizer from bytes', () => {
    const tiny = buildTinyTokenizer({ merges: 300 });
    const enc = new TextEncoder();
    const tok = loadTokenizer({
      tokenizerJson: enc.encode(JSON.stringify(tiny.tokenizerJson)),
      tokenizerConfig: enc.encode(JSON.stringify(tiny.tokenizerConfig)),
    });
    expect(tok.encode('The answer is 42.')).toEqual([267, 297, 266, 32, 52, 50, 46]);
    expect(tok.decode(tok.encode('é 中文 😀 x² ≤ π'))).toBe('é 中文 😀 x² ≤ π');
    expect(tok.applyChatTemplate([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true, kwargs: { enable_thinking: false } }))
      .toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  });
});
