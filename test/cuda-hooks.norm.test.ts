// The cuda hooks of the norm, rope, loss, AdamW, sampling and top-k kernels, against a fake
// CudaLauncher that records every launch: the kernel name and the exact ptrs/ints/floats for one
// representative shape each, and that the counts match the launch function's rmas::counts check in
// native/cuda/src/kernels/*.cu (so the TypeScript side and the .cu layout comments stay in sync).
// Whether the kernels compute the right numbers needs a GPU: npm run test:cuda.
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DType } from '../src/formats/dtype';
import { adamwKernel, assignKernel, fillKernel } from '../src/kernels/adamw';
import { adamwScalars } from '../src/kernels/adamw/cpu';
import type { CudaLauncher, CudaRef, KernelDef } from '../src/kernels/kernel';
import { layernormBackwardKernel, layernormKernel } from '../src/kernels/layernorm';
import {
  cosineLossBackwardKernel, cosineLossKernel, crossEntropyBackwardKernel, crossEntropyKernel, mseLossBackwardKernel, mseLossKernel,
} from '../src/kernels/loss';
import { normParamGradKernel, rmsnormBackwardKernel, rmsnormKernel } from '../src/kernels/rmsnorm/index';
import { ropeKernel } from '../src/kernels/rope';
import { argmaxKernel, sampleKernel } from '../src/kernels/sample';
import { topkKernel } from '../src/kernels/topk';

interface Call {
  kernel: string;
  ptrs: bigint[];
  ints: number[];
  floats: number[];
}

/** A launcher that records launches; temp() hands out addresses from 0x9000_0000 up and logs the sizes. */
function fakeLauncher() {
  const calls: Call[] = [];
  const temps: number[] = [];
  let next = 0x9000_0000n;
  const ctx: CudaLauncher = {
    launch(kernel, ptrs, ints = [], floats = []) {
      calls.push({ kernel, ptrs: [...ptrs], ints: [...ints], floats: [...floats] });
    },
    temp(bytes) {
      temps.push(bytes);
      const p = next;
      next += 0x10_0000n;
      return p;
    },
    capability: { major: 9, minor: 0 },
  };
  return { ctx, calls, temps };
}

let addr = 0x1000n;
/** A CudaRef at a fresh fake address. */
function ref(shape: number[], dtype: DType = 'f32'): CudaRef {
  addr += 0x1000n;
  return { meta: { shape, dtype }, ptr: addr };
}

/** Runs `def.cuda` on inputs (outputs made from def.outputs) and returns the recorded launches. */
function launch<A>(def: KernelDef<A>, inputs: CudaRef[], attrs: A) {
  const outs = def.outputs(inputs.map((r) => r.meta), attrs).map((m) => ref([...m.shape], m.dtype));
  const f = fakeLauncher();
  expect(def.cuda, `${def.name} has a cuda hook`).toBeDefined();
  def.cuda!(f.ctx, inputs, outs, attrs);
  return { ...f, outs };
}

/** launch function name -> [nptrs, nints, nfloats] from `rmas::counts(a, p, i, f)` in every kernel file. */
function countsTable(): Map<string, [number, number, number]> {
  const dir = resolve(import.meta.dirname, '../native/cuda/src/kernels');
  const table = new Map<string, [number, number, number]>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cu'))) {
    const src = readFileSync(join(dir, file), 'utf8');
    const fns = new Map<string, [number, number, number]>();
    for (const m of src.matchAll(/cudaError_t (\w+)\(const rmas::LaunchArgs& a\) \{\s*if \(!rmas::counts\(a, (\d+), (\d+), (\d+)\)\)/g)) {
      fns.set(m[1], [Number(m[2]), Number(m[3]), Number(m[4])]);
    }
    for (const m of src.matchAll(/RMAS_KERNEL\("(\w+)", (\w+)\)/g)) {
      const c = fns.get(m[2]);
      if (c) table.set(m[1], c);
    }
  }
  return table;
}

