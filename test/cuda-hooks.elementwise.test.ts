/**
 * The TypeScript side of the CUDA kernels of the elementwise, activation, softmax, reduce, rows, cast and
 * embedding families, without a GPU: every `cuda` hook is run against a fake CudaLauncher that records its
 * launches, and the recorded kernel names, ptrs, ints, floats and temp sizes are pinned for one
 * representative shape each. The recorded argument counts are also checked against the
 * `rmas::counts(args, ptrs, ints, floats)` guard of the launch function that native/cuda/src/kernels/*.cu
 * registers under that name, so the two sides of the layout cannot drift apart unnoticed.
 * Whether the kernels compute the right numbers needs a GPU: npm run test:cuda.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { DType } from '../src/formats/dtype';
import { activationBackwardKernel, activationKernel, gluBackwardKernel, gluKernel } from '../src/kernels/activation';
import { castKernel } from '../src/kernels/cast';
import { addKernel, mulKernel, scaleKernel, subKernel, sumRowsKernel, sumRowsSegments } from '../src/kernels/elementwise';
import { embeddingBackwardKernel, embeddingKernel } from '../src/kernels/embedding';
import type { CudaLauncher, CudaRef, KernelDef } from '../src/kernels/kernel';
import { clipGradNormKernel, reduceBackwardKernel, reduceKernel } from '../src/kernels/reduce';
import { concatRowsKernel, placeRowsKernel, sliceRowsKernel } from '../src/kernels/rows';
import { softmaxBackwardKernel, softmaxKernel } from '../src/kernels/softmax';

interface Launch {
  name: string;
  ptrs: bigint[];
  ints: number[];
  floats: number[];
}

/** Runs a kernel's cuda hook on refs with addresses 0x1000, 0x2000, ... (inputs first, then outputs). */
function record<A>(def: KernelDef<A>, inputs: [number[], DType?][], attrs: A) {
  const launches: Launch[] = [];
  const temps: number[] = [];
  const ctx: CudaLauncher = {
    launch: (name, ptrs, ints = [], floats = []) => void launches.push({ name, ptrs: [...ptrs], ints: [...ints], floats: [...floats] }),
    temp: (bytes) => {
      temps.push(bytes);
      return 0x9000n + BigInt(temps.length - 1) * 0x100n;
    },
    capability: { major: 9, minor: 0 },
  };
  const ins: CudaRef[] = inputs.map(([shape, dtype = 'f32'], i) => ({ meta: { shape, dtype }, ptr: BigInt(0x1000 * (i + 1)) }));
  const outs: CudaRef[] = def
    .outputs(
      ins.map((r) => r.meta),
      attrs,
    )
    .map((meta, i) => ({ meta, ptr: BigInt(0x1000 * (inputs.length + i + 1)) }));
  if (!def.cuda) throw new Error(`${def.name} has no cuda hook`);
  def.cuda(ctx, ins, outs, attrs);
  return { launches, temps };
}

const p = (...k: number[]) => k.map((v) => BigInt(v));

// name -> [ptrs, ints, floats] from each registered launch function's counts() guard (null: variable counts)
function nativeLayouts(): Map<string, [number, number, number] | null> {
  const dir = join(import.meta.dirname, '../native/cuda/src/kernels');
  const out = new Map<string, [number, number, number] | null>();
  for (const f of ['elementwise', 'activation', 'softmax', 'reduce', 'rows', 'cast', 'embedding']) {
    const src = readFileSync(join(dir, `${f}.cu`), 'utf8');
    for (const [, name, fn] of src.matchAll(/RMAS_KERNEL\("(\w+)", (\w+)(?:<\w+>)?\);/g)) {
      const body = src.slice(src.search(new RegExp(`cudaError_t ${fn}\\(const rmas::LaunchArgs`)));
      const m = body.match(/^[^]*?\n\}/)![0].match(/rmas::counts\(args, (\d+), (\d+), (\d+)\)/);
      out.set(name, m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null);
    }
  }
  return out;
}

const native = nativeLayouts();

function expectLaunches(got: Launch[], want: Launch[]) {
  expect(got).toEqual(want);
  for (const l of got) {
    expect(native.has(l.name), `${l.name} is registered by a .cu file`).toBe(true);
    const counts = native.get(l.name);
    if (counts) expect([l.ptrs.length, l.ints.length, l.floats.length], `${l.name} argument counts`).toEqual(counts);
  }
}

