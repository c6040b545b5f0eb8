/**
 * The decode loop on the committed tiny Qwen3 (models/tiny/qwen3-tiny) on the CPU backend: greedy tokens equal an
 * uncached recompute-everything argmax loop; EOS stops; seeded sampling is reproducible; embeddings in give the ids-in
 * tokens; generation_config.json defaults. generate.gpu.test.ts holds WebGPU to the same tokens.
 */
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { ContextTooLong, InvalidArgument, InvalidModelConfig } from '../errors';
import { openCheckpoint } from '../formats/safetensors-sharded';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { uncachedGreedy } from '../testing/model';
import { parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import { generate, generateBatch, newTokensInContext, parseGenerationConfig, readGenerationConfig } from './generate';
import { loadDecoderWeights } from './weights';

const DIR = 'models/tiny/qwen3-tiny';
const PROMPT = [72, 101, 108, 108, 111, 44, 32, 119]; // byte-level ids of "Hello, w"
const N = 12;

async function load(backend: Backend) {
  const config = parseDecoderConfig(readFileSync(`${DIR}/config.json`, 'utf8'));
  const store = await openCheckpoint(DIR);
  return new Decoder(config, await loadDecoderWeights(config, store, backend));
}

let cpuModel: Decoder;
beforeAll(async () => {
  cpuModel = await load(new CpuBackend('f32'));
});

describe('generate (greedy)', () => {
  it('equals the uncached argmax loop', async () => {
    const want = await uncachedGreedy(cpuModel, PROMPT, N);
    const c = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: N, sampling: { greedy: true } });
    expect(c.tokens).toEqual(want);
    expect(c.stoppedBy).toBe('length');
    expect(c.tokens).toHaveLength(N);
    expect(c.prefillTokensPerSec).toBeGreaterThan(0);
    expect(c.decodeTokensPerSec).toBeGreaterThan(0);
    expect(c.prefillMs).toBeGreaterThan(0);
    // tokens are streamed in order
    const streamed: number[] = [];
    await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: 4, onToken: (id) => streamed.push(id) });
    expect(streamed).toEqual(want.slice(0, 4));
  });

  it('stops at the first EOS id, which it keeps', async () => {
    const want = await uncachedGreedy(cpuModel, PROMPT, N);
    const stopAt = 5;
    const eos = want[stopAt];
    const first = want.indexOf(eos);
    const r = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: N, eosTokenIds: [99999, eos] });
    expect(r.stoppedBy).toBe('eos');
    expect(r.tokens).toEqual(want.slice(0, first + 1));
  });

  it('inputsEmbeds = embed(ids) gives the same tokens as inputIds', async () => {
    const want = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: 8 });
    const emb = cpuModel.embed(cpuModel.backend.fromValues(PROMPT, [PROMPT.length], 'i32'));
    const got = await generate(cpuModel, { inputsEmbeds: emb, maxNewTokens: 8 });
    emb.dispose();
    expect(got.tokens).toEqual(want.tokens);
  });

  it('aborts before the next step', async () => {
    const ac = new AbortController();
    const r = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: N, signal: ac.signal, onToken: () => ac.abort() });
    expect(r.stoppedBy).toBe('abort');
    expect(r.tokens).toHaveLength(1);
  });

  it('rejects bad arguments with InvalidArgument', async () => {
    await expect(generate(cpuModel, { maxNewTokens: 3 })).rejects.toThrow(InvalidArgument);
    await expect(generate(cpuModel, { inputIds: PROMPT, maxNewTokens: 0 })).rejects.toThrow(/maxNewTokens/);
    await expect(generate(cpuModel, { inputIds: PROMPT, maxNewTokens: 2, sampling: { topP: 0 } })).rejects.toThrow(/topP/);
  });
});

describe('generate (sampling)', () => {
  const s = (seed: number) => ({ temperature: 1.5, topK: 0, topP: 1, seed });

  it('is reproducible for a seed and differs for another', async () => {
    const a = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: N, sampling: s(7) });
    const b = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: N, sampling: s(7) });
    const c = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: N, sampling: s(8) });
    expect(b.tokens).toEqual(a.tokens);
    expect(c.tokens).not.toEqual(a.tokens);
  });
});

describe("the model's context (max_position_embeddings)", () => {
  // the tiny model's weights with a 16-position context
  const short = (m: Decoder) => new Decoder({ ...m.config, maxPositions: 16 }, m.weights);

  it('new tokens fit the context: the first comes from the last prompt position, each later one takes a position', () => {
    const m = short(cpuModel);
    expect([newTokensInContext(m, 8, 5), newTokensInContext(m, 8, 100), newTokensInContext(m, 16, 100)]).toEqual([5, 9, 1]);
    const e = (() => { try { newTokensInContext(m, 17, 1, '--prompt'); } catch (x) { return x as Error; } })();
    expect(e).toBeInstanceOf(ContextTooLong);
    expect(e!.message).toBe("--prompt is 17 tokens, longer than the model's context of 16 positions (max_position_embeddings); shorten it");
  });

  it('maxNewTokens 1e6 stops where the context ends (stoppedBy length), with the tokens an unbounded run starts with', async () => {
    const want = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: 9, eosTokenIds: [] });
    const t0 = performance.now();
    const r = await generate(short(cpuModel), { inputIds: PROMPT, maxNewTokens: 1_000_000, eosTokenIds: [] });
    expect(performance.now() - t0).toBeLessThan(5000);
    expect([r.tokens.length, r.stoppedBy]).toEqual([16 - PROMPT.length + 1, 'length']);
    expect(r.tokens).toEqual(want.tokens);
    const b = await generateBatch(short(cpuModel), { prompts: [{ inputIds: PROMPT }], maxNewTokens: 1_000_000, eosTokenIds: [] });
    expect(b.rows[0]!.tokens).toEqual(want.tokens);
  });

  it('a prompt longer than the context is ContextTooLong before any forward pass', async () => {
    const m = short(cpuModel);
    const long = Array.from({ length: 17 }, (_, i) => PROMPT[i % PROMPT.length]!);
    await expect(generate(m, { inputIds: long, maxNewTokens: 1 })).rejects.toMatchObject({
      name: 'ContextTooLong',
      message: "generate: the prompt is 17 tokens, longer than the model's context of 16 positions (max_position_embeddings); shorten it",
    });
    await expect(generateBatch(m, { prompts: [{ inputIds: PROMPT }, { inputIds: long }], maxNewTokens: 1 })).rejects.toMatchObject({
      name: 'ContextTooLong',
      message: expect.stringMatching(/^generateBatch: prompt 1 is 17 tokens, longer than .* context of 16 positions/),
    });
  });
});

describe('generation_config.json', () => {
  it('reads the tiny model defaults and merges EOS ids', async () => {
    const d = await readGenerationConfig(DIR, [456, 3]);
    expect(d.sampling).toEqual({ temperature: 0.6, topK: 20, topP: 0.95 });
    expect(d.eosTokenIds).toEqual([458, 456, 3]);
  });

  it('is greedy without do_sample or without a file, and rejects malformed values', async () => {
    expect(parseGenerationConfig({ temperature: 0.7, eos_token_id: 2 })).toEqual({ sampling: { greedy: true }, eosTokenIds: [2] });
    expect(await readGenerationConfig('/nonexistent-dir', [5])).toEqual({ sampling: { greedy: true }, eosTokenIds: [5] });
    expect(() => parseGenerationConfig('{"do_sample": true, "temperature": "hot"}')).toThrow(InvalidModelConfig);
    expect(() => parseGenerationConfig('{oops')).toThrow(/not valid JSON/);
  });
});