const COUNTS = countsTable();

/** Expects exactly these launches, each matching its launch function's counts check. */
function expectCalls(calls: Call[], want: Call[]) {
  expect(calls).toEqual(want);
  for (const c of calls) {
    expect(COUNTS.get(c.kernel), `a launch function registered as "${c.kernel}" with a counts check`).toEqual([
      c.ptrs.length,
      c.ints.length,
      c.floats.length,
    ]);
  }
}

describe('cuda hooks: norms', () => {
  it('rmsnorm [2, 3, 64] with a bf16 Gemma weight', () => {
    const x = ref([2, 3, 64]);
    const w = ref([64], 'bf16');
    const { calls, outs } = launch(rmsnormKernel, [x, w], { eps: 1e-6, offset: 1 });
    expectCalls(calls, [{ kernel: 'rmsnorm', ptrs: [x.ptr, w.ptr, outs[0].ptr], ints: [6, 64, 2], floats: [1e-6, 1] }]);
  });

  it('rmsnorm_backward with dx (f16 weight) and stats only', () => {
    const x = ref([5, 96]);
    const w = ref([96], 'f16');
    const g = ref([5, 96]);
    const r = launch(rmsnormBackwardKernel, [x, w, g], { eps: 0.5, offset: 0, dx: true });
    expectCalls(r.calls, [
      { kernel: 'rmsnorm_backward', ptrs: [x.ptr, w.ptr, g.ptr, r.outs[0].ptr, r.outs[1].ptr], ints: [5, 96, 1, 1], floats: [0.5, 0] },
    ]);
    const s = launch(rmsnormBackwardKernel, [x], { eps: 1e-5, offset: 1, dx: false });
    expectCalls(s.calls, [
      { kernel: 'rmsnorm_backward', ptrs: [x.ptr, 0n, 0n, 0n, s.outs[0].ptr], ints: [5, 96, 0, 0], floats: [1e-5, 1] },
    ]);
  });

  it('norm_param_grad over 10000 rows: 40-row blocks, partials in scratch', () => {
    const g = ref([10000, 17]);
    const x = ref([10000, 17]);
    const stats = ref([10000, 2]);
    const both = launch(normParamGradKernel, [g, x, stats], { gamma: true, beta: true });
    // rowsPerBlock = max(32, ceil(10000 / 256)) = 40 -> 250 blocks x 2 sums x 17 columns x 4 bytes
    expect(both.temps).toEqual([250 * 2 * 17 * 4]);
    expectCalls(both.calls, [
      {
        kernel: 'norm_param_grad',
        ptrs: [g.ptr, x.ptr, stats.ptr, 0x9000_0000n, both.outs[0].ptr, both.outs[1].ptr],
        ints: [10000, 17, 1, 1, 40],
        floats: [],
      },
    ]);
    const beta = launch(normParamGradKernel, [g, x, stats], { gamma: false, beta: true });
    expect(beta.temps).toEqual([250 * 17 * 4]);
    expectCalls(beta.calls, [
      {
        kernel: 'norm_param_grad',
        ptrs: [g.ptr, x.ptr, stats.ptr, 0x9000_0000n, 0n, beta.outs[0].ptr],
        ints: [10000, 17, 0, 1, 40],
        floats: [],
      },
    ]);
  });

  it('norm_param_grad with no rows takes no scratch', () => {
    const [g, x, stats] = [ref([0, 8]), ref([0, 8]), ref([0, 2])];
    const r = launch(normParamGradKernel, [g, x, stats], { gamma: true, beta: false });
    expect(r.temps).toEqual([]);
    expectCalls(r.calls, [
      { kernel: 'norm_param_grad', ptrs: [g.ptr, x.ptr, stats.ptr, 0n, r.outs[0].ptr, 0n], ints: [0, 8, 1, 0, 32], floats: [] },
    ]);
  });

  it('layernorm with bf16 gamma and f16 beta, and without either', () => {
    const x = ref([4, 200]);
    const gm = ref([200], 'bf16');
    const bt = ref([200], 'f16');
    const r = launch(layernormKernel, [x, gm, bt], { eps: 1e-5, gamma: true, beta: true });
    expectCalls(r.calls, [{ kernel: 'layernorm', ptrs: [x.ptr, gm.ptr, bt.ptr, r.outs[0].ptr], ints: [4, 200, 2, 1], floats: [1e-5] }]);
    const b = launch(layernormKernel, [x, bt], { eps: 1e-5, gamma: false, beta: true });
    expectCalls(b.calls, [{ kernel: 'layernorm', ptrs: [x.ptr, 0n, bt.ptr, b.outs[0].ptr], ints: [4, 200, -1, 1], floats: [1e-5] }]);
    const n = launch(layernormKernel, [x], { eps: 1e-5, gamma: false, beta: false });
    expectCalls(n.calls, [{ kernel: 'layernorm', ptrs: [x.ptr, 0n, 0n, n.outs[0].ptr], ints: [4, 200, -1, -1], floats: [1e-5] }]);
  });

  it('layernorm_backward with dx and f32 gamma, and stats only', () => {
    const x = ref([3, 17]);
    const g = ref([3, 17]);
    const gm = ref([17]);
    const r = launch(layernormBackwardKernel, [x, g, gm], { eps: 1e-5, gamma: true, dx: true });
    expectCalls(r.calls, [
      { kernel: 'layernorm_backward', ptrs: [x.ptr, g.ptr, gm.ptr, r.outs[0].ptr, r.outs[1].ptr], ints: [3, 17, 0, 1], floats: [1e-5] },
    ]);
    const s = launch(layernormBackwardKernel, [x], { eps: 1e-5, gamma: true, dx: false });
    expectCalls(s.calls, [
      { kernel: 'layernorm_backward', ptrs: [x.ptr, 0n, 0n, 0n, s.outs[0].ptr], ints: [3, 17, -1, 0], floats: [1e-5] },
    ]);
  });
});

