/**
 * generate() on Node WebGPU (Dawn): on the committed tiny Qwen3 its greedy and seeded tokens are the CPU's
 * (generate.test.ts holds those to an uncached loop); its decode counters per step equal what one step issued by
 * hand (forward of one id on the cache, argmax, read back one i32) counts, and every weight is read exactly once per
 * token (the embedding table: its row). `rmas generate --json` prints the same figures per token.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { F } from '../autograd';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { counterDelta, stepSubmits } from '../gpu/counters';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { tidy } from '../tensor/scope';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { rmasInProcess } from '../../test/util/rmas';
import { FAMILIES, parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import { generate, generateBatch } from './generate';
import { tinyCheckpoint, tinyConfig, tinyTensors, uncachedGreedy } from '../testing/model';
import { loadDecoderWeights, stepWeightBytes } from './weights';

let gpu: WebGpuBackend;
beforeAll(async () => {
  gpu = await freshGpuBackend();
});
afterAll(() => gpu?.ctx.device.destroy());

describe('the tiny Qwen3 on WebGPU decodes the tokens it does on the CPU', () => {
  const DIR = 'models/tiny/qwen3-tiny';
  const PROMPT = [72, 101, 108, 108, 111, 44, 32, 119]; // byte-level ids of "Hello, w"
  const N = 12;
  const load = async (backend: Backend) => {
    const config = parseDecoderConfig(readFileSync(`${DIR}/config.json`, 'utf8'));
    return new Decoder(config, await loadDecoderWeights(config, await openCheckpoint(DIR), backend));
  };
  let cpuModel: Decoder;
  let gpuModel: Decoder;
  beforeAll(async () => {
    cpuModel = await load(new CpuBackend('f32'));
    gpuModel = await load(gpu);
  });
  afterAll(() => gpuModel?.weights.dispose());

  it('greedy: generate and the uncached loop', async () => {
    const want = await uncachedGreedy(cpuModel, PROMPT, N);
    expect((await generate(gpuModel, { inputIds: PROMPT, maxNewTokens: N, sampling: { greedy: true } })).tokens).toEqual(want);
    expect(await uncachedGreedy(gpuModel, PROMPT, N)).toEqual(want);
  });

  it('inputsEmbeds = embed(ids) gives the ids-in tokens', async () => {
    const want = await generate(gpuModel, { inputIds: PROMPT, maxNewTokens: 8 });
    const emb = gpuModel.embed(gpu.fromValues(PROMPT, [PROMPT.length], 'i32'));
    const got = await generate(gpuModel, { inputsEmbeds: emb, maxNewTokens: 8 });
    emb.dispose();
    expect(got.tokens).toEqual(want.tokens);
  });

  it('seeded sampling, and generateBatch stopping where a short context ends', async () => {
    const s = { temperature: 1.5, topK: 0, topP: 1, seed: 7 };
    const [c, g] = [cpuModel, gpuModel].map((m) => generate(m, { inputIds: PROMPT, maxNewTokens: N, sampling: s }));
    expect((await g!).tokens).toEqual((await c!).tokens);
    const short = new Decoder({ ...gpuModel.config, maxPositions: 16 }, gpuModel.weights);
    const want = await generate(cpuModel, { inputIds: PROMPT, maxNewTokens: 9, eosTokenIds: [] });
    const b = await generateBatch(short, { prompts: [{ inputIds: PROMPT }], maxNewTokens: 1_000_000, eosTokenIds: [] });
    expect(b.rows[0]!.tokens).toEqual(want.tokens);
  });
});

describe.each(FAMILIES)('decode counters, %s (WebGPU)', (family) => {
  it('per step, what one step issued by hand counts; every weight read once', async () => {
    const config = tinyConfig(family);
    const model = new Decoder(config, await loadDecoderWeights(config, await tinyCheckpoint(tinyTensors(config, 11)), gpu));
    try {
      const r = await generate(model, { inputIds: [3, 17, 5], maxNewTokens: 6, sampling: { greedy: true } });
      const c = r.decodeCounters!;
      expect(c.steps).toBe(4); // the decode steps after the first of 5
      // by hand: a prefill, then one decode step
      const cache = model.newCache(3 + 6); // as generate sizes it: bindings of the cache are its whole buffers
      const first = tidy(() =>
        F.argmax(model.forward({ inputIds: gpu.fromValues([3, 17, 5], [3], 'i32'), cache, logits: 'last' }).logits!),
      );
      await first.readI32();
      const before = gpu.counters();
      const next = tidy(() => F.argmax(model.forward({ inputIds: first, cache, logits: 'last' }).logits!));
      await next.readI32();
      const one = counterDelta(before, gpu.counters());
      expect([c.dispatches / 4, c.submits / 4, c.readbacks / 4, c.weightBytes / 4, c.activationBytes / 4])
        .toEqual([one.dispatches, one.submits, one.readbacks, one.weightBytes, one.activationBytes]);
      expect([one.submits, one.readbacks]).toEqual([stepSubmits(one.dispatches), 1]);
      // every weight read once (the fused path), the embedding table only its looked-up row
      expect(one.weightBytes).toBe(stepWeightBytes(model.weights));
      [first, next].forEach((t) => t.dispose());
      cache.dispose();
    } finally {
      model.dispose();
    }
  });
});

it('rmas generate --json prints the counters per token of the decode steps after the first', async () => {
  const args = [
    'generate',
    '--model',
    'models/tiny/qwen3-tiny',
    '--prompt',
    'Add 17 and 25.',
    '--greedy',
    '--max-new-tokens',
    '6',
    '--json',
  ];
  const [gr, cr] = [await rmasInProcess(...args, '--backend', 'webgpu'), await rmasInProcess(...args, '--backend', 'cpu')];
  expect([gr.code, cr.code]).toEqual([0, 0]);
  const [g, c] = [gr, cr].map((r) => JSON.parse(r.out) as Record<string, number | string | null>);
  expect(g!.text).toBe(c!.text); // the same greedy tokens on both backends
  expect(g).toMatchObject({ tokens: 6, counted_steps: 4, readbacks_per_token: 1 });
  expect(Number.isInteger(g!.dispatches_per_token)).toBe(true);
  expect(g!.submits_per_token).toBe(stepSubmits(g!.dispatches_per_token as number));
  // qwen3-tiny ties its LM head to the table: every weight once, and the looked-up row of the table again (48 bf16)
  expect(g!.weight_bytes_per_token as number).toBe((g!.weight_bytes as number) + 96);
  // the CPU backend counts nothing
  expect([c!.dispatches_per_token, c!.weight_bytes_per_token, c!.counted_steps]).toEqual([null, null, 0]);
}, 120_000);
