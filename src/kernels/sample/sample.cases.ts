/**
 * GPU vs CPU: identical ids. The GPU sums exp() in f32 in another order than the f64 reference, so a
 * choice could flip only where a threshold or the draw sits within rounding of a boundary. The cases
 * avoid that: top-p is set midway between cumulative masses, top-k cuts between distinct random
 * values, and draws whose target lies within 1e-4 (relative) of a cumulative boundary are skipped
 * (rare; at least half must remain). Exact ties (argmax) are planted on purpose: they are exact in
 * both implementations.
 */
import { F } from '../../autograd';
import type { ParityCase, ParityEnv } from '../workbench';
import { type SampleAttrs, keptWeights, sampleAttrs, uniformFor } from '.';

const MARGIN = 1e-4;

/** Distance (relative to the kept mass) of the draw target from every cumulative boundary. */
function drawMargin(x: Float32Array, off: number, v: number, a: SampleAttrs, u: number): number {
  const w = keptWeights(x, off, v, a);
  const total = w.reduce((s, y) => s + y, 0);
  let cum = 0;
  let m = Infinity;
  for (const y of w) {
    if (y <= 0) continue;
    cum += y;
    m = Math.min(m, Math.abs(cum - u * total));
  }
  return m / total;
}

/** Distance of p from the cumulative masses of the descending top-k set, the worst row. */
function topPMargin(x: Float32Array, rows: number, v: number, a: SampleAttrs, p: number): number {
  let m = Infinity;
  for (let r = 0; r < rows; r++) {
    const w = [...keptWeights(x, r * v, v, { ...a, topP: 1 })].filter((y) => y > 0).sort((s, t) => t - s);
    const s = w.reduce((q, y) => q + y, 0);
    let cum = 0;
    for (const y of w) {
      cum += y;
      m = Math.min(m, Math.abs(cum / s - p));
    }
  }
  return m;
}

/** The p nearest to `want` that stays clear of every row's cumulative masses. */
function safeTopP(x: Float32Array, rows: number, v: number, a: SampleAttrs, want: number): number {
  for (let d = 0; d < 0.4; d += 0.001) {
    for (const p of [want + d, want - d]) if (p > 0 && p < 1 && topPMargin(x, rows, v, a, p) > MARGIN) return p;
  }
  return 1;
}

async function expectSameIds(env: ParityEnv, x: Float32Array, shape: number[], o: Partial<SampleAttrs>, steps: number, label: string) {
  const [rows, v] = shape.length === 2 ? shape : [1, shape[0]];
  const g = env.gpu.fromValues(x, shape);
  const c = env.cpu.fromValues(x, shape);
  let used = 0;
  for (let step = 0; step < steps; step++) {
    const a = sampleAttrs({ ...o, seed: 1234, step });
    const safe =
      a.temperature === 0 || [...Array(rows).keys()].every((r) => drawMargin(x, r * v, v, a, uniformFor(a.seed, step, r)) > MARGIN);
    if (!safe) continue;
    used++;
    const [gi, ci] = await Promise.all([F.sample(g, a).readI32(), F.sample(c, a).readI32()]);
    if (gi.join() !== ci.join()) throw new Error(`${label} step ${step}: GPU picked [${gi}], CPU reference [${ci}]`);
  }
  g.dispose();
  if (used < steps / 2) throw new Error(`${label}: only ${used} of ${steps} draws were clear of rounding boundaries`);
}

export const cases: ParityCase[] = [
  ...[1, 3, 17, 96, 200].map((v) => ({
    name: `sample argmax/temperature/top-k/top-p ids [3, ${v}]`,
    async run(env: ParityEnv) {
      const rows = 3;
      const x = env.rng.normals(rows * v, 2);
      // exact ties for argmax: row 1's maximum appears again further right
      let mi = 0;
      for (let i = 1; i < v; i++) if (x[v + i] > x[v + mi]) mi = i;
      if (mi + 1 < v) x[v + v - 1] = x[v + mi];
      const shape = [rows, v];
      const gArg = await F.argmax(env.gpu.fromValues(x, shape)).readI32();
      const cArg = await F.argmax(env.cpu.fromValues(x, shape)).readI32();
      if (gArg.join() !== cArg.join()) throw new Error(`argmax: GPU [${gArg}], CPU [${cArg}]`);
      await expectSameIds(env, x, shape, { temperature: 0 }, 1, 'temperature 0');
      await expectSameIds(env, x, shape, { temperature: 1 }, 8, 'temperature 1');
      await expectSameIds(env, x, shape, { temperature: 0.7, topK: Math.min(5, v) }, 8, 'top-k 5');
      const base = sampleAttrs({ temperature: 1.2, topK: Math.max(1, Math.floor(v / 2)) });
      const topP = safeTopP(x, rows, v, base, 0.8);
      await expectSameIds(env, x, shape, { ...base, topP }, 8, `top-k ${base.topK} + top-p ${topP.toFixed(3)}`);
      await expectSameIds(
        env,
        x,
        shape,
        { temperature: 0.9, topP: safeTopP(x, rows, v, sampleAttrs({ temperature: 0.9 }), 0.5) },
        8,
        'top-p',
      );
    },
  })),
  {
    name: 'sample at vocabulary size [1, 151936] (top-k 50, top-p, argmax)',
    async run(env: ParityEnv) {
      const v = 151936;
      const x = env.rng.normals(v, 3);
      await expectSameIds(env, x, [v], { temperature: 0 }, 1, 'argmax');
      const base = sampleAttrs({ temperature: 0.8, topK: 50 });
      await expectSameIds(env, x, [1, v], { ...base, topP: safeTopP(x, 1, v, base, 0.9) }, 2, 'top-k 50 + top-p');
    },
  },
];
