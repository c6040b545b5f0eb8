/**
 * The golden decoder layer and inner RecursiveLink on WebGPU, shared by test/golden.gpu.test.ts (Node, Dawn on
 * lavapipe) and test/golden.browser.test.ts (Chromium, SwiftShader): the F.* composition of ./check.ts against torch
 * float64, at f32 tolerance, with the worst scaled error printed so that the margins are visible in the test log.
 */
import { describe, expect, it } from 'vitest';
import { GOLDEN_TOL, compare, decoderCase, linkCase, worstScaled } from './check';
import { gpuBackend } from '../util/gpu';

export function webgpuGoldenSuite(runtime: string) {
  describe(`golden vs torch on webgpu (${runtime})`, () => {
    for (const [what, run] of [
      ['decoder layer', async () => decoderCase(await gpuBackend(), 'ropeInvFreq')],
      ['inner RecursiveLink', async () => linkCase(await gpuBackend())],
    ] as const) {
      it(`${what}: outputs, loss and every gradient`, async () => {
        const results = await run();
        const bad = compare(results, GOLDEN_TOL.f32).filter((r) => !r.ok).map((r) => r.message);
        expect(bad, bad.join('\n')).toEqual([]);
        const w = worstScaled(results);
        console.info(`golden ${what} on ${runtime}: worst |err|/max|want| ${w.err.toExponential(2)} (${w.label})`);
      });
    }
  });
}