describe('cuda hooks: elementwise', () => {
  it('binary ops launch binary_<op> with [numel(a), numel(b)]', () => {
    for (const def of [addKernel, subKernel, mulKernel]) {
      const { launches, temps } = record(def, [[[4, 5]], [[5]]], undefined);
      expectLaunches(launches, [{ name: def.name, ptrs: p(0x1000, 0x2000, 0x3000), ints: [20, 5], floats: [] }]);
      expect(temps).toEqual([]);
    }
    expectLaunches(record(addKernel, [[[4, 5]], [[4, 5]]], undefined).launches, [
      { name: 'binary_add', ptrs: p(0x1000, 0x2000, 0x3000), ints: [20, 20], floats: [] },
    ]);
  });

  it('scale passes alpha and beta (0 by default) as floats', () => {
    expectLaunches(record(scaleKernel, [[[4, 5]]], { alpha: 0.3, beta: -2 }).launches, [
      { name: 'scale', ptrs: p(0x1000, 0x2000), ints: [20], floats: [0.3, -2] },
    ]);
    expectLaunches(record(scaleKernel, [[[7]]], { alpha: -1 }).launches, [
      { name: 'scale', ptrs: p(0x1000, 0x2000), ints: [7], floats: [-1, 0] },
    ]);
  });

  it('sum_rows sums in one pass for short columns and in segments with partials for long ones', () => {
    const short = record(sumRowsKernel, [[[4, 5]]], { shape: [5] });
    expectLaunches(short.launches, [{ name: 'sum_rows', ptrs: p(0x1000, 0x2000, 0), ints: [4, 5, 1], floats: [] }]);
    expect(short.temps).toEqual([]);
    expect(sumRowsSegments(1000, 64)).toBe(4);
    expect(sumRowsSegments(8192, 2048)).toBe(32);
    expect(sumRowsSegments(256, 1)).toBe(1);
    const long = record(sumRowsKernel, [[[10, 100, 64]]], { shape: [64] });
    expectLaunches(long.launches, [{ name: 'sum_rows', ptrs: p(0x1000, 0x2000, 0x9000), ints: [1000, 64, 4], floats: [] }]);
    expect(long.temps).toEqual([4 * 4 * 64]);
  });
});

describe('cuda hooks: activation', () => {
  it('activation and its backward pass the op code (silu 0, gelu 1, gelu_tanh 2)', () => {
    expectLaunches(record(activationKernel, [[[3, 5]]], { op: 'gelu' }).launches, [
      { name: 'activation', ptrs: p(0x1000, 0x2000), ints: [15, 1], floats: [] },
    ]);
    expectLaunches(record(activationKernel, [[[2]]], { op: 'silu' }).launches, [
      { name: 'activation', ptrs: p(0x1000, 0x2000), ints: [2, 0], floats: [] },
    ]);
    expectLaunches(record(activationBackwardKernel, [[[3, 5]], [[3, 5]]], { op: 'gelu_tanh' }).launches, [
      { name: 'activation_backward', ptrs: p(0x1000, 0x2000, 0x3000), ints: [15, 2], floats: [] },
    ]);
    expect(record(activationKernel, [[[0, 5]]], { op: 'gelu' }).launches).toEqual([]);
  });

  it('glu (SwiGLU, GeGLU) and its backward pass the activation code and put absent gradients as null pointers', () => {
    expectLaunches(record(gluKernel, [[[3, 5]], [[3, 5]]], { act: 'silu' }).launches, [
      { name: 'glu', ptrs: p(0x1000, 0x2000, 0x3000), ints: [15, 0], floats: [] },
    ]);
    expectLaunches(record(gluKernel, [[[3, 5]], [[3, 5]]], { act: 'gelu_tanh' }).launches, [
      { name: 'glu', ptrs: p(0x1000, 0x2000, 0x3000), ints: [15, 2], floats: [] },
    ]);
    const ins: [number[]][] = [[[3, 5]], [[3, 5]], [[3, 5]]];
    expectLaunches(record(gluBackwardKernel, ins, { act: 'silu', dgate: true, dup: true }).launches, [
      { name: 'glu_backward', ptrs: p(0x1000, 0x2000, 0x3000, 0x4000, 0x5000), ints: [15, 0], floats: [] },
    ]);
    expectLaunches(record(gluBackwardKernel, ins, { act: 'gelu_tanh', dgate: true, dup: false }).launches, [
      { name: 'glu_backward', ptrs: p(0x1000, 0x2000, 0x3000, 0x4000, 0), ints: [15, 2], floats: [] },
    ]);
    expectLaunches(record(gluBackwardKernel, ins, { act: 'silu', dgate: false, dup: true }).launches, [
      { name: 'glu_backward', ptrs: p(0x1000, 0x2000, 0x3000, 0, 0x4000), ints: [15, 0], floats: [] },
    ]);
    expect(record(gluBackwardKernel, ins, { act: 'silu', dgate: false, dup: false }).launches).toEqual([]);
  });
});

