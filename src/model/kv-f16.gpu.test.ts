/**
 * The f16 KV cache (Decoder.kvDtype: the default on WebGPU devices with shader-f16, as lavapipe's; f32 on the CPU
 * backend, where it is an option) on Node WebGPU and the CPU, every family: the fused and plain paths agree on it, the
 * device agrees with the CPU, batched steps give each sequence its lone bits, and it stays within f16's rounding of
 * the f32 cache. Between two paths (or backends) the f32 values of k and v differ in their last bits; one that
 * straddles an f16 rounding boundary is stored one f16 ulp (2^-11 relative) apart, which moves the outputs by up to
 * about 2e-5 of their peak (measured 1.4e-5): bound 1e-4 there, where the f32 cache's is 1e-5.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../tensor/cpu';
import type { Backend } from '../tensor/backend';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { stepOutputs, tinyModelIn } from '../../test/util/fused-steps';
import { FAMILIES } from './config';
import { generate, generateBatch } from './generate';
import { scaledError } from '../testing/model';

let gpu: WebGpuBackend;
const cpu = CpuBackend.reference();
const ULP_TOL = 1e-4;
beforeAll(async () => {
  gpu = await freshGpuBackend();
});
afterAll(() => gpu?.ctx.device.destroy());

describe.each(FAMILIES)('f16 KV cache, %s', (family) => {
  it('fused equals plain on it; within f16 rounding of the f32 cache; the cache holds f16; the device as the CPU', async () => {
    const outs: number[][] = [];
    for (const b of [gpu, cpu] as Backend[]) {
      const m = await tinyModelIn(family, 'bf16', b);
      expect(m.kvDtype, `${b.kind}'s default`).toBe(b.kind === 'webgpu' ? 'f16' : 'f32');
      m.kvDtype = 'f32';
      const f32 = await stepOutputs(m, true);
      m.kvDtype = 'f16';
      const probe = m.newCache(4);
      expect(probe.k.find((t) => t)!.dtype).toBe('f16');
      probe.dispose();
      const plain = await stepOutputs(m, false);
      const fused = await stepOutputs(m, true);
      expect(scaledError(fused.out, plain.out), `${b.kind} fused vs plain`).toBeLessThan(ULP_TOL);
      // k and v rounded to f16 (2^-11 relative) move the outputs by about that much, and not by nothing
      const e = scaledError(fused.out, f32.out);
      expect(e, `${b.kind} f16 vs f32 cache`).toBeLessThan(1e-2);
      expect(e).toBeGreaterThan(0);
      outs.push(fused.out);
      m.dispose();
    }
    // the device's f16 cache against the CPU's (the same roundings of k and v; f32 arithmetic in another order)
    expect(scaledError(outs[0], outs[1])).toBeLessThan(ULP_TOL);
  });

  it('batched steps on an f16 cache: each prompt as alone, and as generate()', async () => {
    const m = await tinyModelIn(family, 'q8_0', gpu);
    expect(m.kvDtype).toBe('f16');
    const prompts = [[3, 17, 0, 41, 8], [29, 5], [11, 2, 7, 19, 23, 31, 1]];
    const batch = await generateBatch(m, { prompts: prompts.map((p) => ({ inputIds: p })), maxNewTokens: 5 });
    for (const [i, p] of prompts.entries()) {
      const alone = await generateBatch(m, { prompts: [{ inputIds: p }], maxNewTokens: 5 });
      expect(batch.rows[i]).toEqual(alone.rows[0]);
      expect(batch.rows[i].tokens).toEqual((await generate(m, { inputIds: p, maxNewTokens: 5, sampling: { greedy: true } })).tokens);
    }
    m.dispose();
  });
});
