/**
 * Batched one-token steps (Decoder.stepBatch, generateBatch) on every family, on Node WebGPU (Dawn on lavapipe) and
 * the CPU backend: a batch of prompts of different lengths gives, row by row, exactly the bits and tokens each prompt
 * gives alone; the tokens equal generate()'s; sequences stop on their own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgument } from '../errors';
import { CpuBackend } from '../tensor/cpu';
import type { Backend } from '../tensor/backend';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { FAMILIES, type Family } from './config';
import { Decoder } from './decoder';
import { generate, generateBatch } from './generate';
import { tinyCheckpoint, tinyConfig, tinyTensors } from '../testing/model';
import { loadDecoderWeights } from './weights';

const PROMPTS = [[3, 17, 0, 41, 8], [29, 5], [11, 2, 7, 19, 23, 31, 1]];

let gpu: WebGpuBackend;
const cpu = CpuBackend.reference();
beforeAll(async () => {
  gpu = await freshGpuBackend();
});
afterAll(() => gpu?.ctx.device.destroy());

async function model(family: Family, backend: Backend, over?: Record<string, unknown>) {
  const config = tinyConfig(family, over);
  return new Decoder(config, await loadDecoderWeights(config, await tinyCheckpoint(tinyTensors(config, 9)), backend, { quantize: 'q8_0' }));
}

const VARIANTS: [string, Family, Record<string, unknown>?][] = [
  ...FAMILIES.map((f): [string, Family] => [f, f]),
  ['qwen3_5 tied, layer_types', 'qwen3_5', { tie_word_embeddings: true, layer_types: ['linear_attention', 'full_attention'] }],
];

describe.each(VARIANTS)('batched steps %s', (_name, family, over) => {
  it('a batch equals each prompt alone (bits of the logits, greedy tokens), and generate()', async () => {
    for (const b of [gpu, cpu] as Backend[]) {
      const m = await model(family, b, over);
      // one step: the logits of each sequence in the batch, bit for bit those of the sequence alone
      const cache = m.newBatchCache(3, 12);
      PROMPTS.forEach((p, i) => {
        const ids = b.fromValues(p, [p.length], 'i32');
        const out = m.prefillRow(cache, i, { inputIds: ids });
        [ids, out.hidden].forEach((t) => t.dispose());
      });
      const step = m.stepBatch({ inputIds: b.fromValues([4, 9], [2], 'i32'), cache, rows: [2, 0], logits: true });
      const both = await step.logits!.read();
      const V = m.config.vocabSize;
      for (const [i, r] of [2, 0].entries()) {
        const one = m.newBatchCache(1, 12);
        const ids = b.fromValues(PROMPTS[r], [PROMPTS[r].length], 'i32');
        m.prefillRow(one, 0, { inputIds: ids }).hidden.dispose();
        const alone = await m.stepBatch({ inputIds: b.fromValues([[4, 9][i]], [1], 'i32'), cache: one, logits: true }).logits!.read();
        expect(Array.from(both.subarray(i * V, (i + 1) * V)), `${b.kind} sequence ${r}`).toEqual(Array.from(alone));
        one.dispose();
        ids.dispose();
      }
      expect(cache.lengths).toEqual([6, 2, 8]);
      cache.dispose();

      // whole generations: the batch, each prompt alone, and the plain single-sequence loop
      const batch = await generateBatch(m, { prompts: PROMPTS.map((p) => ({ inputIds: p })), maxNewTokens: 6 });
      for (const [i, p] of PROMPTS.entries()) {
        const alone = await generateBatch(m, { prompts: [{ inputIds: p }], maxNewTokens: 6 });
        expect(batch.rows[i], `${b.kind} prompt ${i}`).toEqual(alone.rows[0]);
        const single = await generate(m, { inputIds: p, maxNewTokens: 6, sampling: { greedy: true } });
        expect(batch.rows[i].tokens, `${b.kind} prompt ${i} vs generate`).toEqual(single.tokens);
      }
      m.dispose();
    }
  });
});

it('sequences stop on their own (EOS, stop callback) and the rest go on; sampled rows draw as lone ones', async () => {
  const m = await model('qwen3', gpu);
  const free = await generateBatch(m, { prompts: PROMPTS.map((p) => ({ inputIds: p })), maxNewTokens: 8 });
  // an EOS the second sequence emits at its third token ends it there; the others run to the length
  const eos = free.rows[1].tokens[2];
  const stopped = await generateBatch(m, {
    prompts: PROMPTS.map((p, row) => ({ inputIds: p, ...(row === 2 ? { stop: (t: readonly number[]) => t.length === 4 } : {}) })),
    maxNewTokens: 8,
    eosTokenIds: [eos],
  });
  const cut = (t: number[]) => t.slice(0, t.indexOf(eos) + 1 || undefined);
  expect(stopped.rows.map((r) => r.tokens)).toEqual([cut(free.rows[0].tokens), cut(free.rows[1].tokens), free.rows[2].tokens.slice(0, 4)]);
  expect(stopped.rows[1].stoppedBy).toBe('eos');
  expect(stopped.rows[2].stoppedBy).toBe(cut(free.rows[2].tokens).length <= 4 ? 'eos' : 'stop');
  const sampling = { temperature: 0.8, topK: 20, seed: 5 };
  const sampled = await generateBatch(m, { prompts: PROMPTS.map((p) => ({ inputIds: p })), maxNewTokens: 6, sampling });
  for (const [i, p] of PROMPTS.entries()) {
    const single = await generate(m, { inputIds: p, maxNewTokens: 6, sampling });
    expect(sampled.rows[i].tokens).toEqual(single.tokens);
  }
  m.dispose();
});

it('refuses a step for a sequence that was not prefilled or is full, and a second prefill', async () => {
  const m = await model('llama', gpu);
  const cache = m.newBatchCache(2, 6);
  const ids = gpu.fromValues([1, 2, 3, 4, 5], [5], 'i32');
  m.prefillRow(cache, 0, { inputIds: ids }).hidden.dispose();
  const x = gpu.fromValues([1, 1], [2], 'i32');
  expect(() => m.stepBatch({ inputIds: x, cache })).toThrow(/sequence 1 was not prefilled/);
  expect(() => m.prefillRow(cache, 0, { inputIds: ids })).toThrow(InvalidArgument);
  m.stepBatch({ inputIds: gpu.fromValues([1], [1], 'i32'), cache, rows: [0] }).hidden.dispose();
  expect(() => m.stepBatch({ inputIds: gpu.fromValues([1], [1], 'i32'), cache, rows: [0] })).toThrow(/sequence 0 is full/);
  cache.dispose();
  m.dispose();
});