describe('cuda hooks: rope', () => {
  it('rope [7, 4, 96] partial rotary (24 frequencies), inverse with scale 1.25', () => {
    const x = ref([7, 4, 96]);
    const pos = ref([7], 'i32');
    const freq = ref([24]);
    const r = launch(ropeKernel, [x, pos, freq], { inverse: true, scale: 1.25 });
    expectCalls(r.calls, [{ kernel: 'rope', ptrs: [x.ptr, pos.ptr, freq.ptr, r.outs[0].ptr], ints: [7, 4, 96, 24], floats: [-1, 1.25] }]);
    const f = launch(ropeKernel, [x, pos, freq], { inverse: false, scale: 1 });
    expect(f.calls[0].floats).toEqual([1, 1]);
  });
});

describe('cuda hooks: losses', () => {
  it('cross_entropy [2, 5, 151936] and its backward, ignore index -1', () => {
    const x = ref([2, 5, 151936]);
    const labels = ref([2, 5], 'i32');
    const r = launch(crossEntropyKernel, [x, labels], { ignoreIndex: -1 });
    const [loss, lse, scale] = r.outs;
    expect(r.temps).toEqual([2 * 10 * 4]);
    expectCalls(r.calls, [
      {
        kernel: 'cross_entropy',
        ptrs: [x.ptr, labels.ptr, loss.ptr, lse.ptr, scale.ptr, 0x9000_0000n],
        ints: [10, 151936, -1],
        floats: [],
      },
    ]);
    const g = ref([1]);
    const b = launch(crossEntropyBackwardKernel, [x, labels, lse, scale, g], { ignoreIndex: -100 });
    expectCalls(b.calls, [
      {
        kernel: 'cross_entropy_backward',
        ptrs: [x.ptr, labels.ptr, lse.ptr, scale.ptr, g.ptr, b.outs[0].ptr],
        ints: [10, 151936, -100],
        floats: [],
      },
    ]);
  });

  it('cosine_loss masked, and its backward for b', () => {
    const a = ref([6, 96]);
    const b = ref([6, 96]);
    const mask = ref([6]);
    const r = launch(cosineLossKernel, [a, b, mask], undefined);
    const [loss, scale, stats] = r.outs;
    expect(r.temps).toEqual([6 * 4]);
    expectCalls(r.calls, [
      { kernel: 'cosine_loss', ptrs: [a.ptr, b.ptr, mask.ptr, loss.ptr, scale.ptr, stats.ptr, 0x9000_0000n], ints: [6, 96, 1], floats: [] },
    ]);
    const g = ref([1]);
    const bw = launch(cosineLossBackwardKernel, [a, b, stats, scale, g, mask], { wrt: 'b' });
    // x is the operand differentiated (b), y the other; which = 2 picks |b|^2 in the stats
    expectCalls(bw.calls, [
      {
        kernel: 'cosine_loss_backward',
        ptrs: [b.ptr, a.ptr, stats.ptr, mask.ptr, scale.ptr, g.ptr, bw.outs[0].ptr],
        ints: [6, 96, 2, 1],
        floats: [],
      },
    ]);
    const ua = launch(cosineLossBackwardKernel, [a, b, stats, scale, g], { wrt: 'a' });
    expectCalls(ua.calls, [
      {
        kernel: 'cosine_loss_backward',
        ptrs: [a.ptr, b.ptr, stats.ptr, 0n, scale.ptr, g.ptr, ua.outs[0].ptr],
        ints: [6, 96, 1, 0],
        floats: [],
      },
    ]);
  });

  it('mse_loss unmasked, and its backward for b (sign -1) with a mask', () => {
    const a = ref([3, 17]);
    const b = ref([3, 17]);
    const r = launch(mseLossKernel, [a, b], undefined);
    const [loss, scale] = r.outs;
    expectCalls(r.calls, [
      { kernel: 'mse_loss', ptrs: [a.ptr, b.ptr, 0n, loss.ptr, scale.ptr, 0x9000_0000n], ints: [3, 17, 0], floats: [] },
    ]);
    const g = ref([1]);
    const mask = ref([3]);
    const bw = launch(mseLossBackwardKernel, [a, b, scale, g, mask], { wrt: 'b' });
    expectCalls(bw.calls, [
      { kernel: 'mse_loss_backward', ptrs: [a.ptr, b.ptr, mask.ptr, scale.ptr, g.ptr, bw.outs[0].ptr], ints: [3, 17, 1], floats: [-1] },
    ]);
  });
});

