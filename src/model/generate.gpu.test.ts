/**
 * generate()'s decode counters on Node WebGPU (Dawn): the work it reports per decode step equals what one step
 * issued by hand (forward of one id on the cache, argmax, read back one i32) counts, and every weight is read exactly
 * once per token (the embedding table: its row). `rmas generate --json` prints the same figures per token.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { F } from '../autograd';
import { counterDelta } from '../gpu/counters';
import { tidy } from '../tensor/scope';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { rmasInProcess } from '../../test/util/rmas';
import { FAMILIES } from './config';
import { Decoder } from './decoder';
import { generate } from './generate';
import { tinyCheckpoint, tinyConfig, tinyTensors } from '../testing/model';
import { loadDecoderWeights, stepWeightBytes } from './weights';

let gpu: WebGpuBackend;
beforeAll(async () => {
  gpu = await freshGpuBackend();
});
afterAll(() => gpu?.ctx.device.destroy());

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
      expect([one.submits, one.readbacks]).toEqual([1, 1]);
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
  expect(g).toMatchObject({ tokens: 6, counted_steps: 4, submits_per_token: 1, readbacks_per_token: 1 });
  expect(Number.isInteger(g!.dispatches_per_token)).toBe(true);
  // qwen3-tiny ties its LM head to the table: every weight once, and the looked-up row of the table again (48 bf16)
  expect(g!.weight_bytes_per_token as number).toBe((g!.weight_bytes as number) + 96);
  // the CPU backend counts nothing
  expect([c!.dispatches_per_token, c!.weight_bytes_per_token, c!.counted_steps]).toEqual([null, null, 0]);
}, 120_000);
