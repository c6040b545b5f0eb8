import { F } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { type ParityCase, TOL, expectParity, pair } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';

const UNARY: [string, (x: Tensor) => Tensor][] = [
  ['silu', F.silu],
  ['gelu', F.gelu],
  ['geluTanh', F.geluTanh],
  ['tanh', F.tanh],
  ['sigmoid', F.sigmoid],
  ['softplus', F.softplus],
  ['exp', F.exp],
];

// Saturated and huge inputs: no NaN from exp/tanh overflow, exact limits on both sides.
const EXTREMES = [-1e20, -1e4, -100, -30, -12, -9, 9, 12, 30, 100, 1e4, 1e20, 0, -0.0];

export const cases: ParityCase[] = [
  ...[1, 3, 17, 96, 200].map((n) => ({
    name: `activation silu/gelu/geluTanh/swiglu/geglu forward and backward [${n}, 5]`,
    async run(env: Parameters<ParityCase['run']>[0]) {
      const xv = env.rng.normals(n * 5, 3);
      for (const [name, fn] of UNARY) {
        await expectGradParity(env, name, fn, [{ values: xv, shape: [n, 5] }], TOL.f32);
      }
      const gate = env.rng.normals(n * 5, 3);
      const up = env.rng.normals(n * 5);
      for (const [ng, nu] of [[true, true], [true, false], [false, true]]) {
        const ins = [{ values: gate, shape: [n, 5], grad: ng }, { values: up, shape: [n, 5], grad: nu }];
        await expectGradParity(env, `swiglu gate ${ng} up ${nu}`, F.swiglu, ins, TOL.f32);
        await expectGradParity(env, `geglu gate ${ng} up ${nu}`, F.geglu, ins, TOL.f32);
      }
    },
  })),
  {
    name: 'activation extremes (saturation, 1e20) forward and backward',
    async run(env) {
      for (const [name, fn] of UNARY) {
        await expectGradParity(env, name, fn, [{ values: EXTREMES, shape: [EXTREMES.length] }], TOL.f32);
      }
      const up = pair(env, EXTREMES.map((_, i) => i - 6), [EXTREMES.length]);
      const gate = pair(env, EXTREMES, [EXTREMES.length]);
      await expectParity(F.swiglu(gate.g, up.g), F.swiglu(gate.c, up.c), TOL.f32, 'swiglu');
      await expectParity(F.geglu(gate.g, up.g), F.geglu(gate.c, up.c), TOL.f32, 'geglu');
    },
  },
  {
    // NR erfc keeps erf within ~1e-7 absolute, so GELU agrees with the f64-accurate reference to a few
    // 1e-7 over the range where it is not saturated: 20x tighter than the f32 tolerance.
    name: 'activation gelu accuracy on a dense grid in [-8, 8]',
    async run(env) {
      const xs = Array.from({ length: 1601 }, (_, i) => -8 + i / 100);
      const x = pair(env, xs, [xs.length]);
      await expectParity(F.gelu(x.g), F.gelu(x.c), { atol: 5e-7, rtol: 2e-7 }, 'gelu');
    },
  },
];
