import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { assertClose } from '../workbench';
import { Rng } from '../../util/rng';
import { attentionKernel } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const EXACT = { atol: 1e-12, rtol: 1e-10 };

/** Textbook attention: materialise the masked [Hq, T, S] scores, softmax, multiply. */
function bruteForce(q: Float64Array, k: Float64Array, v: Float64Array, T: number, S: number, hq: number, hkv: number, D: number,
  { kvLen = S, window = 0, scale = 1 / Math.sqrt(D) } = {}) {
  const o = new Float64Array(T * hq * D);
  const lse = new Float64Array(hq * T);
  for (let h = 0; h < hq; h++) {
    const kh = Math.floor((h * hkv) / hq);
    for (let t = 0; t < T; t++) {
      const pos = kvLen - T + t;
      const scores = Array.from({ length: S }, (_, j) => {
        const visible = j < kvLen && j <= pos && (window === 0 || pos - j < window);
        if (!visible) return -Infinity;
        let s = 0;
        for (let i = 0; i < D; i++) s += q[(t * hq + h) * D + i] * k[(j * hkv + kh) * D + i];
        return s * scale;
      });
      const m = Math.max(...scores);
      const e = scores.map((s) => Math.exp(s - m));
      const z = e.reduce((a, b) => a + b, 0);
      lse[h * T + t] = m + Math.log(z);
      for (let j = 0; j < S; j++) for (let i = 0; i < D; i++) o[(t * hq + h) * D + i] += (e[j] / z) * v[(j * hkv + kh) * D + i];
    }
  }
  return { o, lse };
}

const rand = (rng: Rng, n: number) => Float64Array.from(rng.normals(n));

