/**
 * The golden decoder layer and inner RecursiveLink (see golden.test.ts) on WebGPU in Chromium
 * (SwiftShader here): the same F.* composition from test/golden/check.ts, against torch float64.
 */
import { describe, expect, it } from 'vitest';
import { GOLDEN_TOL, compare, decoderCase, linkCase, worstScaled } from './golden/check';
import { gpuBackend } from './util/gpu';

describe('golden vs torch on webgpu (chromium)', () => {
  for (const [what, run] of [
    ['decoder layer', async () => decoderCase(await gpuBackend(), 'ropeInvFreq')],
    ['inner RecursiveLink', async () => linkCase(await gpuBackend())],
  ] as const) {
    it(`${what}: outputs, loss and every gradient`, async () => {
      const results = await run();
      const bad = compare(results, GOLDEN_TOL.f32).filter((r) => !r.ok).map((r) => r.message);
      expect(bad, bad.join('\n')).toEqual([]);
      const w = worstScaled(results);
      console.info(`golden ${what} on chromium: worst |err|/max|want| ${w.err.toExponential(2)} (${w.label})`);
    });
  }
});
