// WebGPU-only check that does not fit a parity case: operands split across bindings.
import { afterAll, describe, it } from 'vitest';
import { CpuBackend } from '../../tensor/cpu';
import { WebGpuBackend } from '../../tensor/webgpu';
import { TOL, expectParity } from '../workbench';
import { Rng } from '../../util/rng';
import { softmaxBackwardKernel } from '.';
import { F } from '../../autograd';

describe('softmax on split tensors (node dawn)', () => {
  let gpu: WebGpuBackend | null = null;
  afterAll(() => gpu?.ctx.destroy());

  it('walks chunks of a [3, 13, 100] tensor split along dim 0 by a 6 KiB binding limit', async () => {
    gpu = await WebGpuBackend.create({ bindingLimit: 6 * 1024 });
    const cpu = new CpuBackend();
    const rng = new Rng(4);
    const shape = [3, 13, 100]; // 5200 bytes per dim-0 slice: one slice per binding, three chunks
    const xv = rng.normals(3900, 3);
    const dyv = rng.normals(3900);
    const [xg, xc] = [gpu.fromValues(xv, shape), cpu.fromValues(xv, shape)];
    if ((xg.storage as { chunks: unknown[] }).chunks.length !== 3) throw new Error('expected the tensor to be split into 3 chunks');
    for (const log of [false, true]) {
      const fn = log ? F.logSoftmax : F.softmax;
      const [yg, yc] = [fn(xg), fn(xc)];
      await expectParity(yg, yc, TOL.f32, `${log ? 'log' : ''}softmax split`);
      const [dyg, dyc] = [gpu.fromValues(dyv, shape), cpu.fromValues(dyv, shape)];
      await expectParity(
        gpu.run(softmaxBackwardKernel, [yg, dyg], { log })[0],
        cpu.run(softmaxBackwardKernel, [yc, dyc], { log })[0],
        TOL.f32,
        `${log ? 'log' : ''}softmax backward split`,
      );
    }
  });
});
