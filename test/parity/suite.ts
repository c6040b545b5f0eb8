import { describe, it } from 'vitest';
import { CpuBackend } from '../../src/tensor/cpu';
import { type ParityEnv, newRng } from '../../src/kernels/workbench/parity';
import { WebGpuBackend } from '../../src/tensor/webgpu';
import { gpuBackend } from '../util/gpu';
import { allCases } from './all';

/**
 * Registers every parity case as a test on this runtime's WebGPU backend, and the fused GEMV's cases again on its other
 * cut. `otherCut` picks which of those (by case name) run there: the other cut's sums in workgroup memory are the same
 * WGSL whatever the weights' dtype, so a runtime that compiles them slowly may run a subset of the weight walks.
 */
export function registerParitySuite(runtime: string, otherCut: (name: string) => boolean = () => true) {
  for (const { group, cases } of allCases) {
    describe(`${group} parity (${runtime})`, () => {
      cases.forEach((c, i) => {
        it(c.name, async () => {
          const gpu = await gpuBackend();
          const env: ParityEnv = { gpu, cpu: CpuBackend.reference(), rng: newRng(1000 + i), f16: gpu.ctx.hasFeature('shader-f16') };
          await c.run(env);
          await gpu.sync();
        });
      });
    });
  }
  // the fused GEMV's other cut (wide on a CPU rasteriser, narrow on a GPU: ContextOptions.gemv), its sums in workgroup
  // memory (model/fused.gpu.test.ts runs both cuts through subgroups), against the same CPU reference
  let other: Promise<WebGpuBackend> | null = null;
  const fused = allCases.find((g) => g.group === 'fused')!.cases;
  describe(`fused GEMV parity, the other cut (${runtime})`, () => {
    fused.forEach((c, i) => {
      if (!c.name.startsWith('fused GEMV') || !otherCut(c.name)) return;
      it(c.name, async () => {
        other ??= gpuBackend().then((g) => WebGpuBackend.create({
          gemv: g.ctx.gemvNarrow ? 'wide' : 'narrow', disableFeatures: ['subgroups'],
        }));
        const gpu = await other;
        const env: ParityEnv = { gpu, cpu: CpuBackend.reference(), rng: newRng(1000 + i), f16: gpu.ctx.hasFeature('shader-f16') };
        await c.run(env);
        await gpu.sync();
      });
    });
  });
}