describe('cuda hooks: optimizer', () => {
  it('adamw over [5000] with a decay mask passes the f64 per-step scalars', () => {
    const [p, g, m, v, mask] = [ref([5000]), ref([5000]), ref([5000]), ref([5000]), ref([5000])];
    const h = { lr: 1e-2, beta1: 0.8, beta2: 0.99, eps: 0.03, weightDecay: 0.5, t: 4 };
    const r = launch(adamwKernel, [p, g, m, v, mask], h);
    const lrWd = 1e-2 * 0.5;
    const stepSize = 1e-2 / (1 - 0.8 ** 4);
    const bc2sqrt = Math.sqrt(1 - 0.99 ** 4);
    expect(adamwScalars(h)).toEqual({ lrWd, stepSize, bc2sqrt });
    expectCalls(r.calls, [
      {
        kernel: 'adamw',
        ptrs: [p.ptr, g.ptr, m.ptr, v.ptr, mask.ptr],
        ints: [5000, 1],
        floats: [lrWd, 0.8, 1 - 0.8, 0.99, 1 - 0.99, stepSize, bc2sqrt, 0.03],
      },
    ]);
    const u = launch(adamwKernel, [p, g, m, v], h);
    expect(u.calls[0].ptrs[4]).toBe(0n);
    expect(u.calls[0].ints).toEqual([5000, 0]);
  });

  it('assign (copy and add) and fill', () => {
    const [dst, src] = [ref([4, 25]), ref([4, 25])];
    expectCalls(launch(assignKernel, [dst, src], { add: false }).calls, [
      { kernel: 'assign', ptrs: [dst.ptr, src.ptr], ints: [100, 0], floats: [] },
    ]);
    expectCalls(launch(assignKernel, [dst, src], { add: true }).calls, [
      { kernel: 'assign', ptrs: [dst.ptr, src.ptr], ints: [100, 1], floats: [] },
    ]);
    expectCalls(launch(fillKernel, [dst], { value: -0.5 }).calls, [{ kernel: 'fill', ptrs: [dst.ptr], ints: [100], floats: [-0.5] }]);
  });
});

