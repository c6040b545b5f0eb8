import { describe, expect, it } from 'vitest';
import { F, gradcheck } from '../../autograd';
import { DTypeMismatch, ShapeMismatch } from '../../errors';
import type { Tensor } from '../../tensor/tensor';
import { CpuBackend } from '../../tensor/cpu';
import { assertClose } from '../workbench/close';
import { Rng } from '../../util/rng';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const tight = { atol: 1e-12, rtol: 1e-12 };
/** The f64 values themselves (read() rounds to f32). */
const exact = (t: Tensor) => f64.data(t) as Float64Array;

describe('layernorm (CPU reference)', () => {
  it('matches nn.LayerNorm: biased variance, eps inside the sqrt, default eps 1e-5', async () => {
    const x = f64.fromValues([1, 2, 3, 4, 10, 10, 10, 10], [2, 4]);
    // row 0: mean 2.5, biased var 1.25; row 1: constant, so x̂ = 0 and y = β
    const s = 1 / Math.sqrt(1.25 + 1e-5);
    const plain = exact(F.layerNorm(x, null, null));
    assertClose(plain, [-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s, 0, 0, 0, 0], tight, 'no affine');
    const gamma = f64.fromValues([1, 2, -1, 0.5], [4]);
    const beta = f64.fromValues([0, 1, 0, -1], [4]);
    const aff = exact(F.layerNorm(x, gamma, beta));
    assertClose(aff, [-1.5 * s, -1 * s + 1, -0.5 * s, 0.75 * s - 1, 0, 1, 0, -1], tight, 'affine');
    const gOnly = exact(F.layerNorm(x, gamma, null, 0.5));
    const s2 = 1 / Math.sqrt(1.25 + 0.5);
    assertClose(gOnly, [-1.5 * s2, -1 * s2, -0.5 * s2, 0.75 * s2, 0, 0, 0, 0], tight, 'gamma only, eps 0.5');
    const bOnly = exact(F.layerNorm(x, null, beta));
    assertClose(bOnly, [-1.5 * s, -0.5 * s + 1, 0.5 * s, 1.5 * s - 1, 0, 1, 0, -1], tight, 'beta only');
  });

  it('reads f16 and bf16 γ/β exactly like their f32 values', async () => {
    const rng = new Rng(2);
    const x = cpu.fromValues(rng.normals(2 * 5), [2, 5]);
    const gv = [0.5, 1.25, -2, 3, 0.75];
    const bv = [0.125, 0, -1, 2.5, 1];
    const ref = await F.layerNorm(x, cpu.fromValues(gv, [5]), cpu.fromValues(bv, [5])).read();
    for (const dt of ['f16', 'bf16'] as const) {
      const y = await F.layerNorm(x, cpu.fromValues(gv, [5], dt), cpu.fromValues(bv, [5], dt)).read();
      expect([...y]).toEqual([...ref]);
    }
  });

  it('passes gradcheck for x, γ and β in every affine combination, with frozen x or frozen γ', async () => {
    const rng = new Rng(4);
    type P = 'none' | 'train' | 'frozen';
    const combos: [boolean, P, P][] = [
      [true, 'train', 'train'], [true, 'none', 'none'], [true, 'train', 'none'], [true, 'none', 'train'],
      [false, 'train', 'train'], [false, 'none', 'train'], [true, 'frozen', 'train'], [false, 'frozen', 'train'],
    ];
    for (const [nx, pg, pb] of combos) {
      const x = f64.fromValues(rng.normals(3 * 6, 2), [3, 6]);
      const g = pg !== 'none' ? f64.fromValues(rng.normals(6), [6]) : null;
      const b = pb !== 'none' ? f64.fromValues(rng.normals(6), [6]) : null;
      x.requiresGrad = nx;
      if (g) g.requiresGrad = pg === 'train';
      if (b) b.requiresGrad = pb === 'train';
      const inputs = [x, g, b].filter((t): t is Tensor => t !== null);
      const fn = (...ts: Tensor[]) => F.layerNorm(ts[0], g ? ts[1] : null, b ? ts[g ? 2 : 1] : null, 1e-3);
      const r = await gradcheck(fn, inputs);
      expect(r.ok, `x ${nx} gamma ${pg} beta ${pb}\n${r.message}`).toBe(true);
      if (g && pg === 'frozen') expect(g.grad).toBeNull();
    }
  });

  it('rejects mismatched shapes and dtypes with named errors', () => {
    const x = cpu.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    expect(() => F.layerNorm(x, cpu.fromValues([1, 2], [2]), null)).toThrow(ShapeMismatch);
    expect(() => F.layerNorm(x, null, cpu.fromValues([1, 2, 3, 4], [4]))).toThrow(/beta has shape \[4\], expected \[3\]/);
    expect(() => F.layerNorm(cpu.fromValues([1, 2, 3], [3], 'f16'), null, null)).toThrow(DTypeMismatch);
    const g = cpu.fromValues([1, 2, 3], [3], 'bf16');
    g.requiresGrad = true;
    expect(() => F.layerNorm(x, g, null)).toThrow(DTypeMismatch);
  });
});
