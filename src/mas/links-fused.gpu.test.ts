/**
 * The inner link's fused path (a latent step's link in at most 3 dispatches, one more in the GEMVs' narrow cut: the
 * LayerNorm's prologue) against its plain ops, for every inner link type, on Node WebGPU (Dawn on lavapipe) and on the
 * CPU backend.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CpuBackend } from '../tensor/cpu';
import type { Backend } from '../tensor/backend';
import type { WebGpuBackend } from '../tensor/webgpu';
import { freshGpuBackend } from '../../test/util/gpu';
import { Rng } from '../util/rng';
import { scaledError } from '../testing/model';
import { INNER_LINK_TYPES, type InnerLinkType, InnerLink } from './links';

let gpu: WebGpuBackend;
const cpu = new CpuBackend('f32');
beforeAll(async () => {
  gpu = await freshGpuBackend();
});
afterAll(() => gpu?.ctx.device.destroy());

const D = 48;

describe.each(Object.keys(INNER_LINK_TYPES) as InnerLinkType[])('fused inner link %s', (type) => {
  it('equals the plain ops for 1 and 3 rows; at most 3 dispatches on WebGPU (+1 narrow)', async () => {
    for (const b of [gpu, cpu] as Backend[]) {
      const link = InnerLink.create(b, D, { type, seed: 7 });
      // trained links have LN weights away from 1 and 0: perturb them so the fold is tested
      const state = await link.stateDict();
      const rng = new Rng(3);
      for (const [name, t] of state)
        if (/_ln\./.test(name)) t.data.set(rng.normals(t.data.length, 0.3).map((v) => (name.endsWith('weight') ? 1 : 0) + v));
      link.load(state);
      for (const rows of [1, 3]) {
        const x = b.fromValues(new Rng(rows).normals(rows * D, 2).map((v, i) => v + (i % 5)), [rows, D]);
        link.fusedSteps = false;
        const plain = link.forward(x);
        link.fusedSteps = true;
        const before = b.counters?.().dispatches ?? 0;
        const fused = link.forward(x);
        const dispatches = (b.counters?.().dispatches ?? 0) - before;
        const err = scaledError(await fused.read(), await plain.read());
        expect(err, `${b.kind} rows ${rows}`).toBeLessThan(1e-5);
        if (b.kind === 'webgpu') expect(dispatches).toBeLessThanOrEqual(3 + (gpu.ctx.gemvNarrow ? 1 : 0));
        [x, plain, fused].forEach((t) => t.dispose());
      }
      link.dispose();
    }
  });
});
