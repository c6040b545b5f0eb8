import { afterAll, describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import { CpuBackend } from '../../tensor/cpu';
import { WebGpuBackend } from '../../tensor/webgpu';
import { Rng } from '../../util/rng';

describe('sample on logits split across storage bindings (Dawn)', () => {
  let gpu: WebGpuBackend | null = null;
  afterAll(() => gpu?.ctx.destroy());

  it('walks the chunks and hashes the global row index', async () => {
    const [rows, v] = [7, 64];
    gpu = await WebGpuBackend.create({ bindingLimit: 3 * v * 4 }); // 3 rows a binding: chunks of 3, 3, 1
    const cpu = new CpuBackend();
    // spread-out logits: a draw within f32 rounding of a cumulative boundary has odds of about 1e-6
    const x = new Rng(8).normals(rows * v, 4);
    const g = gpu.fromValues(x, [rows, v]);
    expect((g.storage as { chunks: unknown[] }).chunks.length).toBe(3);
    const c = cpu.fromValues(x, [rows, v]);
    expect([...(await F.argmax(g).readI32())]).toEqual([...(await F.argmax(c).readI32())]);
    for (let step = 0; step < 4; step++) {
      const o = { temperature: 1, topK: 6, seed: 99, step };
      expect([...(await F.sample(g, o).readI32())], `step ${step}`).toEqual([...(await F.sample(c, o).readI32())]);
    }
  });
});
