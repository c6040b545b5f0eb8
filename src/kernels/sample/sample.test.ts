import { describe, expect, it } from 'vitest';
import { F, Tape } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { type SampleAttrs, keptWeights, sampleAttrs, sampleRow, uniformFor } from '.';

const cpu = new CpuBackend();
const ids = async (logits: number[], shape: number[], o: Parameters<typeof F.sample>[1] = {}) =>
  [...(await F.sample(cpu.fromValues(logits, shape), o).readI32())];
const attrs = (o: Partial<SampleAttrs>) => sampleAttrs(o);

/** An independent statement of the distribution: sort, cut top-k, softmax, cut top-p, renormalise. */
function expectedDistribution(logits: Float64Array, a: SampleAttrs): Float64Array {
  const n = logits.length;
  const order = [...logits.keys()].sort((i, j) => logits[j] - logits[i]);
  const k = a.topK > 0 ? Math.min(a.topK, n) : n;
  const top = order.slice(0, k);
  const zmax = logits[top[0]] / a.temperature;
  const e = top.map((i) => Math.exp(logits[i] / a.temperature - zmax));
  const s = e.reduce((x, y) => x + y, 0);
  let keep = top.length;
  if (a.topP < 1) {
    let cum = 0;
    for (let j = 0; j < top.length; j++) {
      cum += e[j] / s;
      if (cum >= a.topP) {
        keep = j + 1;
        break;
      }
    }
  }
  const kept = e.slice(0, keep);
  const ks = kept.reduce((x, y) => x + y, 0);
  const p = new Float64Array(n);
  top.slice(0, keep).forEach((i, j) => (p[i] = kept[j] / ks));
  return p;
}

