/**
 * `rmas ask` (in-process, CPU f32) on a sequential system whose links PyTorch saved, against the PyTorch
 * float64 reference of the same stages (see ./ask-golden.ts). Latents cross three agents and two rounds
 * in f32, so errors accumulate across stages: measured ≤ 3.2e-7 of each array's peak (≤ 6.8e-7 on
 * WebGPU/lavapipe, test/mas/ask.gpu.test.ts); bound 1e-5.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { expectDecodeMatchesGolden, expectStagesMatchGolden, goldenAskRun } from './ask-golden';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-ask-golden-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('rmas ask vs PyTorch, CPU', () => {
  it('two rounds: every dumped stage (ids, latents in, hidden, latents out) matches the reference', async () => {
    const { stages } = await goldenAskRun(new CpuBackend('f32'), tmp, 2);
    const worst = expectStagesMatchGolden(stages, 1e-5);
    expect(worst).toBeGreaterThan(0);
  });

  it('one round: the solver decodes the reference ids', async () => {
    const { stages } = await goldenAskRun(new CpuBackend('f32'), tmp, 1);
    expectDecodeMatchesGolden(stages);
  });
});
