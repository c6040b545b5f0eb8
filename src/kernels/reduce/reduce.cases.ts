import { F } from '../../autograd';
import { WebGpuBackend } from '../../tensor/webgpu';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, type ParityEnv, TOL, expectParity, pair } from '../workbench';
import { clipGradNormKernel, reduceBackwardKernel } from '.';

/**
 * A second device whose grids fold above 7 workgroups per dimension and whose bindings hold
 * `bindingLimit` bytes (1 KiB; null: the adapter's limit). The caller destroys it.
 */
export async function smallDevice(bindingLimit: number | null = 1024): Promise<WebGpuBackend> {
  return WebGpuBackend.create({ bindingLimit: bindingLimit ?? undefined, maxWorkgroupsPerDimension: 7 });
}

const REDUCERS = ['sum', 'mean', 'sumSquares', 'sumLastDim', 'meanLastDim'] as const;

/** Sums of n terms in a different order: f32 rounding grows like sqrt(n) * eps * sum |x|. */
const sumTol = (n: number) => ({ atol: 1e-5 * Math.max(1, Math.sqrt(n) / 8), rtol: 1e-4 });

async function forwardAndBackward(env: ParityEnv, shape: number[], tol = TOL.f32) {
  const n = shape.reduce((a, b) => a * b, 1);
  const x = pair(env, env.rng.normals(n), shape);
  for (const name of REDUCERS) {
    const yg = F[name](x.g);
    const yc = F[name](x.c);
    await expectParity(
      yg,
      yc,
      name.startsWith('sum') ? sumTol(name.endsWith('LastDim') ? shape[shape.length - 1] : n) : tol,
      `${name} [${shape}]`,
    );
    const g = pair(env, env.rng.normals(yc.numel), yc.shape);
    const op = name === 'sumSquares' ? 'sumsq' : name.startsWith('sum') ? 'sum' : 'mean';
    const axis = name.endsWith('LastDim') ? 'last' : 'all';
    const attrs = { op, axis, shape } as const;
    const [dg] = env.gpu.run(reduceBackwardKernel, op === 'sumsq' ? [g.g, x.g] : [g.g], attrs);
    const [dc] = env.cpu.run(reduceBackwardKernel, op === 'sumsq' ? [g.c, x.c] : [g.c], attrs);
    await expectParity(dg, dc, tol, `${name} backward [${shape}]`);
  }
}

const odd: ParityCase[] = [1, 3, 17, 96, 200].map((n) => ({
  name: `reduce forward+backward [${n}, 7] and [${n}]`,
  async run(env) {
    await forwardAndBackward(env, [n, 7]);
    await forwardAndBackward(env, [n]);
  },
}));

export const cases: ParityCase[] = [
  ...odd,
  {
    // 100,003 elements: 49 stage-1 segments; rows of 5,000: 3 segments per row (the two-stage path)
    name: 'reduce two-stage path [100003] and [3, 5000]',
    async run(env) {
      const x = pair(env, env.rng.normals(100_003), [100_003]);
      await expectParity(F.sum(x.g), F.sum(x.c), sumTol(100_003), 'sum 100003');
      await expectParity(F.sumSquares(x.g), F.sumSquares(x.c), { atol: 1e-5, rtol: 2e-5 }, 'sumSquares 100003');
      await expectParity(F.mean(x.g), F.mean(x.c), TOL.f32, 'mean 100003');
      const r = pair(env, env.rng.normals(15_000), [3, 5000]);
      await expectParity(F.sumLastDim(r.g), F.sumLastDim(r.c), sumTol(5000), 'sumLastDim [3, 5000]');
      await expectParity(F.meanLastDim(r.g), F.meanLastDim(r.c), TOL.f32, 'meanLastDim [3, 5000]');
    },
  },
  {
    name: 'reduce is deterministic and handles empty tensors',
    async run(env) {
      const x = env.gpu.fromValues(env.rng.normals(70_001), [70_001]);
      const a = await F.sum(x).read();
      const b = await F.sum(x).read();
      if (a[0] !== b[0]) throw new Error(`sum differs between runs: ${a[0]} vs ${b[0]}`);
      const e = pair(env, [], [0]);
      await expectParity(F.sum(e.g), F.sum(e.c), TOL.f32, 'empty sum');
      await expectParity(F.mean(e.g), F.mean(e.c), TOL.f32, 'empty mean (NaN)');
      const z = pair(env, [], [3, 0]);
      await expectParity(F.sumLastDim(z.g), F.sumLastDim(z.c), TOL.f32, 'sumLastDim [3, 0]');
    },
  },
  {
    name: 'clip_grad_norm over several gradients [17, 3], [200], [1]',
    async run(env) {
      for (const maxNorm of [0.5, 1000]) {
        const gs = [[17, 3], [200], [1]].map((s) => pair(env, env.rng.normals(s.reduce((a, b) => a * b, 1)), s));
        const [tg] = env.gpu.run(clipGradNormKernel, gs.map((p) => p.g), { maxNorm });
        const [tc] = env.cpu.run(clipGradNormKernel, gs.map((p) => p.c), { maxNorm });
        await expectParity(tg, tc, TOL.f32, `total norm (maxNorm ${maxNorm})`);
        for (const [i, p] of gs.entries()) await expectParity(p.g, p.c, TOL.f32, `clipped gradient ${i} (maxNorm ${maxNorm})`);
      }
    },
  },
  {
    // a context that pretends bindings hold 1 KiB (a [40, 17] tensor is split into 3 chunks of 15 rows)
    // and that a grid dimension holds 7 workgroups (every grid above 7 folds into y, as grids above
    // 65,535 workgroups do on real devices, without running 65,536 workgroups here)
    name: 'reduce and clip walk tensors split across bindings, on folded grids',
    webgpuOnly: true,
    async run(env) {
      const small = await smallDevice();
      try {
        const v = env.rng.normals(40 * 17);
        const xs = small.fromValues(v, [40, 17]);
        const xc = env.cpu.fromValues(v, [40, 17]);
        const chunks = (xs.storage as { chunks: unknown[] }).chunks.length;
        if (chunks !== 3) throw new Error(`expected 3 chunks, got ${chunks}`);
        for (const name of REDUCERS) await expectParity(F[name](xs), F[name](xc), TOL.f32, `${name} split`);
        const g = env.rng.normals(40);
        const gs = small.fromValues(g, [40]);
        const gc = env.cpu.fromValues(g, [40]);
        const attrs = { op: 'sumsq', axis: 'last', shape: [40, 17] } as const;
        await expectParity(
          small.run(reduceBackwardKernel, [gs, xs], attrs)[0],
          env.cpu.run(reduceBackwardKernel, [gc, xc], attrs)[0],
          TOL.f32,
          'sumsq backward split',
        );
        const [ts] = small.run(clipGradNormKernel, [xs, gs], { maxNorm: 1 });
        const [tc] = env.cpu.run(clipGradNormKernel, [xc, gc], { maxNorm: 1 });
        await expectParity(ts, tc, TOL.f32, 'clip total split');
        await expectParity(xs, xc as Tensor, TOL.f32, 'clipped split tensor');
        await small.sync();
      } finally {
        small.ctx.destroy();
      }
    },
  },
];
