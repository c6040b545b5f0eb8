/**
 * The deliberation tool-caller's final decode wired to the engine (src/mas/decode.ts decodeWithTools): a
 * scripted generate (token by token through the real tiny tokenizer, honouring the stop callback) stands
 * in for the model, since random weights never write tool tags. Checks the stop at the closing tag, the
 * re-read prompt on continuation (prompt pieces + the text so far, no cache reuse), the inserted result,
 * and the final text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeWithTools } from '../../src/mas/decode';
import type { Agent } from '../../src/mas/system';
import { loadDecoderFromDir, type GenerateOptions } from '../../src/model';
import type { Decoder } from '../../src/model/decoder';
import { CpuBackend } from '../../src/tensor/cpu';
import { Tensor } from '../../src/tensor/tensor';
import { loadTokenizerFromDir, type Tokenizer } from '../../src/tokenizer';

const be = new CpuBackend('f32');
let decoder: Decoder;
let tok: Tokenizer;
beforeAll(async () => {
  decoder = await loadDecoderFromDir('models/tiny/qwen3-tiny', be);
  tok = await loadTokenizerFromDir('models/tiny/qwen3-tiny');
});
afterAll(() => decoder?.dispose());

describe('deliberation tool loop on the engine', () => {
  it('stops at </python>, runs it, re-reads prompt + text so far, and continues to the answer', async () => {
    const agent: Agent = {
      role: 'toolcaller',
      source: 'tiny',
      dir: '',
      decoder,
      tokenizer: tok,
      inner: null,
      generation: { sampling: { greedy: true }, eosTokenIds: [458] },
    };
    const latents = be.fromValues(new Float32Array(3 * 48).fill(0.1), [3, 48]);
    const prefix = tok.encode('<|im_start|>user\nReflector signal:', { addSpecialTokens: false });
    const suffix = tok.encode('\nQ: 6*7?<|im_end|>\n<|im_start|>assistant\n', { addSpecialTokens: false });
    const scripts = ['Let me compute. <python>print(6*7)</python> never shown', 'So the answer is \\boxed{42}.'];
    const prompts: number[] = [];
    const gen = async (_m: Decoder, o: GenerateOptions) => {
      const pieces = o.inputsEmbeds as Tensor[];
      prompts.push(pieces.reduce((n, p) => n + p.shape[0], 0));
      const script = tok.encode(scripts[prompts.length - 1], { addSpecialTokens: false });
      const tokens: number[] = [];
      for (const id of script) {
        tokens.push(id);
        o.onToken?.(id);
        if (o.stop?.(tokens))
          return { tokens, stoppedBy: 'stop' as const, prefillMs: 0, decodeMs: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0 };
      }
      tokens.push(458);
      o.onToken?.(458);
      return { tokens, stoppedBy: 'eos' as const, prefillMs: 0, decodeMs: 0, prefillTokensPerSec: 0, decodeTokensPerSec: 0 };
    };
    const ran: string[] = [];
    const result = { toolCalls: [] as { tool: string; body: string; result: string }[] };
    const streamed: number[] = [];
    const out = await decodeWithTools(agent, [prefix, latents, suffix], 200, {
      question: 'q', sampling: { greedy: true }, maxNewTokens: 200, onToken: (_, id) => streamed.push(id),
      tools: { python: async (code) => (ran.push(code), '42'), search: async () => 'unused' },
    }, result, gen as never);

    expect(ran).toEqual(['print(6*7)']);
    expect(out.text).toBe('Let me compute. <python>print(6*7)</python> <result> 42 </result>So the answer is \\boxed{42}.');
    const firstText = 'Let me compute. <python>print(6*7)</python> <result> 42 </result>';
    const base = prefix.length + 3 + suffix.length;
    expect(prompts).toEqual([base, base + tok.encode(firstText, { addSpecialTokens: false }).length]);
    expect(result.toolCalls).toEqual([{ tool: 'python', body: 'print(6*7)', result: '42' }]);
    // every generated id is counted and streamed, the text cut after </python> included
    expect(out.ids).toEqual(streamed);
    expect(tok.decode(out.ids, { skipSpecialTokens: true })).not.toContain('never shown');
    latents.dispose();
  });
});
