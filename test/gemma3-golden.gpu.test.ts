/**
 * Gemma 3's ids path on WebGPU (Dawn on lavapipe) against torch float64 (test/golden/gemma3.ts): the whole sequence,
 * then one token at a time through a KV cache, which takes the fused one-token path. embed is the same F ops on every
 * backend (the f32 √hidden, nothing rounded to bf16). Bound 1e-5 of the peak (test/golden/check.ts's f32 floor);
 * measured ≤ 1.4e-7 with f32 KV caches. The old bf16 rule lands 8.0e-4..2.2e-3 off (test/gemma3-golden.test.ts).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { GEMMA3_IDS_CASES, formatIdsErrors, gemma3IdsErrors } from './golden/gemma3';
import { gpuBackend } from './util/gpu';

const TOL = 1e-5;

const measured: string[] = [];
afterAll(() => console.log(`gemma3 ids path on WebGPU, max|Δ|/max|want|:\n${measured.join('\n')}`));

describe.each(GEMMA3_IDS_CASES)('Gemma 3 ids path against torch on WebGPU (%s)', (name) => {
  it('embeddings, hidden states and logits, whole and one token at a time (fused steps)', async () => {
    const err = await gemma3IdsErrors(await gpuBackend(), name);
    measured.push(`${name} webgpu: ${formatIdsErrors(err)}`);
    for (const v of Object.values(err)) if (v !== null) expect(v).toBeLessThan(TOL);
  });
});
