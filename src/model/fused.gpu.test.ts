/**
 * The fused inference path (model/fused.ts) against the differentiable path, on every family and weight dtype, on
 * Node WebGPU (Dawn on lavapipe) and on the CPU backend: after the same prefill, one-token steps with fusedSteps on and
 * off give the same hidden states and logits within 1e-5 of their peak, and on WebGPU a step takes at most 8 dispatches
 * per layer (2 more in the GEMVs' narrow cut), with the GEMV's sums through subgroups (lavapipe has them, laid out as
 * the reductions assume) and, on a second device without the feature, through workgroup memory; both in the GEMVs'
 * narrow cut (lavapipe's default, a CPU rasteriser), and on a third device in the wide cut GPUs keep
 * (ContextOptions.gemv). On f32 KV caches: with f16 ones (the default on shader-f16 devices) a k or v whose two f32
 * results straddle an f16 rounding boundary is stored one ulp apart, which kv-f16.gpu.test.ts bounds on its own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../tensor/cpu';
import type { Backend } from '../tensor/backend';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { FAMILIES, type Family } from './config';
import { scaledError } from '../testing/model';
import { STEP_DTYPES, stepOutputs, tinyModelIn } from '../../test/util/fused-steps';

/** Measured ≤ 2e-6 of peak on lavapipe and the CPU (f32 rounding in another order); the bound is 1e-5. */
const TOL = 1e-5;

let gpu: WebGpuBackend;
let noSubgroups: WebGpuBackend;
let wide: WebGpuBackend;
const cpu = CpuBackend.reference();
beforeAll(async () => {
  gpu = await freshGpuBackend();
  noSubgroups = await freshGpuBackend({ disableFeatures: ['subgroups'] });
  wide = await freshGpuBackend({ gemv: 'wide' });
  expect([gpu.ctx.gemvNarrow, noSubgroups.ctx.gemvNarrow, wide.ctx.gemvNarrow]).toEqual([true, true, false]);
  expect(gpu.ctx.subgroupReduce).toBe(true);
  expect(noSubgroups.ctx.subgroupReduce).toBe(false);
});
afterAll(() => {
  gpu?.ctx.device.destroy();
  noSubgroups?.ctx.device.destroy();
  wide?.ctx.device.destroy();
});

const VARIANTS: [string, Family, Record<string, unknown>?][] = [
  ...FAMILIES.map((f): [string, Family] => [f, f]),
  ['qwen3_5 tied, layer_types', 'qwen3_5', { tie_word_embeddings: true, layer_types: ['linear_attention', 'full_attention'] }],
];

describe.each(VARIANTS)('fused steps %s', (_name, family, over) => {
  const title = '%s weights: equal to the plain path on WebGPU and the CPU; ≤ 8 dispatches per layer (+2 narrow)';
  it.each(STEP_DTYPES)(title, async (dtype) => {
    const perLayers: number[] = [];
    for (const b of [gpu, noSubgroups, wide, cpu] as Backend[]) {
      const m = await tinyModelIn(family, dtype, b, over);
      m.kvDtype = 'f32';
      expect(m.fused.fusedLayers).toBe(m.config.layers);
      const plain = await stepOutputs(m, false);
      const fused = await stepOutputs(m, true);
      const err = scaledError(fused.out, plain.out);
      expect(err, b === noSubgroups ? 'webgpu without subgroups' : b === wide ? 'webgpu, wide GEMVs' : b.kind).toBeLessThan(TOL);
      if (b.kind === 'webgpu') {
        // a steady step (the first prepares the fused path's concatenated biases): the layers, the final norm and the
        // logits (a GEMV; Gemma also soft-caps: 3 more)
        const perLayer = (fused.dispatches.at(-1)! - 2 - (m.config.finalSoftcap !== null ? 3 : 0)) / m.config.layers;
        console.log(
          `${_name} ${dtype}: fused vs plain ${err.toExponential(2)} of peak; dispatches per step ${fused.dispatches.at(-1)} (plain ${plain.dispatches.at(-1)}), ${perLayer} per layer`,
        );
        perLayers.push(perLayer);
        expect(fused.dispatches.at(-1)!).toBeLessThan(plain.dispatches.at(-1)!);
      }
      m.dispose();
    }
    // the narrow cut adds one dispatch per normalised GEMV, two a layer: its norm's prologue
    const [narrow, narrowTree, wideCut] = perLayers;
    expect(wideCut).toBeLessThanOrEqual(8);
    expect([narrow, narrowTree]).toEqual([wideCut + 2, wideCut + 2]);
  });
});
