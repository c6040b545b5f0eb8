/**
 * The op set composes exactly like the real models: a Llama/Qwen decoder layer with Llama-3 RoPE scaling
 * and an inner RecursiveLink, built from F.* ops, against torch 1.13 float64 (test/golden/decoder.json,
 * made by scripts/golden/decoder.py). Outputs, losses and every gradient, on CpuBackend f64 and f32; WebGPU runs the
 * same cases in golden.gpu.test.ts (Dawn) and golden.browser.test.ts (Chromium).
 */
import { describe, expect, it } from 'vitest';
import type { Backend } from '../src/tensor/backend';
import { CpuBackend } from '../src/tensor/cpu';
import { type Compared, GOLDEN_TOL, compare, decoderCase, decoderGolden, decoderRope, linkCase, worstScaled } from './golden/check';
import { ropeInvFreq } from '../src/kernels/rope';

function expectGolden(results: Compared[], tol: (typeof GOLDEN_TOL)['f32'], what: string) {
  const reports = compare(results, tol);
  const bad = reports.filter((r) => !r.ok).map((r) => r.message);
  expect(bad, `${what}:\n${bad.join('\n')}`).toEqual([]);
  // one line per case so that the measured margins are visible in the test log
  const w = worstScaled(results);
  console.info(`golden ${what}: worst |err|/max|want| ${w.err.toExponential(2)} (${w.label}); ${reports.length} arrays`);
}

describe('golden: RoPE frequencies', () => {
  it('ropeInvFreq follows HF _compute_llama3_parameters in all three bands', () => {
    const r = decoderGolden.rope;
    expect(r.bands).toEqual(['high (kept)', 'high (kept)', 'medium (blended)', 'low (/factor)']);
    const ours = ropeInvFreq(decoderRope);
    // HF evaluates in f32 torch ops, we in f64 rounded once: 1 f32 ulp apart in the blended band
    for (let i = 0; i < ours.length; i++) expect(Math.abs(ours[i] - r.inv_freq_f32[i])).toBeLessThanOrEqual(2 ** -23 * r.inv_freq_f32[i]);
    // the scaling really moved the two low frequencies
    expect(r.inv_freq_f32[2]).toBeLessThan(r.inv_freq_default_f32[2] / 2);
    expect(r.inv_freq_f32[3]).toBeCloseTo(r.inv_freq_default_f32[3] / 8, 12);
  });
});

const cases: [name: string, make: () => Backend, tol: (typeof GOLDEN_TOL)['f32']][] = [
  ['cpu f64', () => new CpuBackend('f64'), GOLDEN_TOL.f64],
  ['cpu f32', () => new CpuBackend('f32'), GOLDEN_TOL.f32],
];

describe.each(cases)('golden vs torch on %s', (name, make, tol) => {
  // f64 rotates by torch's own f32 frequencies (bit-equal, as a 1-ulp frequency shifts angles by ~1e-8);
  // f32 by ropeInvFreq, the way a model runs
  const freq = name === 'cpu f64' ? 'torch' : 'ropeInvFreq';

  it('decoder layer: hidden, logits, loss and every gradient', async () => {
    expectGolden(await decoderCase(make(), freq), tol, `decoder on ${name}`);
  });

  it('inner RecursiveLink: output, masked cosine loss and every gradient', async () => {
    expectGolden(await linkCase(make()), tol, `link on ${name}`);
  });
});
