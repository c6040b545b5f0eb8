// The gated activation on the CPU backend's WebAssembly kernels (matmul/wasm.ts `glu`) against the TypeScript
// reference (cpu.ts gluForward): the same bits, for SiLU and the tanh-approximated GELU, on one thread and on three,
// over values that reach every branch of σ and of e^x (signs, zeros, NaN, infinities, e^x's under- and overflow), two
// at a time (the kernel's $exp2) and one.
import { describe, expect, it } from 'vitest';
import { Rng } from '../../util/rng';
import { WasmKernels } from '../matmul/wasm';
import { gluForward } from './cpu';

const one = WasmKernels.load();
const three = WasmKernels.load({ threads: 3, minParallelMacs: 0 });
if (typeof one === 'string' || typeof three === 'string' || !three.pool) throw new Error('the WebAssembly kernels did not load');

describe('glu on the WebAssembly kernels', () => {
  it('gives the reference\'s bits for SiLU and the tanh-approximated GELU, on one thread and on three', () => {
    const rng = new Rng(11);
    const special = [0, -0, NaN, Infinity, -Infinity, 1e-30, -1e-30, 0.5, -0.5, 20, -20, 88, -88, 104, -104, 750, -750, 3e38, -3e38];
    const n = 40000;
    const gate = new Float32Array(n);
    const up = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      gate[i] = i < special.length ? special[i]! : rng.normal() * (i % 3 === 0 ? 30 : 3);
      up[i] = i % 7 === 0 ? special[i % special.length]! : rng.normal();
    }
    const bits = (a: Float32Array) => Array.from(new Uint32Array(a.buffer));
    // an odd count too: the kernel takes two values a pass, then the last alone
    for (const [act, m] of [['silu', n], ['gelu_tanh', n], ['silu', n - 1], ['gelu_tanh', 3]] as const) {
      const [g, u] = [gate.slice(0, m), up.slice(0, m)];
      const want = new Float32Array(m);
      gluForward(act, g, u, want);
      for (const k of [one, three]) {
        const got = new Float32Array(m);
        expect(k.glu(act, g, u, got), `${act} taken`).toBe(true);
        expect(bits(got), `${act} on ${k.threads} thread(s), ${m} values`).toEqual(bits(want));
      }
    }
    // what the kernels do not take stays with the reference
    expect(one.glu('gelu', gate, up, new Float32Array(n))).toBe(false);
    expect(one.glu('silu', new Float64Array(4), new Float64Array(4), new Float64Array(4))).toBe(false);
  });
});