describe('attention (CPU reference)', () => {
  it('matches a hand-computed causal case', async () => {
    // one head, D = 1, scale 1: row 0 sees key 0 only; row 1 mixes keys 0, 1 with scores 0 and 2
    const q = f64.fromValues([1, 2], [2, 1, 1]);
    const k = f64.fromValues([0, 1], [2, 1, 1]);
    const v = f64.fromValues([10, 20], [2, 1, 1]);
    const w = Math.exp(2) / (1 + Math.exp(2));
    assertClose(await F.attention(q, k, v, { scale: 1 }).read(), [10, 10 * (1 - w) + 20 * w], { atol: 1e-5, rtol: 1e-6 });
    // window 1: each query sees only itself
    assertClose(await F.attention(q, k, v, { scale: 1, window: 1 }).read(), [10, 20], EXACT);
  });

  it('equals the textbook formula with GQA, past, window and a partly filled cache', async () => {
    const rng = new Rng(11);
    const configs = [
      { T: 7, S: 7, hq: 4, hkv: 4, D: 5 },
      { T: 5, S: 9, hq: 4, hkv: 2, D: 3, window: 3 },
      { T: 3, S: 12, hq: 8, hkv: 2, D: 17, kvLen: 10 },
      { T: 1, S: 16, hq: 6, hkv: 3, D: 4, kvLen: 11, window: 5, scale: 0.3 },
    ];
    for (const c of configs) {
      const [qv, kv, vv] = [rand(rng, c.T * c.hq * c.D), rand(rng, c.S * c.hkv * c.D), rand(rng, c.S * c.hkv * c.D)];
      const want = bruteForce(qv, kv, vv, c.T, c.S, c.hq, c.hkv, c.D, c);
      const [o, lse] = f64.run(attentionKernel, [f64.fromValues(qv, [c.T, c.hq, c.D]), f64.fromValues(kv, [c.S, c.hkv, c.D]),
        f64.fromValues(vv, [c.S, c.hkv, c.D])], c);
      assertClose(f64.data(o), want.o, EXACT, `o ${JSON.stringify(c)}`);
      assertClose(f64.data(lse), want.lse, EXACT, `lse ${JSON.stringify(c)}`);
    }
  });

  it('gives the same rows for prefill, chunked prefill and decode against a cache', async () => {
    const rng = new Rng(12);
    const [T, hq, hkv, D, maxS] = [9, 4, 2, 6, 16];
    const [qv, kv, vv] = [rand(rng, T * hq * D), rand(rng, T * hkv * D), rand(rng, T * hkv * D)];
    const full = f64.data(
      F.attention(f64.fromValues(qv, [T, hq, D]), f64.fromValues(kv, [T, hkv, D]), f64.fromValues(vv, [T, hkv, D]), { window: 4 }),
    );
    // a cache filled with garbage, appended to chunk by chunk: rows past kvLen must never be read
    const kc = f64.fromValues(rand(rng, maxS * hkv * D).map((x) => x * 1e6), [maxS, hkv, D]);
    const vc = f64.fromValues(rand(rng, maxS * hkv * D).map((x) => x * 1e6), [maxS, hkv, D]);
    const rowsOf = (a: Float64Array, t0: number, t1: number, h: number) =>
      f64.fromValues(a.subarray(t0 * h * D, t1 * h * D), [t1 - t0, h, D]);
    const got: number[] = [];
    for (const [t0, t1] of [[0, 4], [4, 5], [5, 8], [8, 9]]) {
      F.kvAppend(kc, rowsOf(kv, t0, t1, hkv), t0);
      F.kvAppend(vc, rowsOf(vv, t0, t1, hkv), t0);
      got.push(...f64.data(F.attention(rowsOf(qv, t0, t1, hq), kc, vc, { kvLen: t1, window: 4 })));
    }
    assertClose(got, full, EXACT, 'chunked vs prefill');
  });

  it('kvAppend writes rows in place and refuses to overflow the cache', async () => {
    const cache = cpu.zeros([4, 1, 2]);
    F.kvAppend(cache, cpu.fromValues([1, 2, 3, 4], [2, 1, 2]), 1);
    expect([...(await cache.read())]).toEqual([0, 0, 1, 2, 3, 4, 0, 0]);
    expect(() => F.kvAppend(cache, cpu.fromValues([1, 2, 3, 4], [2, 1, 2]), 3)).toThrow(InvalidArgument);
    expect(() => F.kvAppend(cache, cpu.fromValues([1, 2, 3], [1, 1, 3]), 0)).toThrow(ShapeMismatch);
  });

  it('passes gradcheck for q, k and v (GQA 2, with and without past, window, kvLen < S)', async () => {
    const rng = new Rng(13);
    const [T, hq, hkv, D] = [5, 4, 2, 3];
    const configs = [
      { S: 5 },
      { S: 8 },
      { S: 5, window: 2 },
      { S: 10, kvLen: 8, window: 3, scale: 0.7 },
    ];
    for (const { S, ...opts } of configs) {
      const q = f64.fromValues(rand(rng, T * hq * D), [T, hq, D]);
      const k = f64.fromValues(rand(rng, S * hkv * D), [S, hkv, D]);
      const v = f64.fromValues(rand(rng, S * hkv * D), [S, hkv, D]);
      for (const t of [q, k, v]) t.requiresGrad = true;
      const r = await gradcheck((a, b, c) => F.attention(a, b, c, opts), [q, k, v]);
      expect(r.ok, `S=${S} ${JSON.stringify(opts)}\n${r.message}`).toBe(true);
    }
  });

  it('gives frozen k and v no gradient and still differentiates q', async () => {
    const rng = new Rng(14);
    const q = f64.fromValues(rand(rng, 2 * 2 * 3), [2, 2, 3]);
    const k = f64.fromValues(rand(rng, 2 * 3), [2, 1, 3]);
    const v = f64.fromValues(rand(rng, 2 * 3), [2, 1, 3]);
    q.requiresGrad = true;
    const r = await gradcheck((a, b, c) => F.attention(a, b, c), [q, k, v]);
    expect(r.ok, r.message).toBe(true);
    const tape = new Tape();
    const o = tape.run(() => F.attention(q, k, v));
    await tape.backward(o, f64.fromValues(rand(rng, 12), [2, 2, 3]));
    expect(k.grad).toBeNull();
    expect(v.grad).toBeNull();
    tape.dispose();
  });

  it('rejects shapes, dtypes and options that do not fit', () => {
    const t = (s: number[], dtype: 'f32' | 'bf16' = 'f32') => cpu.zeros(s, dtype);
    expect(() => F.attention(t([2, 3, 4]), t([2, 2, 4]), t([2, 2, 4]))).toThrow(/multiple of Hkv/);
    expect(() => F.attention(t([2, 4, 4]), t([2, 2, 5]), t([2, 2, 5]))).toThrow(ShapeMismatch);
    expect(() => F.attention(t([2, 4, 4]), t([2, 2, 4]), t([3, 2, 4]))).toThrow(ShapeMismatch);
    expect(() => F.attention(t([2, 4]), t([2, 2, 4]), t([2, 2, 4]))).toThrow(ShapeMismatch);
    expect(() => F.attention(t([2, 4, 4]), t([2, 2, 4], 'bf16'), t([2, 2, 4]))).toThrow(DTypeMismatch);
    expect(() => F.attention(t([3, 4, 4]), t([2, 2, 4]), t([2, 2, 4]))).toThrow(/kvLen 2 must be/);
    expect(() => F.attention(t([2, 4, 4]), t([8, 2, 4]), t([8, 2, 4]), { kvLen: 9 })).toThrow(InvalidArgument);
    expect(() => F.attention(t([2, 4, 4]), t([8, 2, 4]), t([8, 2, 4]), { window: -1 })).toThrow(/window/);
  });
});