describe('cuda hooks: token selection', () => {
  it('argmax of [V] and [B, V]', () => {
    const x1 = ref([151936]);
    const r1 = launch(argmaxKernel, [x1], undefined);
    expectCalls(r1.calls, [{ kernel: 'argmax', ptrs: [x1.ptr, r1.outs[0].ptr], ints: [1, 151936], floats: [] }]);
    const x = ref([3, 17]);
    const r = launch(argmaxKernel, [x], undefined);
    expectCalls(r.calls, [{ kernel: 'argmax', ptrs: [x.ptr, r.outs[0].ptr], ints: [3, 17], floats: [] }]);
  });

  it('sample: temperature 0 is argmax; top-k >= V turns top-k off; seed and step as u32', () => {
    const x = ref([3, 17]);
    const a0 = { temperature: 0, topK: 5, topP: 0.9, seed: 7, step: 2 };
    const r0 = launch(sampleKernel, [x], a0);
    expectCalls(r0.calls, [{ kernel: 'argmax', ptrs: [x.ptr, r0.outs[0].ptr], ints: [3, 17], floats: [] }]);
    const a = { temperature: 0.7, topK: 5, topP: 0.85, seed: 0xfffffffe, step: 123 };
    const r = launch(sampleKernel, [x], a);
    expectCalls(r.calls, [{ kernel: 'sample', ptrs: [x.ptr, r.outs[0].ptr], ints: [3, 17, 5, 0xfffffffe, 123], floats: [0.7, 0.85] }]);
    const k = launch(sampleKernel, [x], { ...a, topK: 17 });
    expect(k.calls[0].ints).toEqual([3, 17, 0, 0xfffffffe, 123]);
  });

  it('topk k=7 of [2, 3, 50]', () => {
    const x = ref([2, 3, 50]);
    const r = launch(topkKernel, [x], { k: 7 });
    const [values, indices] = r.outs;
    expectCalls(r.calls, [{ kernel: 'topk', ptrs: [x.ptr, values.ptr, indices.ptr], ints: [6, 50, 7], floats: [] }]);
  });
});

describe('cuda hooks: the .cu side', () => {
  it('every kernel these hooks launch is registered once, with a counts check', () => {
    const names = ['rmsnorm', 'rmsnorm_backward', 'norm_param_grad', 'layernorm', 'layernorm_backward', 'rope', 'cross_entropy',
      'cross_entropy_backward', 'cosine_loss', 'cosine_loss_backward', 'mse_loss', 'mse_loss_backward', 'adamw', 'assign', 'fill',
      'argmax', 'sample', 'topk'];
    const dir = resolve(import.meta.dirname, '../native/cuda/src/kernels');
    const all = readdirSync(dir)
      .filter((f) => f.endsWith('.cu'))
      .flatMap((f) => [...readFileSync(join(dir, f), 'utf8').matchAll(/RMAS_KERNEL\("(\w+)"/g)].map((m) => m[1]));
    for (const n of names) {
      expect(all.filter((x) => x === n), `registrations of "${n}"`).toHaveLength(1);
      expect(COUNTS.has(n), `"${n}" has a counts check`).toBe(true);
    }
  });
});
