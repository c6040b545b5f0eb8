import { describe, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { type ParityEnv, newRng } from '../../src/kernels/workbench/parity';
import { gpuBackend } from '../util/gpu';
import { allCases } from './all';

/** Registers every parity case as a test on this runtime's WebGPU backend. */
export function registerParitySuite(runtime: string) {
  for (const { group, cases } of allCases) {
    describe(`${group} parity (${runtime})`, () => {
      cases.forEach((c, i) => {
        it(c.name, async () => {
          const gpu = await gpuBackend();
          const env: ParityEnv = { gpu, cpu: new CpuBackend(), rng: newRng(1000 + i), f16: gpu.ctx.hasFeature('shader-f16') };
          await c.run(env);
          await gpu.sync();
        });
      });
    });
  }
}
