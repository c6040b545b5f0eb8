import { describe, expect, it } from 'vitest';
import { F, gradcheck } from '../../autograd';
import { DTypeMismatch, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import { assertClose } from '../workbench/close';
import { Rng } from '../../util/rng';
import { activationBackwardKernel, erf, erfc, gluBackwardKernel } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const exact = (t: Tensor) => [...(f64.data(t) as Float64Array)];
const tight = { atol: 1e-15, rtol: 1e-14 };

describe('activations (CPU reference)', () => {
  it('computes erf and erfc to f64 accuracy (values from Python math.erf/erfc)', () => {
    const known: [number, number, number][] = [
      [0.01, 0.011283415555849616, 0.9887165844441503],
      [0.5, 0.5204998778130465, 0.4795001221869535],
      [1, 0.8427007929497149, 0.15729920705028513],
      [1.5, 0.9661051464753108, 0.033894853524689274],
      [2, 0.9953222650189527, 0.004677734981047265],
      [-2.3, -0.9988568234026434, 1.9988568234026434],
      [3, 0.9999779095030014, 2.2090496998585438e-5],
      [5, 0.9999999999984626, 1.5374597944280351e-12],
    ];
    for (const [x, e, c] of known) {
      expect(Math.abs(erf(x) - e), `erf(${x})`).toBeLessThan(3e-16);
      expect(Math.abs(erfc(x) - c) / c, `erfc(${x})`).toBeLessThan(1e-14);
    }
    expect(erfc(10) / 2.088487583762545e-45).toBeCloseTo(1, 13);
    expect(erf(0)).toBe(0);
  });

  it("erfc's continued fraction, cut to its depth for x, gives the f32 GELU and slope of the fixed depth 160", () => {
    // the depth before it was adaptive, as a reference: e^{-x²}/√π / (x + ½/(x + 1/(x + …))) from k = 160
    const fixed = (a: number) => {
      let f = a;
      for (let k = 160; k >= 1; k--) f = a + k / 2 / f;
      return Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
    };
    const bits = new Float32Array(1);
    const word = new Uint32Array(bits.buffer);
    bits[0] = 1.5 * Math.SQRT2; // erfc(|x|/√2) takes the continued fraction from here on
    const lo = word[0]!;
    bits[0] = 28 * Math.SQRT2;
    const hi = word[0]!;
    let checked = 0;
    let worst = 0;
    const differ: number[] = [];
    const slope = (x: number, e: number) => Math.fround(0.5 * e + (x / Math.sqrt(2 * Math.PI)) * Math.exp(-0.5 * x * x));
    // every 613th f32 of the range, both signs (a whole sweep of the range in tools: 70 M inputs, none differs)
    for (let w = lo; w <= hi; w += 613) {
      word[0] = w;
      for (const x of [bits[0]!, -bits[0]!]) {
        const a = Math.abs(x) / Math.SQRT2;
        if (a < 1.5) continue; // rounded below the split: the series' branch
        const want = x > 0 ? 2 - fixed(a) : fixed(a); // erfc(−x/√2)
        const got = erfc(-x / Math.SQRT2);
        if (want > 0) worst = Math.max(worst, Math.abs(got - want) / want);
        else if (got !== 0) differ.push(x);
        if (Math.fround(0.5 * x * got) !== Math.fround(0.5 * x * want) || slope(x, got) !== slope(x, want)) differ.push(x);
        checked++;
      }
    }
    expect(differ).toEqual([]);
    expect(worst).toBeLessThan(1e-15);
    expect(checked).toBeGreaterThan(100_000);
  });

  it('computes SiLU, exact GELU and tanh GELU on hand-checked values', () => {
    const xs = [-20, -3, -1, -0.5, 0, 0.5, 1, 3, 20];
    const x = f64.fromValues(xs, [xs.length]);
    const sig = (v: number) => 1 / (1 + Math.exp(-v));
    assertClose(exact(F.silu(x)), xs.map((v) => v * sig(v)), tight, 'silu');
    // Python: 0.5 * x * math.erfc(-x / math.sqrt(2)) for x = 1, -1, 3
    const g = exact(F.gelu(x));
    assertClose([g[6], g[2], g[7]], [0.8413447460685429, -0.15865525393145707, 2.99595030590511], tight, 'gelu');
    assertClose(g, xs.map((v) => 0.5 * v * (1 + erf(v / Math.SQRT2))), { atol: 1e-15, rtol: 1e-13 }, 'gelu vs erf form');
    expect(g[0]).toBeLessThan(0); // 0.5·x·erfc(−x/√2) keeps the ~-5.5e-88 tail instead of rounding to -0
    const t = exact(F.geluTanh(x));
    const k = Math.sqrt(2 / Math.PI);
    assertClose(t, xs.map((v) => 0.5 * v * (1 + Math.tanh(k * (v + 0.044715 * v ** 3)))), { atol: 1e-15, rtol: 1e-12 }, 'gelu_tanh');
  });

  it('computes SwiGLU as silu(gate)·up', async () => {
    const gate = cpu.fromValues([-1, 0, 2], [3]);
    const up = cpu.fromValues([2, 5, -0.5], [3]);
    const y = await F.swiglu(gate, up).read();
    assertClose(y, [2 * (-1 / (1 + Math.E)), 0, -0.5 * (2 / (1 + Math.exp(-2)))], { atol: 1e-7, rtol: 1e-6 }, 'swiglu');
  });

  it('computes GeGLU as geluTanh(gate)·up (PyTorch gelu approximate="tanh")', async () => {
    const gate = cpu.fromValues([-1, 0, 2], [3]);
    const up = cpu.fromValues([2, 5, -0.5], [3]);
    const k = Math.sqrt(2 / Math.PI);
    const gt = (v: number) => 0.5 * v * (1 + Math.tanh(k * (v + 0.044715 * v ** 3)));
    assertClose(await F.geglu(gate, up).read(), [gt(-1) * 2, 0, gt(2) * -0.5], { atol: 1e-7, rtol: 1e-6 }, 'geglu');
  });

  it('passes gradcheck for silu, gelu, gelu_tanh and both operands of swiglu and geglu', async () => {
    const rng = new Rng(8);
    const x = f64.fromValues([...rng.normals(20, 2), -8, 8, 0, -0.1], [4, 6]);
    x.requiresGrad = true;
    for (const [name, fn] of [
      ['silu', F.silu],
      ['gelu', F.gelu],
      ['geluTanh', F.geluTanh],
      ['tanh', F.tanh],
      ['sigmoid', F.sigmoid],
      ['softplus', F.softplus],
      ['exp', F.exp],
    ] as const) {
      const r = await gradcheck(fn, [x]);
      expect(r.ok, `${name}\n${r.message}`).toBe(true);
    }
    for (const [ng, nu] of [[true, true], [true, false], [false, true]]) {
      const gate = f64.fromValues(rng.normals(12, 2), [3, 4]);
      const up = f64.fromValues(rng.normals(12), [3, 4]);
      gate.requiresGrad = ng;
      up.requiresGrad = nu;
      for (const [name, glu] of [['swiglu', F.swiglu], ['geglu', F.geglu]] as const) {
        const r = await gradcheck((a, b) => glu(a, b), [gate, up]);
        expect(r.ok, `${name} gate ${ng} up ${nu}\n${r.message}`).toBe(true);
      }
    }
  });

  it('rejects non-f32 inputs and mismatched SwiGLU operands', () => {
    expect(() => F.gelu(cpu.fromValues([1, 2], [2], 'bf16'))).toThrow(DTypeMismatch);
    expect(() => F.swiglu(cpu.fromValues([1, 2], [2]), cpu.fromValues([1, 2, 3], [3]))).toThrow(ShapeMismatch);
    expect(() => F.swiglu(cpu.fromValues([1, 2], [2]), cpu.fromValues([1, 2], [2], 'f16'))).toThrow(DTypeMismatch);
    // the backward kernels check the incoming gradient against the saved inputs
    const x = cpu.fromValues([1, 2], [2]);
    expect(() => cpu.run(activationBackwardKernel, [x, cpu.fromValues([1, 2, 3], [3])], { op: 'silu' })).toThrow(ShapeMismatch);
    expect(() => cpu.run(activationBackwardKernel, [x, cpu.fromValues([1, 2], [2], 'bf16')], { op: 'gelu' })).toThrow(DTypeMismatch);
    expect(() => cpu.run(gluBackwardKernel, [x, x, cpu.fromValues([1], [1])], { act: 'silu', dgate: true, dup: true })).toThrow(
      ShapeMismatch,
    );
    expect(() =>
      cpu.run(gluBackwardKernel, [x, x, cpu.fromValues([1, 2], [2], 'f16')], { act: 'gelu_tanh', dgate: true, dup: false }),
    ).toThrow(DTypeMismatch);
  });
});
