/**
 * The fused inference path against the plain one on the browser's adapter (headless Chromium, SwiftShader, no
 * shader-f16): every family and weight dtype, the same check as fused.gpu.test.ts makes on lavapipe.
 */
import { describe, expect, it } from 'vitest';
import { gpuBackend } from '../../test/util/gpu';
import { STEP_DTYPES, stepOutputs, tinyModelIn } from '../../test/util/fused-steps';
import { FAMILIES } from './config';
import { scaledError } from '../testing/model';

describe.each(FAMILIES)('fused steps on SwiftShader, %s', (family) => {
  it.each(STEP_DTYPES)('%s weights: equal to the plain path within 1e-5 of the peak; ≤ 8 + 2 dispatches per layer', async (dtype) => {
    const gpu = await gpuBackend();
    const m = await tinyModelIn(family, dtype, gpu);
    const plain = await stepOutputs(m, false);
    const fused = await stepOutputs(m, true);
    expect(scaledError(fused.out, plain.out)).toBeLessThan(1e-5);
    // a steady step (the first prepares the fused path's concatenated biases)
    const perLayer = (fused.dispatches.at(-1)! - 2 - (m.config.finalSoftcap !== null ? 3 : 0)) / m.config.layers;
    // SwiftShader takes the GEMVs' narrow cut (ContextOptions.gemv): a prologue dispatch per normalised GEMV, 2 a layer
    expect(gpu.ctx.gemvNarrow).toBe(true);
    expect(perLayer, `${fused.dispatches} fused layers ${m.fused.fusedLayers} plain ${plain.dispatches}`).toBeLessThanOrEqual(8 + 2);
    m.dispose();
  });
});
