// The gated MLP activation on the CPU backend's WebAssembly SIMD kernels (matmul/wasm.ts `glu`: SiLU and the tanh
// GELU, e^x by a polynomial in f32) against the TypeScript reference (cpu.ts gluForward, f64 then rounded once), on
// the values MLPs feed it and on a sweep past both ends of f32's exponent range. Where the result is a normal f32
// it is within 8 ulp of the reference's (the polynomial's 2 ulp, then a division and two products, each ½ ulp), plus,
// for the GELU, 3|z| ulp: its argument z = 2·√(2/π)·(x + 0.044715x³) is rounded in f32 (about 1.5 ulp), which moves
// e^−z by |z| times that. Below the normal range (inputs beyond about ±87) the result is off by at most
// 2⁻¹²⁶ · max(|x|, 1) · |up|, since e^x stops at 2⁻¹²⁶ there.
import { describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { WasmKernels } from '../matmul/wasm';
import { type Activation, gluForward } from './cpu';

const loaded = WasmKernels.load();
if (typeof loaded === 'string') throw new Error(`the WebAssembly kernels did not load: ${loaded}`);
const wasm = loaded;
const ULP = 2 ** -23;
const TINY = 2 ** -126;

function expectNear(act: Activation, gate: Float32Array, up: Float32Array) {
  const got = new Float32Array(gate.length);
  expect(wasm.glu(act, gate, up, got), `${act} taken`).toBe(true);
  const want = new Float64Array(gate.length);
  gluForward(act, gate, up, want);
  for (let i = 0; i < gate.length; i++) {
    const w = want[i]!;
    if (Number.isNaN(w)) {
      if (!Number.isNaN(got[i])) expect.fail(`${act}(${gate[i]})·${up[i]}: ${got[i]}, the reference NaN`);
      continue;
    }
    const x = gate[i]!;
    // the GELU's argument z, rounded in f32, moves e^−z by |z| times its own relative error
    const z = act === 'gelu_tanh' ? Math.abs(2 * Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)) : 0;
    const bound = (8 + 3 * z) * ULP * Math.abs(w) + TINY * Math.max(Math.abs(x), 1) * Math.abs(up[i]!);
    if (!(Math.abs(got[i]! - w) <= bound)) expect.fail(`${act}(${gate[i]})·${up[i]}: ${got[i]}, the reference ${w} (bound ${bound})`);
  }
}

describe('the gated MLP activation on the WebAssembly kernels', () => {
  it('equals the reference within 8 ulp on SiLU and the tanh GELU, any length', () => {
    const rng = new Rng(3);
    for (const act of ['silu', 'gelu_tanh'] as const) {
      for (const n of [1, 3, 4, 7, 1001]) {
        for (const scale of [1, 4, 30]) {
          expectNear(act, Float32Array.from(rng.normals(n), (v) => v * scale), new Float32Array(rng.normals(n)));
        }
      }
      // a sweep past the exponent range both ways, and the special values
      const sweep = Float32Array.from({ length: 2401 }, (_, i) => (i - 1200) / 10);
      expectNear(act, sweep, new Float32Array(sweep.length).fill(1.5));
      const special = new Float32Array([NaN, Infinity, -Infinity, 0, -0, 3.4e38, -3.4e38, 1e-30]);
      const got = new Float32Array(special.length);
      expect(wasm.glu(act, special, new Float32Array(special.length).fill(2), got)).toBe(true);
      // NaN in, NaN out; +∞ passes σ = 1 and gives ∞ (the reference: ∞·σ(∞)·2); −∞ gives NaN in both (−∞·0)
      expect(Number.isNaN(got[0]!)).toBe(true);
      expect(got[1]).toBe(Infinity);
      expect(Number.isNaN(got[2]!)).toBe(true);
      expect(got.slice(3, 5)).toEqual(new Float32Array([0, -0]));
    }
  });

  it('is what the CPU backend runs, and leaves other activations and f64 to the reference', () => {
    const be = new CpuBackend('f32', { threads: 1 });
    const ref = new CpuBackend('f32', { kernels: 'ts' });
    const rng = new Rng(5);
    const [g, u] = [rng.normals(96), rng.normals(96)];
    const y = be.data(F.swiglu(be.fromValues(g, [2, 48]), be.fromValues(u, [2, 48])));
    const direct = new Float32Array(96);
    wasm.glu('silu', new Float32Array(g), new Float32Array(u), direct);
    expect(Array.from(y)).toEqual(Array.from(direct));
    const r = ref.data(F.swiglu(ref.fromValues(g, [2, 48]), ref.fromValues(u, [2, 48])));
    expect(Array.from(y).some((v, i) => v !== r[i])).toBe(true); // two computations, near but not the same bits
    expect(wasm.glu('gelu', new Float32Array(4), new Float32Array(4), new Float32Array(4))).toBe(false);
    expect(wasm.glu('silu', new Float64Array(4), new Float64Array(4), new Float64Array(4))).toBe(false);
  });
});
