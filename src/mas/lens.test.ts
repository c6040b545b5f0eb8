/**
 * The logit lens (lens.ts) on the CPU backend against a float64 reference written out here: the top-k token ids
 * in order (ties to the lower id), their texts as the tokenizer decodes them with special tokens kept, their
 * probabilities, each row's norm, and k capped at the vocabulary.
 */
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../tensor/cpu';
import { logitLens, topReading } from './lens';

const cpu = new CpuBackend('f32');

/** A tokenizer that writes id i as <i>, and records that special tokens were asked for. */
const decoded: { skipSpecialTokens?: boolean }[] = [];
const tok = {
  decode: (ids: number[], o?: { skipSpecialTokens?: boolean }) => (decoded.push(o ?? {}), `<${ids.join(',')}>`),
};

/** The reference: per row of L [m, d], softmax(L · headᵀ) in float64, its k best (ties to the lower id), and |row|. */
function reference(L: number[][], head: number[][], k: number) {
  return L.map((row) => {
    const logits = head.map((h) => h.reduce((a, w, j) => a + w * row[j]!, 0));
    const max = Math.max(...logits);
    const e = logits.map((z) => Math.exp(z - max));
    const sum = e.reduce((a, b) => a + b, 0);
    const order = e.map((v, id) => ({ id, p: v / sum })).sort((a, b) => b.p - a.p || a.id - b.id);
    return { top: order.slice(0, k), norm: Math.hypot(...row) };
  });
}

async function lens(L: number[][], head: number[][], k: number) {
  const l = cpu.fromValues(Float32Array.from(L.flat()), [L.length, L[0]!.length]);
  const h = cpu.fromValues(Float32Array.from(head.flat()), [head.length, head[0]!.length]);
  try {
    return await logitLens(l, h, tok, k);
  } finally {
    l.dispose();
    h.dispose();
  }
}

function expectReference(got: Awaited<ReturnType<typeof lens>>, L: number[][], head: number[][], k: number) {
  const want = reference(L, head, k);
  expect(got.vocab).toBe(head.length);
  expect(got.norms.length).toBe(L.length);
  want.forEach((w, r) => {
    expect(got.norms[r]).toBeCloseTo(w.norm, 5);
    expect(got.top[r]!.map((t) => t.token)).toEqual(w.top.map((t) => `<${t.id}>`));
    got.top[r]!.forEach((t, j) => expect(Math.abs(t.prob - w.top[j]!.p), `row ${r} rank ${j}`).toBeLessThan(1e-6));
  });
}

describe('logitLens', () => {
  // d = 3, V = 7: a zero row (uniform: every tie, so ids 0..4 in order), [3, 4, 0] (norm 5), [1, 2, 2] (norm 3)
  const L = [[0, 0, 0], [3, 4, 0], [1, 2, 2]];
  const head = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [-1, 0, 1], [0, 0, 0], [0.5, -0.5, 1]];

  it('the top 5 of each row with their probabilities, and the norms, as the float64 reference has them', async () => {
    decoded.length = 0;
    const got = await lens(L, head, 5);
    expectReference(got, L, head, 5);
    expect(got.norms).toEqual([0, 5, 3]);
    expect(got.top[0]!.map((t) => t.token)).toEqual(['<0>', '<1>', '<2>', '<3>', '<4>']);
    got.top[0]!.forEach((t) => expect(t.prob).toBeCloseTo(1 / 7, 7));
    // row 1: logits [3, 4, 0, 7, -3, 0, -0.5]
    expect(got.top[1]!.map((t) => t.token)).toEqual(['<3>', '<1>', '<0>', '<2>', '<5>']);
    expect(decoded.length).toBe(15);
    expect(decoded.every((o) => o.skipSpecialTokens === false)).toBe(true);
  });

  it('k past the vocabulary is capped at it: every token, summing to 1', async () => {
    const got = await lens(L, head, 10);
    expectReference(got, L, head, 7);
    for (const row of got.top) {
      expect(row.length).toBe(7);
      expect(row.reduce((a, t) => a + t.prob, 0)).toBeCloseTo(1, 6);
    }
  });

  it('a wider case (d = 16, V = 300, 4 rows) matches the reference', async () => {
    const wave = (n: number, s: number) => Math.sin(n * 12.9898 + s * 78.233) * 2;
    const wide = Array.from({ length: 4 }, (_, r) => Array.from({ length: 16 }, (_, j) => wave(r * 16 + j, 1)));
    const big = Array.from({ length: 300 }, (_, v) => Array.from({ length: 16 }, (_, j) => wave(v * 16 + j, 2)));
    expectReference(await lens(wide, big, 8), wide, big, 8);
  });
});

describe('topReading', () => {
  const r = {
    top: [
      [{ token: '\\boxed{', prob: 0.9 }, { token: 'x', prob: 0.05 }],
      [{ token: 'cone', prob: 0.6 }],
      [{ token: '}', prob: 0.9 }],
      [{ token: 'cube', prob: 0.6 }],
    ],
  };
  it("is the most probable of the latents' first tokens, the earliest on a tie; with `accept`, of the accepted ones", () => {
    expect(topReading(r)).toEqual({ token: '\\boxed{', prob: 0.9, latent: 0 });
    const shapes = (t: string) => ['cone', 'cube'].includes(t);
    expect(topReading(r, shapes)).toEqual({ token: 'cone', prob: 0.6, latent: 1 });
    // none accepted: the plain reading
    expect(topReading(r, () => false)).toEqual({ token: '\\boxed{', prob: 0.9, latent: 0 });
    expect(topReading({ top: [] })).toBeNull();
  });
});