describe('cuda hooks: softmax', () => {
  it('softmax and its backward launch [rows, cols, log] over the leading dims', () => {
    expectLaunches(record(softmaxKernel, [[[2, 3, 7]]], { log: true }).launches, [
      { name: 'softmax', ptrs: p(0x1000, 0x2000), ints: [6, 7, 1], floats: [] },
    ]);
    expectLaunches(record(softmaxBackwardKernel, [[[2, 3, 7]], [[2, 3, 7]]], { log: false }).launches, [
      { name: 'softmax_backward', ptrs: p(0x1000, 0x2000, 0x3000), ints: [6, 7, 0], floats: [] },
    ]);
    expect(record(softmaxKernel, [[[0, 7]]], { log: false }).launches).toEqual([]);
  });
});

describe('cuda hooks: reduce', () => {
  it('reduce over all elements takes the WebGPU plan segments and a partials buffer', () => {
    const r = record(reduceKernel, [[[100_003]]], { op: 'sum', axis: 'all' });
    expectLaunches(r.launches, [{ name: 'reduce', ptrs: p(0x1000, 0x2000, 0x9000), ints: [1, 100_003, 49, 0], floats: [1] }]);
    expect(r.temps).toEqual([4 * 49]);
  });

  it('reduce over the last dim: one block per row, mean as alpha = 1/cols, empty rows still written', () => {
    expectLaunches(record(reduceKernel, [[[3, 5]]], { op: 'mean', axis: 'last' }).launches, [
      { name: 'reduce', ptrs: p(0x1000, 0x2000, 0), ints: [3, 5, 1, 0], floats: [0.2] },
    ]);
    expectLaunches(record(reduceKernel, [[[3, 0]]], { op: 'mean', axis: 'last' }).launches, [
      { name: 'reduce', ptrs: p(0x1000, 0x2000, 0), ints: [3, 0, 0, 0], floats: [Infinity] },
    ]);
    expectLaunches(record(reduceKernel, [[[0]]], { op: 'sumsq', axis: 'all' }).launches, [
      { name: 'reduce', ptrs: p(0x1000, 0x2000, 0), ints: [1, 0, 0, 1], floats: [1] },
    ]);
  });

  it('reduce_backward passes x only for sumsq', () => {
    expectLaunches(record(reduceBackwardKernel, [[[3]], [[3, 5]]], { op: 'sumsq', axis: 'last', shape: [3, 5] }).launches, [
      { name: 'reduce_backward', ptrs: p(0x1000, 0x2000, 0x3000), ints: [15, 5], floats: [1] },
    ]);
    expectLaunches(record(reduceBackwardKernel, [[[1]]], { op: 'mean', axis: 'all', shape: [4, 5] }).launches, [
      { name: 'reduce_backward', ptrs: p(0x1000, 0, 0x2000), ints: [20, 20], floats: [0.05] },
    ]);
  });

  it('clip_grad_norm takes every gradient in one launch with its size and segment count', () => {
    const r = record(clipGradNormKernel, [[[17, 3]], [[200]], [[0]], [[5000]]], { maxNorm: 0.5 });
    expectLaunches(r.launches, [
      {
        name: 'clip_grad_norm',
        ptrs: p(0x5000, 0x9000, 0x1000, 0x2000, 0x3000, 0x4000),
        ints: [51, 1, 200, 1, 0, 0, 5000, 3],
        floats: [0.5],
      },
    ]);
    expect(r.temps).toEqual([4 * 5]);
    const empty = record(clipGradNormKernel, [[[0, 4]]], { maxNorm: 1 });
    expectLaunches(empty.launches, [{ name: 'clip_grad_norm', ptrs: p(0x2000, 0, 0x1000), ints: [0, 0], floats: [1] }]);
    expect(empty.temps).toEqual([]);
  });
});

