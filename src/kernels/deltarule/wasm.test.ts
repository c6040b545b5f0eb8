// The gated delta rule on the CPU backend's WebAssembly SIMD kernels (matmul/wasm.ts `deltaRule`) against the
// TypeScript reference (cpu.ts deltaRuleForward, f64 sums) on the inputs a Gated DeltaNet feeds it: k and q
// L2-normalised, β in (0, 1), g < 0, so each step's map of the state is a contraction and f32 rounding does not grow
// along the sequence. Each of o, u and the final state is bounded by 1e-5 of its own peak: f32 sums over dk = 4–128
// terms round by about dk·2^-24 of the terms' magnitudes, well inside it; a wrong index or gate is off by the values
// themselves.
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { WasmKernels } from '../matmul/wasm';
import { type DeltaDims, deltaRuleForward } from './cpu';
import { gatedDeltaRuleKernel } from './index';

const loaded = WasmKernels.load();
if (typeof loaded === 'string') throw new Error(`the WebAssembly kernels did not load: ${loaded}`);
const wasm = loaded;

/** Rows of `dk` values, each scaled to unit length (as the DeltaNet's l2 norm leaves q and k). */
function unitRows(rng: Rng, rows: number, dk: number): Float32Array {
  const x = new Float32Array(rng.normals(rows * dk));
  for (let r = 0; r < rows; r++) {
    let n = 0;
    for (let i = 0; i < dk; i++) n += x[r * dk + i] ** 2;
    for (let i = 0; i < dk; i++) x[r * dk + i] /= Math.sqrt(n);
  }
  return x;
}

function inputs(d: DeltaDims, seed: number, withState: boolean) {
  const rng = new Rng(seed);
  const { T, nk, nv, dk, dv } = d;
  return {
    q: unitRows(rng, T * nk, dk), k: unitRows(rng, T * nk, dk), v: new Float32Array(rng.normals(T * nv * dv)),
    g: Float32Array.from(rng.normals(T * nv), (x) => -Math.abs(x) - 0.01),
    beta: Float32Array.from(rng.normals(T * nv), (x) => 1 / (1 + Math.exp(-x))),
    state: withState ? new Float32Array(rng.normals(nv * dk * dv)) : null,
  };
}

function expectClose(got: Float32Array, want: Float32Array, what: string) {
  const peak = Math.max(1e-30, ...Array.from(want, Math.abs));
  const diff = Math.max(0, ...Array.from(got, (x, i) => Math.abs(x - want[i]!)));
  expect(diff / peak, what).toBeLessThan(1e-5);
}

function check(d: DeltaDims, seed: number, withState: boolean) {
  const { q, k, v, g, beta, state } = inputs(d, seed, withState);
  const n = d.T * d.nv * d.dv;
  const sN = d.nv * d.dk * d.dv;
  const [o, u, st] = [new Float32Array(n), new Float32Array(n), new Float32Array(sN)];
  expect(wasm.deltaRule(q, k, v, g, beta, state, o, st, u, d), 'taken').toBe(true);
  const [wo, wu, wst] = [new Float32Array(n), new Float32Array(n), new Float32Array(sN)];
  deltaRuleForward(q, k, v, g, beta, state, wo, wst, wu, d);
  const name = `T ${d.T}, nk ${d.nk}, nv ${d.nv}, dk ${d.dk}, dv ${d.dv}${withState ? ', with a state' : ''}`;
  expectClose(o, wo, `o: ${name}`);
  expectClose(u, wu, `u: ${name}`);
  expectClose(st, wst, `state: ${name}`);
}

describe('the gated delta rule in WebAssembly', () => {
  it('equals the reference with and without a state, grouped heads, one token and a prompt', () => {
    check({ T: 1, nk: 1, nv: 1, dk: 4, dv: 4 }, 1, false);
    check({ T: 7, nk: 2, nv: 4, dk: 16, dv: 8 }, 2, false);
    check({ T: 7, nk: 2, nv: 4, dk: 16, dv: 8 }, 3, true);
    check({ T: 1, nk: 1, nv: 3, dk: 5, dv: 12 }, 4, true);
    check({ T: 24, nk: 2, nv: 2, dk: 32, dv: 16 }, 5, true);
  });

  it("equals the reference at Qwen3.5-0.8B's head size (dk = dv = 128)", () => {
    check({ T: 6, nk: 1, nv: 2, dk: 128, dv: 128 }, 6, true);
  });

  it('hands back the state alone for an empty sequence, and leaves what it cannot take to the reference', () => {
    const d = { T: 0, nk: 1, nv: 2, dk: 4, dv: 4 };
    const { q, k, v, g, beta, state } = inputs(d, 7, true);
    const st = new Float32Array(32);
    expect(wasm.deltaRule(q, k, v, g, beta, state, new Float32Array(0), st, new Float32Array(0), d)).toBe(true);
    expect(Array.from(st)).toEqual(Array.from(state!));
    // dv not a multiple of 4, and f64 arrays: the caller runs the reference
    const odd = { T: 2, nk: 1, nv: 1, dk: 4, dv: 3 };
    const x = inputs(odd, 8, false);
    const outs = () => [new Float32Array(6), new Float32Array(12), new Float32Array(6)] as const;
    expect(wasm.deltaRule(x.q, x.k, x.v, x.g, x.beta, null, ...outs(), odd)).toBe(false);
    const even = { ...odd, dv: 4 };
    const y = inputs(even, 8, false);
    expect(wasm.deltaRule(Float64Array.from(y.q), y.k, y.v, y.g, y.beta, null, new Float32Array(8), new Float32Array(16),
      new Float32Array(8), even)).toBe(false);
  });

  it("runs as the CPU backend's gated_delta_rule op, and the TypeScript kernels keep the reference", async () => {
    const d = { T: 5, nk: 2, nv: 4, dk: 8, dv: 8 };
    const x = inputs(d, 9, true);
    const run = async (be: CpuBackend) => {
      const t = (a: Float32Array, shape: number[]) => be.fromValues(a, shape);
      const outs = be.run(gatedDeltaRuleKernel, [t(x.q, [5, 2, 8]), t(x.k, [5, 2, 8]), t(x.v, [5, 4, 8]), t(x.g, [5, 4]), t(x.beta, [5, 4]),
        t(x.state!, [4, 8, 8])], undefined);
      return Promise.all(outs.map((o) => o.read()));
    };
    const fast = await run(new CpuBackend('f32'));
    const ref = await run(new CpuBackend('f32', { kernels: 'ts' }));
    const want = [new Float32Array(160), new Float32Array(256), new Float32Array(160)];
    deltaRuleForward(x.q, x.k, x.v, x.g, x.beta, x.state, want[0]!, want[1]!, want[2]!, d);
    for (const [i, name] of ['o', 'state', 'u'].entries()) {
      expect(Array.from(ref[i]!), `reference ${name}`).toEqual(Array.from(want[i]!));
      expectClose(fast[i]!, want[i]!, `backend ${name}`);
      expect(fast[i]!.some((y, j) => y !== want[i]![j]), `${name}: the kernels ran, not the reference`).toBe(true);
    }
  });
});
