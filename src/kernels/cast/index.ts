/**
 * cast: storage conversion of a tensor to f32, f16 or bf16 (round to nearest even, as formats/dtype.ts),
 * from f32, f16, bf16, q8_0 or q4_0 (dequantized); the same dtype copies. Quantizing stays on the CPU
 * (formats/encode.ts). Tensors split across bindings are converted segment by segment.
 */
import { DTypeMismatch } from '../../errors';
import { type DType, byteSize, isQuant, rowBytes } from '../../formats/dtype';
import { Uniforms } from '../../gpu/context';
import { type KernelDef, type Meta, cudaDType, numelOf } from '../kernel';
import { bind, chunkStarts, locate, segments } from '../segments';
import { castForward } from './cpu';
import { castWgsl } from './wgsl';

export type CastTarget = 'f32' | 'f16' | 'bf16';
const WG = 256;

function check(x: Meta, dtype: DType) {
  if (dtype === x.dtype) return;
  if (dtype !== 'f32' && dtype !== 'f16' && dtype !== 'bf16') {
    throw new DTypeMismatch(
      `cast: cannot convert ${x.dtype} to ${dtype} on a backend; cast to f32/f16/bf16, and quantize with formats/encode.ts`,
    );
  }
  if (x.dtype === 'i32') throw new DTypeMismatch('cast: i32 ids are not float values; cast from f32, f16, bf16, q8_0 or q4_0');
}

/** out = x stored as `dtype`; inputs [x]. */
export const castKernel: KernelDef<{ dtype: DType }> = {
  name: 'cast',
  outputs([x], { dtype }) {
    check(x, dtype);
    return [{ shape: x.shape, dtype }];
  },
  cpu([x], [out], { dtype }, { inputs }) {
    castForward(x, inputs[0].dtype, dtype, inputs[0].shape, out);
  },
  webgpu(ctx, [x], [out], { dtype }) {
    const from = x.meta.dtype;
    const shape = x.meta.shape;
    const n = numelOf(shape);
    if (n === 0) return;
    if (from === dtype) {
      // same dtype means the same split, chunk by chunk
      x.chunks.forEach((c, i) =>
        ctx.copy(c.buffer, c.offset, out.chunks[i].buffer, out.chunks[i].offset, Math.min(c.size, out.chunks[i].size)),
      );
      return;
    }
    const to = dtype as CastTarget;
    const unit = shape.length > 1 ? numelOf(shape.slice(1)) : 1;
    const cols = shape.length ? shape[shape.length - 1] : 1;
    const ld = isQuant(from) ? rowBytes(from, cols) / 4 : cols;
    const xs = chunkStarts(x, unit);
    const os = chunkStarts(out, unit);
    for (const [e0, e1] of segments(n, [...xs, ...os])) {
      const lx = locate(x, xs, e0);
      const lo = locate(out, os, e0);
      const len = e1 - e0;
      const chunkLen = lo.chunk.rows * unit;
      const w0 = lo.local >> 1;
      const words = to === 'f32' ? 0 : ((lo.local + len - 1) >> 1) - w0 + 1;
      ctx.dispatch({
        key: `cast_${from}_${to}_wg${WG}`,
        wgsl: () => castWgsl(from, to, WG),
        uniforms: new Uniforms().u32(len).u32(lx.local).u32(lo.local).u32(cols).u32(ld).u32(w0).u32(words).u32(shape.length ? chunkLen : 1),
        bindings: [bind(lx.chunk), bind(lo.chunk)],
        workgroups: ctx.grid(Math.ceil((to === 'f32' ? len : words) / WG)),
      });
    }
  },
  cuda(ctx, [x], [out], { dtype }) {
    const shape = x.meta.shape;
    const n = numelOf(shape);
    if (n === 0) return;
    const cols = shape.length ? shape[shape.length - 1] : 1;
    ctx.launch('cast', [x.ptr, out.ptr], [n, cols, cudaDType(x.meta.dtype), cudaDType(dtype), byteSize(x.meta.dtype, shape)]);
  },
};