describe('sample (CPU reference)', () => {
  it('argmax picks the largest logit and the lowest index among equal maxima', async () => {
    expect([...(await F.argmax(cpu.fromValues([0.1, 3, -2, 3, 1], [5])).readI32())]).toEqual([1]);
    expect([...(await F.argmax(cpu.fromValues([5, 1, 2, -1, 7, 7], [2, 3])).readI32())]).toEqual([0, 1]);
    expect([...(await F.argmax(cpu.fromValues([-Infinity, -1, -Infinity], [3])).readI32())]).toEqual([1]);
    expect(await ids([0.1, 3, -2, 3, 1], [5], { temperature: 0, seed: 9 })).toEqual([1]);
  });

  it('top-k = 1 and a tiny top-p both reduce to the argmax for every seed', async () => {
    const x = [0.3, -1, 2.5, 2.4, 0];
    for (let seed = 0; seed < 50; seed++) {
      expect(await ids(x, [5], { topK: 1, seed })).toEqual([2]);
      expect(await ids(x, [5], { topP: 1e-6, seed, temperature: 2 })).toEqual([2]);
    }
  });

  it('top-p keeps exactly the smallest high-probability set whose mass reaches p', () => {
    const probs = [0.05, 0.4, 0.1, 0.25, 0.2]; // sorted: 0.4, 0.25, 0.2, 0.1, 0.05
    const x = Float64Array.from(probs, Math.log);
    const kept = (topP: number, topK = 0) =>
      [...keptWeights(x, 0, 5, attrs({ topP, topK }))].flatMap((w, i) => (w > 0 ? [i] : []));
    expect(kept(0.3)).toEqual([1]);
    expect(kept(0.6)).toEqual([1, 3]); // 0.4 < 0.6 <= 0.65
    expect(kept(0.8)).toEqual([1, 3, 4]); // 0.65 < 0.8 <= 0.85
    expect(kept(0.9)).toEqual([1, 2, 3, 4]);
    expect(kept(1)).toEqual([0, 1, 2, 3, 4]);
    // top-k first, then top-p on the renormalised top-3 (0.4, 0.25, 0.2 of 0.85): 0.4/0.85 = 0.47 < 0.5
    expect(kept(0.5, 3)).toEqual([1, 3]);
    // every draw lands in the kept set, and every kept token is drawn
    const seen = new Set<number>();
    for (let s = 0; s < 400; s++) seen.add(sampleRow(x, 0, 5, attrs({ topP: 0.8, step: s }), uniformFor(0, s, 0)));
    expect([...seen].sort()).toEqual([1, 3, 4]);
  });

  it('keeps every token tied with the k-th largest logit (top-k as a value threshold)', () => {
    const w = keptWeights(Float64Array.from([1, 2, 2, 0]), 0, 4, attrs({ topK: 1 }));
    expect([...w]).toEqual([0, 1, 1, 0]);
  });

  it('never picks a -Infinity logit', () => {
    const x = Float64Array.from([-Infinity, 0, -Infinity, 0.5]);
    for (let s = 0; s < 100; s++) expect([1, 3]).toContain(sampleRow(x, 0, 4, attrs({ step: s }), uniformFor(1, s, 0)));
  });

  it('draws the same id for the same (seed, step, row) and fresh ones otherwise', async () => {
    const x = new Rng(4).normals(4 * 50);
    const a = await ids([...x], [4, 50], { seed: 11, step: 3 });
    expect(await ids([...x], [4, 50], { seed: 11, step: 3 })).toEqual(a);
    const draws = new Set<string>();
    for (let step = 0; step < 8; step++) draws.add((await ids([...x], [4, 50], { seed: 11, step })).join());
    expect(draws.size).toBeGreaterThan(4);
    expect(uniformFor(1, 2, 3)).not.toBe(uniformFor(1, 2, 4));
    expect(uniformFor(1, 2, 3)).not.toBe(uniformFor(1, 3, 3));
    expect(uniformFor(1, 2, 3)).not.toBe(uniformFor(2, 2, 3));
  });

  it('draws match the renormalised top-k/top-p distribution (chi-square, 4 sigma)', () => {
    const rng = new Rng(21);
    const x = Float64Array.from(rng.normals(16, 1.5));
    // kept sets of 8, 16, 11 and 5 tokens
    for (const o of [{ temperature: 2, topK: 10, topP: 0.9 }, { temperature: 1.3 }, { topP: 0.9, temperature: 1.5 }, { topK: 5 }]) {
      const a = attrs(o);
      const p = expectedDistribution(x, a);
      const n = 20000;
      const counts = new Float64Array(16);
      // across seeds for one step and across steps for one seed: both must be fair
      for (let i = 0; i < n; i++) counts[sampleRow(x, 0, 16, a, i % 2 ? uniformFor(i, 0, 0) : uniformFor(5, i, 0))]++;
      let chi2 = 0;
      let df = -1;
      for (let i = 0; i < 16; i++) {
        if (p[i] === 0) {
          expect(counts[i], `${JSON.stringify(o)}: token ${i} is outside the kept set`).toBe(0);
          continue;
        }
        df++;
        chi2 += (counts[i] - n * p[i]) ** 2 / (n * p[i]);
      }
      expect(chi2, `${JSON.stringify(o)}: chi2 ${chi2.toFixed(1)} with ${df} dof`).toBeLessThan(df + 4 * Math.sqrt(2 * df));
    }
  });

  it('the uniform numbers are uniform (Kolmogorov-Smirnov over 10^4 draws)', () => {
    const u = Array.from({ length: 10000 }, (_, i) => uniformFor(3, i, i % 7)).sort((a, b) => a - b);
    const d = Math.max(...u.map((v, i) => Math.max(Math.abs(v - i / u.length), Math.abs(v - (i + 1) / u.length))));
    expect(d).toBeLessThan(1.63 / Math.sqrt(u.length)); // 1% level
    expect(u[0]).toBeGreaterThanOrEqual(0);
    expect(u[u.length - 1]).toBeLessThan(1);
  });

  it('is not differentiable: nothing is recorded and the ids need no gradient', () => {
    const x = cpu.fromValues([1, 2, 3], [3]);
    x.requiresGrad = true;
    const tape = new Tape();
    const out = tape.run(() => F.sample(x, { seed: 1 }));
    expect(tape.nodes.length).toBe(0);
    expect(out.requiresGrad).toBe(false);
    expect(out.dtype).toBe('i32');
    expect(out.shape).toEqual([1]);
  });

  it('rejects bad shapes, dtypes and options with named errors', () => {
    const x = cpu.fromValues([1, 2, 3, 4], [2, 2]);
    expect(() => F.sample(cpu.fromValues([1, 2], [1, 1, 2]))).toThrow(ShapeMismatch);
    expect(() => F.argmax(cpu.fromValues([], [2, 0]))).toThrow(ShapeMismatch);
    expect(() => F.sample(cpu.fromValues([1, 2], [2], 'i32'))).toThrow(DTypeMismatch);
    expect(() => F.sample(x, { temperature: -1 })).toThrow(InvalidArgument);
    expect(() => F.sample(x, { topP: 0 })).toThrow(InvalidArgument);
    expect(() => F.sample(x, { topP: 1.5 })).toThrow(InvalidArgument);
    expect(() => F.sample(x, { topK: 1.5 })).toThrow(InvalidArgument);
    expect(() => F.sample(x, { seed: -1 })).toThrow(/seed/);
  });
});
