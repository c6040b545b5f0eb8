import { F, Tape } from '../../autograd';
import type { Tensor } from '../../tensor/tensor';
import { eachRowCut } from '../row-cut';
import { type ParityCase, type ParityEnv, TOL, expectParity, pair } from '../workbench';
import { type AttentionAttrs, attentionKernel } from '.';

interface Cfg extends AttentionAttrs {
  T: number;
  S: number;
  hq: number;
  hkv: number;
  D: number;
}

const label = (c: Cfg) =>
  `T=${c.T} S=${c.S} Hq=${c.hq} Hkv=${c.hkv} D=${c.D}` +
  (c.kvLen !== undefined ? ` kvLen=${c.kvLen}` : '') + (c.window ? ` W=${c.window}` : '') + (c.splits ? ` splits=${c.splits}` : '');

/** q, k, v on both backends; cache rows at or past kvLen hold NaN, so reading one shows up. */
function inputs(env: ParityEnv, c: Cfg) {
  const kvLen = c.kvLen ?? c.S;
  const garbage = (a: Float32Array) => a.map((x, i) => (i >= kvLen * c.hkv * c.D ? NaN : x));
  return {
    q: pair(env, env.rng.normals(c.T * c.hq * c.D), [c.T, c.hq, c.D]),
    k: pair(env, garbage(env.rng.normals(c.S * c.hkv * c.D)), [c.S, c.hkv, c.D]),
    v: pair(env, garbage(env.rng.normals(c.S * c.hkv * c.D)), [c.S, c.hkv, c.D]),
  };
}

const attrsOf = ({ scale, window, kvLen, splits }: Cfg): AttentionAttrs => ({ scale, window, kvLen, splits });

function forward(c: Cfg): ParityCase {
  return {
    name: `attention forward ${label(c)}`,
    async run(env) {
      const { q, k, v } = inputs(env, c);
      const [oc, lc] = env.cpu.run(attentionKernel, [q.c, k.c, v.c], attrsOf(c));
      // both layouts of the WebGPU forward (rowCut), whichever the adapter would take
      await eachRowCut(async (cut) => {
        const [og, lg] = env.gpu.run(attentionKernel, [q.g, k.g, v.g], attrsOf(c));
        await expectParity(og, oc, TOL.f32, `o (${cut})`);
        await expectParity(lg, lc, TOL.f32, `lse (${cut})`);
      });
    },
  };
}

function backward(c: Cfg): ParityCase {
  return {
    name: `attention backward ${label(c)}`,
    async run(env) {
      const { q, k, v } = inputs(env, c);
      const dO = pair(env, env.rng.normals(c.T * c.hq * c.D), [c.T, c.hq, c.D]);
      const grads = async (qt: Tensor, kt: Tensor, vt: Tensor, seed: Tensor) => {
        for (const t of [qt, kt, vt]) t.requiresGrad = true;
        const tape = new Tape();
        const o = tape.run(() => F.attention(qt, kt, vt, attrsOf(c)));
        await tape.backward(o, seed);
        tape.dispose();
        return [qt.grad!, kt.grad!, vt.grad!];
      };
      const g = await grads(q.g, k.g, v.g, dO.g);
      const r = await grads(q.c, k.c, v.c, dO.c);
      // measured worst |GPU - CPU| is ~1.2e-6 on lavapipe: f32 tolerance holds. (An atol of 1e-4 let a
      // 3e-5 relative error in the softmax scale of dQ through.)
      const tol = TOL.f32;
      for (const [i, n] of ['dq', 'dk', 'dv'].entries()) await expectParity(g[i], r[i], tol, n);
    },
  };
}

export const cases: ParityCase[] = [
  forward({ T: 17, S: 17, hq: 4, hkv: 2, D: 17 }),
  forward({ T: 33, S: 33, hq: 2, hkv: 2, D: 64 }),
  forward({ T: 20, S: 20, hq: 4, hkv: 2, D: 96 }),
  forward({ T: 9, S: 9, hq: 2, hkv: 1, D: 1 }),
  // chunked prefill: 5 new queries after 32 cached positions, in a cache of 40 rows
  forward({ T: 5, S: 40, hq: 4, hkv: 1, D: 96, kvLen: 37 }),
  // decode against a partly filled cache, GQA 4, directly and through the split-and-combine path
  forward({ T: 1, S: 64, hq: 8, hkv: 2, D: 64, kvLen: 45 }),
  forward({ T: 1, S: 64, hq: 8, hkv: 2, D: 64, kvLen: 45, splits: 3 }),
  // long enough for the automatic flash-decoding split
  forward({ T: 1, S: 600, hq: 4, hkv: 4, D: 3 }),
  forward({ T: 3, S: 200, hq: 4, hkv: 2, D: 3, kvLen: 150, splits: 4, window: 70 }),
  // sliding windows, with and without past
  forward({ T: 40, S: 40, hq: 4, hkv: 2, D: 3, window: 7 }),
  forward({ T: 6, S: 30, hq: 2, hkv: 2, D: 1, window: 9, scale: 0.5 }),
  // real head dims, 8 and 16 dims per lane: 128 (Llama, Qwen) and 256 (Gemma)
  forward({ T: 1, S: 9, hq: 4, hkv: 2, D: 128, kvLen: 7 }),
  forward({ T: 3, S: 3, hq: 2, hkv: 2, D: 256, window: 2 }),
  // the backward through a frozen LLM runs at its head dim; lavapipe needs ~4 s to compile these
  // pipelines (8.5 s at D = 256, left out for time)
  backward({ T: 3, S: 5, hq: 2, hkv: 1, D: 128 }),
  backward({ T: 17, S: 17, hq: 4, hkv: 2, D: 17 }),
  backward({ T: 6, S: 30, hq: 8, hkv: 2, D: 64, kvLen: 27, window: 9 }),
  backward({ T: 24, S: 24, hq: 2, hkv: 2, D: 96, window: 5 }),
  backward({ T: 3, S: 3, hq: 1, hkv: 1, D: 1 }),
  // a scale other than 1/√D: the backward kernels must take it from the attributes too
  backward({ T: 5, S: 8, hq: 4, hkv: 2, D: 3, scale: 0.7 }),
  {
    name: 'attention decode loop with kvAppend into a preallocated cache (GQA 2, D=17)',
    async run(env) {
      const [maxS, hq, hkv, D, prompt, steps] = [32, 4, 2, 17, 5, 3];
      const caches = [env.gpu, env.cpu].map((b) => ({ k: b.zeros([maxS, hkv, D]), v: b.zeros([maxS, hkv, D]) }));
      let len = 0;
      for (const T of [prompt, ...Array(steps).fill(1)]) {
        const q = pair(env, env.rng.normals(T * hq * D), [T, hq, D]);
        const k = pair(env, env.rng.normals(T * hkv * D), [T, hkv, D]);
        const v = pair(env, env.rng.normals(T * hkv * D), [T, hkv, D]);
        const outs = caches.map((cache, i) => {
          const side = i === 0 ? 'g' : 'c';
          F.kvAppend(cache.k, k[side], len);
          F.kvAppend(cache.v, v[side], len);
          return F.attention(q[side], cache.k, cache.v, { kvLen: len + T });
        });
        len += T;
        await expectParity(outs[0], outs[1], TOL.f32, `step at len ${len}`);
      }
      await expectParity(caches[0].k, caches[1].k, { atol: 0, rtol: 0 }, 'k cache');
    },
  },
];