describe('cuda hooks: rows', () => {
  it('slice_rows, concat_rows and place_rows count and offset in elements', () => {
    expectLaunches(record(sliceRowsKernel, [[[10, 3, 2]]], { start: 2, n: 4 }).launches, [
      { name: 'slice_rows', ptrs: p(0x1000, 0x2000), ints: [24, 12], floats: [] },
    ]);
    expectLaunches(record(concatRowsKernel, [[[2, 3]], [[0, 3]], [[4, 3]]], undefined).launches, [
      { name: 'concat_rows', ptrs: p(0x4000, 0x1000, 0x2000, 0x3000), ints: [6, 0, 12], floats: [] },
    ]);
    expectLaunches(record(placeRowsKernel, [[[4, 3]]], { start: 2, rows: 10 }).launches, [
      { name: 'place_rows', ptrs: p(0x1000, 0x2000), ints: [30, 6, 12], floats: [] },
    ]);
    expect(record(sliceRowsKernel, [[[10, 3]]], { start: 2, n: 0 }).launches).toEqual([]);
  });
});

describe('cuda hooks: cast', () => {
  it('cast passes [n, cols, from, to, bytes of x]', () => {
    expectLaunches(record(castKernel, [[[4, 3]]], { dtype: 'bf16' }).launches, [
      { name: 'cast', ptrs: p(0x1000, 0x2000), ints: [12, 3, 0, 2, 48], floats: [] },
    ]);
    // q4_0 rows of 64: 32 quant bytes + 2 scales (4 bytes)
    expectLaunches(record(castKernel, [[[2, 64], 'q4_0']], { dtype: 'f16' }).launches, [
      { name: 'cast', ptrs: p(0x1000, 0x2000), ints: [128, 64, 4, 1, 72], floats: [] },
    ]);
    expectLaunches(record(castKernel, [[[3], 'f16']], { dtype: 'f16' }).launches, [
      { name: 'cast', ptrs: p(0x1000, 0x2000), ints: [3, 3, 1, 1, 6], floats: [] },
    ]);
  });
});

describe('cuda hooks: embedding', () => {
  it('embedding passes the table dtype code', () => {
    expectLaunches(record(embeddingKernel, [[[2, 3], 'i32'], [[10, 64], 'q8_0']], undefined).launches, [
      { name: 'embedding', ptrs: p(0x1000, 0x2000, 0x3000), ints: [6, 10, 64, 3], floats: [] },
    ]);
  });

  it('embedding_backward takes i32 scratch of 2V + 1 + 2n values', () => {
    const r = record(embeddingBackwardKernel, [[[2, 3], 'i32'], [[2, 3, 4]]], { V: 10 });
    expectLaunches(r.launches, [{ name: 'embedding_backward', ptrs: p(0x1000, 0x2000, 0x3000, 0x9000), ints: [6, 10, 4], floats: [] }]);
    expect(r.temps).toEqual([4 * (2 * 10 + 1 + 2 * 6)]);
    // no ids: the gradient is still written (zeros)
    expectLaunches(record(embeddingBackwardKernel, [[[0], 'i32'], [[0, 4]]], { V: 10 }).launches, [
      { name: 'embedding_backward', ptrs: p(0x1000, 0x2000, 0x3000, 0x9000), ints: [0, 10, 4], floats: [] },
    ]);
  });
});

describe('cuda hooks: native registry', () => {
  it('every kernel of these families is registered with a counts guard, except the variadic ones', () => {
    expect([...native.keys()].sort()).toEqual([
      'activation', 'activation_backward', 'binary_add', 'binary_mul', 'binary_sub', 'cast', 'clip_grad_norm', 'concat_rows',
      'embedding', 'embedding_backward', 'glu', 'glu_backward', 'place_rows', 'reduce', 'reduce_backward', 'scale', 'slice_rows', 'softmax',
      'softmax_backward', 'sum_rows',
    ]);
    expect([...native].filter(([, c]) => c === null).map(([n]) => n).sort()).toEqual(['clip_grad_norm', 'concat_rows']);
  });
});
