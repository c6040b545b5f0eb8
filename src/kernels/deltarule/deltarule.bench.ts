import { F } from '../../autograd';
import type { Backend } from '../../tensor/backend';
import type { BenchCase, BenchSize } from '../workbench';
import { Rng } from '../../util/rng';
import { gatedDeltaRuleBwdColsKernel, gatedDeltaRuleBwdGatesKernel, gatedDeltaRuleBwdRowsKernel } from '.';

// Qwen3.5-4B's Gated DeltaNet: 16 key heads, 32 value heads, dk = dv = 128; a 512-token prefill and one decode step
const dims = (size: BenchSize, T: number) => (size === 'tiny' ? { T: Math.min(T, 8), nk: 2, nv: 4, d: 16 } : { T, nk: 16, nv: 32, d: 128 });

function make(backend: Backend, size: BenchSize, T0: number) {
  const { T, nk, nv, d } = dims(size, T0);
  const rng = new Rng(1);
  const unit = () => {
    const x = rng.normals(T * nk * d);
    for (let i = 0; i < x.length; i++) x[i] /= Math.sqrt(d);
    return backend.fromValues(x, [T, nk, d]);
  };
  const t = {
    q: unit(), k: unit(), v: backend.fromValues(rng.normals(T * nv * d), [T, nv, d]),
    g: backend.fromValues(rng.uniforms(T * nv, -1, -0.05), [T, nv]), beta: backend.fromValues(rng.uniforms(T * nv, 0.1, 0.9), [T, nv]),
    state: backend.fromValues(rng.normals(nv * d * d, 0.5), [nv, d, d]),
  };
  // per position and column: decay + predict, update + read, 3 multiply-adds each over dk
  const flops = 6 * T * nv * d * d;
  const bytes = 4 * (2 * T * nk * d + 3 * T * nv * d + 2 * T * nv + 2 * nv * d * d);
  return { T, nk, nv, d, t, flops, bytes, dispose: () => Object.values(t).forEach((x) => x.dispose()) };
}

const forward = (T0: number, label: string): BenchCase => ({
  name: `gated delta rule forward nk 16 nv 32 dk dv 128, ${label} (tiny: T ≤ 8 nk 2 nv 4 d 16)`,
  setup(backend, size) {
    const { t, flops, bytes, dispose } = make(backend, size, T0);
    return {
      run: () => {
        const r = F.gatedDeltaRule(t.q, t.k, t.v, t.g, t.beta, t.state);
        r.o.dispose();
        r.state.dispose();
      },
      flops, bytes, dispose,
    };
  },
});

export const benches: BenchCase[] = [
  forward(512, 'T 512'),
  forward(1, 'one decode step'),
  {
    name: 'gated delta rule backward (columns, rows, gates) nk 16 nv 32 dk dv 128, T 512 (tiny: T 8 nk 2 nv 4 d 16)',
    setup(backend, size) {
      const { T, nv, d, t, flops, bytes, dispose } = make(backend, size, 512);
      const rng = new Rng(2);
      const u = backend.fromValues(rng.normals(T * nv * d), [T, nv, d]);
      const dout = backend.fromValues(rng.normals(T * nv * d), [T, nv, d]);
      return {
        run: () => {
          const [dv, bpart] = backend.run(gatedDeltaRuleBwdColsKernel, [t.q, t.k, t.g, t.beta, u, dout], undefined);
          const [dqp, dkp] = backend.run(gatedDeltaRuleBwdRowsKernel, [t.q, t.k, t.g, t.beta, u, dv, dout, t.state], undefined);
          const gates = backend.run(gatedDeltaRuleBwdGatesKernel, [t.q, t.v, dv, bpart, dqp], undefined);
          [dv, bpart, dqp, dkp, ...gates].forEach((x) => x.dispose());
        },
        // the column pass is the forward's work, the row pass twice that (a forward and a reverse walk)
        flops: 3 * flops, bytes: 3 * bytes, dispose: () => (dispose(), u.dispose(), dout.dispose()),
      };
    },
  },
];
