/**
 * Token selection: logits [V] or [B, V] (f32) -> ids [B] (i32; [1] for 1-D logits). Temperature 0 is
 * argmax (lowest index among equal maxima); otherwise temperature, top-k, top-p and a seeded draw
 * with the semantics written out in cpu.ts. Not differentiable. NaN logits give unspecified ids;
 * -Infinity logits are never picked unless the whole row is -Infinity.
 */
import { InvalidArgument, ShapeMismatch } from '../../errors';
import { Uniforms } from '../../gpu/context';
import type { GpuContext } from '../../gpu/context';
import { type CudaRef, type FloatArray, type GpuRef, type KernelDef, type Meta, binding, expectDType, expectRank } from '../kernel';
import { type SampleAttrs, sampleForward } from './cpu';
import { argmaxWgsl, sampleWgsl } from './wgsl';

export type { SampleAttrs } from './cpu';
export { argmaxRow, keptWeights, pcgHash, sampleRow, uniformFor } from './cpu';

const WG_ARGMAX = 256;
const WG_SAMPLE = 128; // 16 radix bins x 128 threads of f32 = 8 KiB of workgroup memory
/** f32 counts in the radix select are exact below 2^24. */
const MAX_VOCAB = 1 << 24;

/** Fills defaults and checks ranges: temperature >= 0, integer topK >= 0, topP in (0, 1]. */
export function sampleAttrs(o: Partial<SampleAttrs> = {}): SampleAttrs {
  const a: SampleAttrs = { temperature: o.temperature ?? 1, topK: o.topK ?? 0, topP: o.topP ?? 1, seed: o.seed ?? 0, step: o.step ?? 0 };
  if (!(a.temperature >= 0) || !Number.isFinite(a.temperature)) {
    throw new InvalidArgument(`sample: temperature ${a.temperature} must be a finite number >= 0 (0 picks the argmax)`);
  }
  if (!Number.isInteger(a.topK) || a.topK < 0) throw new InvalidArgument(`sample: topK ${a.topK} must be an integer >= 0 (0 turns it off)`);
  if (!(a.topP > 0 && a.topP <= 1)) throw new InvalidArgument(`sample: topP ${a.topP} must be in (0, 1] (1 turns it off)`);
  for (const k of ['seed', 'step'] as const) {
    if (!Number.isInteger(a[k]) || a[k] < 0 || a[k] > 0xffffffff) {
      throw new InvalidArgument(`sample: ${k} ${a[k]} must be an integer in [0, 2^32)`);
    }
  }
  return a;
}

function idsMeta(op: string, [x]: readonly Meta[]): Meta[] {
  expectDType(op, 'logits', x, 'f32');
  expectRank(op, 'logits', x, 1, 2);
  const v = x.shape[x.shape.length - 1];
  if (v < 1 || v >= MAX_VOCAB)
    throw new ShapeMismatch(`${op}: logits have ${v} columns; expected a vocabulary of 1 to ${MAX_VOCAB - 1} tokens`);
  return [{ shape: [x.shape.length === 2 ? x.shape[0] : 1], dtype: 'i32' }];
}

/** One dispatch per chunk of rows (logits of a large batch may be split across bindings). */
function perChunk(x: GpuRef, fn: (rows: number, rowOffset: number, logits: GPUBufferBinding) => void) {
  const whole = x.meta.shape.length === 1;
  let rowOffset = 0;
  for (const c of x.chunks) {
    const rows = whole ? 1 : c.rows;
    if (rows > 0) fn(rows, rowOffset, { buffer: c.buffer, offset: c.offset, size: c.size });
    rowOffset += rows;
  }
}

function dispatchArgmax(ctx: GpuContext, x: GpuRef, out: GpuRef) {
  const v = x.meta.shape[x.meta.shape.length - 1];
  const ids = binding(out, 'argmax');
  perChunk(x, (rows, rowOffset, logits) =>
    ctx.dispatch({
      key: `argmax_f32_wg${WG_ARGMAX}`,
      wgsl: () => argmaxWgsl(WG_ARGMAX),
      uniforms: new Uniforms().u32(rows).u32(v).u32(rowOffset),
      bindings: [logits, ids],
      workgroups: ctx.grid(rows),
    }),
  );
}

/** ints [rows, V] of a [V] or [B, V] logits tensor (rows = the length of the ids output). */
function cudaRows(x: CudaRef, ids: CudaRef): [rows: number, v: number] {
  return [ids.meta.shape[0], x.meta.shape[x.meta.shape.length - 1]];
}

export const argmaxKernel: KernelDef<void> = {
  name: 'argmax',
  outputs: (inputs) => idsMeta('argmax', inputs),
  cpu([x], [out], _a, { inputs }) {
    const v = inputs[0].shape[inputs[0].shape.length - 1];
    sampleForward(x as FloatArray, (out as Int32Array).length, v, sampleAttrs({ temperature: 0 }), out as Int32Array);
  },
  webgpu(ctx, [x], [out]) {
    dispatchArgmax(ctx, x, out);
  },
  cuda(ctx, [x], [out]) {
    ctx.launch('argmax', [x.ptr, out.ptr], cudaRows(x, out));
  },
};

export const sampleKernel: KernelDef<SampleAttrs> = {
  name: 'sample',
  outputs(inputs, attrs) {
    sampleAttrs(attrs);
    return idsMeta('sample', inputs);
  },
  cpu([x], [out], attrs, { inputs }) {
    const v = inputs[0].shape[inputs[0].shape.length - 1];
    sampleForward(x as FloatArray, (out as Int32Array).length, v, attrs, out as Int32Array);
  },
  webgpu(ctx, [x], [out], a) {
    if (a.temperature === 0) return dispatchArgmax(ctx, x, out);
    const v = x.meta.shape[x.meta.shape.length - 1];
    const ids = binding(out, 'sample');
    const topK = a.topK >= v ? 0 : a.topK;
    // a p just below 1 must not round to 1 in f32, which would turn top-p off on the GPU only
    const topP = a.topP < 1 ? Math.min(Math.fround(a.topP), 1 - 2 ** -24) : 1;
    perChunk(x, (rows, rowOffset, logits) =>
      ctx.dispatch({
        key: `sample_f32_wg${WG_SAMPLE}`,
        wgsl: () => sampleWgsl(WG_SAMPLE),
        uniforms: new Uniforms().u32(rows).u32(v).u32(rowOffset).u32(topK).f32(topP).f32(a.temperature).u32(a.seed).u32(a.step),
        bindings: [logits, ids],
        workgroups: ctx.grid(rows),
      }),
    );
  },
  cuda(ctx, [x], [out], a) {
    const [rows, v] = cudaRows(x, out);
    if (a.temperature === 0) return ctx.launch('argmax', [x.ptr, out.ptr], [rows, v]);
    // floats travel as f64: top-p needs no f32 clamp here (the kernel compares in f64)
    ctx.launch('sample', [x.ptr, out.ptr], [rows, v, a.topK >= v ? 0 : a.topK, a.seed, a.step], [a.temperature, a.topP]);
  },
};
