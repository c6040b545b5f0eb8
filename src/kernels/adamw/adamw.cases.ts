import { F, Tape } from '../../autograd';
import { FlatParams, type ParamSpec } from '../../autograd/params';
import type { Backend } from '../../tensor/backend';
import { VIEW_ALIGN } from '../../tensor/backend';
import { WebGpuBackend } from '../../tensor/webgpu';
import { type ParityCase, TOL, assertClose, expectParity, pair } from '../workbench';
import { smallDevice } from '../reduce/reduce.cases';
import { assignKernel, fillKernel } from '.';

const adamwSizes: ParityCase[] = [1, 3, 17, 96, 200, 5000].map((n) => ({
  name: `adamw 3 steps over [${n}] with a decay mask`,
  async run(env) {
    const p = pair(env, env.rng.normals(n), [n]);
    const m = pair(env, new Float32Array(n), [n]);
    const v = pair(env, new Float32Array(n), [n]);
    const mask = pair(env, Array.from({ length: n }, (_, i) => (i % 3 ? 1 : 0)), [n]);
    for (let t = 1; t <= 3; t++) {
      const g = pair(env, env.rng.normals(n, 0.1), [n]);
      const opts = { lr: 1e-2 * t, t, weightDecay: 0.1 };
      F.adamwStep(p.g, g.g, m.g, v.g, { ...opts, decayMask: mask.g });
      F.adamwStep(p.c, g.c, m.c, v.c, { ...opts, decayMask: mask.c });
    }
    await expectParity(p.g, p.c, TOL.f32, 'params');
    await expectParity(m.g, m.c, TOL.f32, 'm');
    await expectParity(v.g, v.c, TOL.f32, 'v');
    const g = pair(env, env.rng.normals(n, 0.1), [n]);
    // no mask: every element decays; and hyperparameters off their defaults (an eps near sqrt(v) moves
    // the update by ~10%), so a shader that kept the defaults shows
    const h = { lr: 1e-2, t: 4, weightDecay: 0.5, beta1: 0.8, beta2: 0.99, eps: 0.03 };
    F.adamwStep(p.g, g.g, m.g, v.g, h);
    F.adamwStep(p.c, g.c, m.c, v.c, h);
    await expectParity(p.g, p.c, TOL.f32, 'params without mask');
    await expectParity(m.g, m.c, TOL.f32, 'm (beta1 0.8)');
    await expectParity(v.g, v.c, TOL.f32, 'v (beta2 0.99)');
  },
}));

/** A tiny link-shaped parameter set; sizes straddle VIEW_ALIGN so views sit at offsets 0, 64, 128, 256. */
function specs(seed: () => number): ParamSpec[] {
  const vals = (n: number) => Array.from({ length: n }, seed);
  return [
    { name: 'proj.weight', shape: [3, 17], init: vals(51) },
    { name: 'proj.bias', shape: [17], init: vals(17) },
    { name: 'ln.weight', shape: [96], init: vals(96) },
    { name: 'out.weight', shape: [17], init: vals(17), decay: true },
  ];
}

/** Runs `fn` and throws if it read anything back from the device (a step must not stall on the host). */
function noReadback<T>(be: Backend, fn: () => T): T {
  if (!(be instanceof WebGpuBackend)) return fn();
  const ctx = be.ctx;
  const read = ctx.read;
  let reads = 0;
  ctx.read = (...args) => (reads++, read.apply(ctx, args));
  try {
    return fn();
  } finally {
    ctx.read = read;
    if (reads) throw new Error(`AdamW's gather and step read back from the device ${reads} times`);
  }
}

/** Three training steps of a masked MSE through mul/add on `be`; returns norms and final buffers. */
async function train(be: Backend, sp: ParamSpec[], x: Float32Array, target: Float32Array): Promise<Float32Array[]> {
  const fp = new FlatParams(be, sp);
  const opt = new F.AdamW([fp], { weightDecay: 0.1, maxGradNorm: 0.5 });
  const xt = be.fromValues(x, [3, 17]);
  const tt = be.fromValues(target, [3, 17]);
  const mask = be.fromValues([1, 0, 1], [3]);
  const norms: Float32Array[] = [];
  for (let s = 0; s < 3; s++) {
    opt.zeroGrad();
    const tape = new Tape();
    const loss = tape.run(() => {
      const h = F.add(F.mul(xt, fp.get('proj.weight')), fp.get('proj.bias'));
      return F.add(F.mseLoss(F.mul(h, fp.get('out.weight')), tt, mask), F.sumSquares(fp.get('ln.weight')));
    });
    await tape.backward(loss);
    tape.dispose();
    const n = noReadback(be, () => (opt.gather(), opt.step(0.01 * (s + 1))));
    norms.push(await n.read());
    n.dispose();
  }
  const out = [...norms, await fp.data.read(), await fp.m.read(), await fp.v.read()];
  fp.dispose();
  return out;
}

export const cases: ParityCase[] = [
  ...adamwSizes,
  {
    name: 'assign (copy, add) and fill on views at VIEW_ALIGN offsets',
    async run(env) {
      const n = 3 * VIEW_ALIGN;
      const base = pair(env, env.rng.normals(n), [n]);
      const src = pair(env, env.rng.normals(17), [17]);
      for (const side of ['g', 'c'] as const) {
        const b = base[side];
        b.backend.run(assignKernel, [b.view(VIEW_ALIGN, [17]), src[side]], { add: false });
        b.backend.run(assignKernel, [b.view(2 * VIEW_ALIGN, [17]), src[side]], { add: true });
        b.backend.run(fillKernel, [b.view(0, [3])], { value: 0 });
        b.backend.run(fillKernel, [b.view(2 * VIEW_ALIGN, [5])], { value: -1.5 }); // over part of the sum
      }
      await expectParity(base.g, base.c, TOL.f32, 'assign/fill');
    },
  },
  {
    // grids fold into y above 7 workgroups on this device: 5000 elements are 20 workgroups
    name: 'adamw, assign and fill on folded grids [5000]',
    webgpuOnly: true,
    async run(env) {
      const small = await smallDevice(null);
      try {
        const n = 5000;
        const vals = [env.rng.normals(n), env.rng.normals(n, 0.1), env.rng.normals(n, 0.1), env.rng.uniforms(n, 0, 0.1)];
        const [g, c] = [small, env.cpu].map((be) => {
          const [p, gr, m, v] = vals.map((x) => be.fromValues(x, [n]));
          F.adamwStep(p, gr, m, v, { lr: 1e-2, t: 3, weightDecay: 0.1 });
          be.run(assignKernel, [m, gr], { add: true });
          be.run(fillKernel, [v], { value: 0.25 });
          return [p, m, v];
        });
        for (const [i, name] of ['params', 'm + g', 'filled v'].entries()) await expectParity(g[i], c[i], TOL.f32, name);
      } finally {
        small.ctx.destroy();
      }
    },
  },
  {
    name: 'FlatParams + AdamW: 3 steps of gatherGrads -> clip -> adamw through the tape',
    async run(env) {
      const sp = specs(() => env.rng.normal() * 0.5);
      const x = env.rng.normals(51);
      const target = env.rng.normals(51);
      const [g, c] = [await train(env.gpu, sp, x, target), await train(env.cpu, sp, x, target)];
      const labels = ['norm 1', 'norm 2', 'norm 3', 'params', 'm', 'v'];
      c.forEach((want, i) => assertClose(g[i], want, TOL.f32, labels[i]));
    },
  },
];
