/**
 * Cross-entropy with an ignore index: logits [..., V] f32, labels i32 of the leading shape.
 * Forward outputs [loss [1], lse [rows], scale [1]] (lse and scale = 1 / labelled rows are kept for
 * backward). Logits may be split across bindings (4096 x 151,936 f32 is 2.5 GB): each chunk of whole
 * rows is dispatched with its first row as an offset.
 */
import { type GpuContext, Uniforms } from '../../gpu/context';
import { ShapeMismatch } from '../../errors';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectSameShape, numelOf, rowsCols } from '../kernel';
import { scratch, spans } from '../reduce';
import { crossEntropyBackward, crossEntropyForward } from './cpu';
import { NAN_BITS, ceBackwardWgsl, ceRowsWgsl, maskedMeanWgsl } from './wgsl';

const WG = 256;

export interface CrossEntropyAttrs {
  /** Label value of rows that do not count (torch default -100). */
  ignoreIndex: number;
}

function checkCe(name: string, logits: Meta, labels: Meta): [rows: number, V: number] {
  expectDType(name, 'logits', logits, 'f32');
  expectDType(name, 'labels', labels, 'i32');
  if (logits.shape.length < 1 || logits.shape[logits.shape.length - 1] < 1) {
    throw new ShapeMismatch(`${name}: logits have shape [${logits.shape}], expected [..., V] with V >= 1`);
  }
  const [rows, V] = rowsCols(logits.shape);
  if (numelOf(labels.shape) !== rows) {
    throw new ShapeMismatch(
      `${name}: labels have shape [${labels.shape}] (${numelOf(labels.shape)} values) but logits [${logits.shape}] have ${rows} rows; give one label per row`,
    );
  }
  return [rows, V];
}

/** Folds row losses and weights into the masked mean on one workgroup. */
export function encodeMaskedMean(
  ctx: GpuContext, rowLoss: GPUBufferBinding, weight: GPUBufferBinding | null, n: number, div: number,
  loss: GPUBufferBinding, scale: GPUBufferBinding,
) {
  ctx.dispatch({
    key: `masked_mean_f32_wg${WG}`,
    wgsl: () => maskedMeanWgsl(WG),
    uniforms: new Uniforms().u32(n).f32(div).u32(weight ? 1 : 0),
    bindings: [rowLoss, weight ?? rowLoss, loss, scale],
    workgroups: [1],
  });
}

export const crossEntropyKernel: KernelDef<CrossEntropyAttrs> = {
  name: 'cross_entropy',
  outputs([logits, labels]) {
    const [rows] = checkCe('cross_entropy', logits, labels);
    return [
      { shape: [1], dtype: 'f32' },
      { shape: [rows], dtype: 'f32' },
      { shape: [1], dtype: 'f32' },
    ];
  },
  cpu([x, labels], [loss, lse, scale], { ignoreIndex }, { inputs: [m] }) {
    const V = m.shape[m.shape.length - 1];
    crossEntropyForward(x as FloatArray, labels as Int32Array, V, ignoreIndex, {
      loss: loss as FloatArray,
      lse: lse as FloatArray,
      scale: scale as FloatArray,
    });
  },
  webgpu(ctx, [x, labels], [loss, lse, scale], { ignoreIndex }) {
    const [rows, V] = rowsCols(x.meta.shape);
    const lab = binding(labels, 'cross_entropy labels');
    const lseB = binding(lse, 'cross_entropy lse');
    const rowLoss = scratch(ctx, rows, 'ce-row-loss');
    const weight = scratch(ctx, rows, 'ce-row-weight');
    for (const s of spans(x)) {
      const n = s.count / V;
      if (!n) continue;
      ctx.dispatch({
        key: `ce_rows_f32_wg${WG}`,
        wgsl: () => ceRowsWgsl(WG),
        uniforms: new Uniforms().u32(n).u32(V).u32(s.start / V).i32(ignoreIndex).u32(NAN_BITS),
        bindings: [s.binding, lab, lseB, rowLoss.binding, weight.binding],
        workgroups: ctx.grid(n),
      });
    }
    encodeMaskedMean(ctx, rowLoss.binding, weight.binding, rows, 1, binding(loss, 'cross_entropy'), binding(scale, 'cross_entropy'));
    rowLoss.release();
    weight.release();
  },
  cuda(ctx, [x, labels], [loss, lse, scale], { ignoreIndex }) {
    const [rows, V] = rowsCols(x.meta.shape);
    const work = ctx.temp(Math.max(1, 2 * rows) * 4); // row losses, then row weights
    ctx.launch('cross_entropy', [x.ptr, labels.ptr, loss.ptr, lse.ptr, scale.ptr, work], [rows, V, ignoreIndex]);
  },
};

/** dlogits from [logits, labels, lse, scale, g] (g: the loss gradient, [1]). */
export const crossEntropyBackwardKernel: KernelDef<CrossEntropyAttrs> = {
  name: 'cross_entropy_backward',
  outputs([logits, labels, lse, scale, g]) {
    const [rows] = checkCe('cross_entropy_backward', logits, labels);
    expectSameShape('cross_entropy_backward', lse, { shape: [rows], dtype: 'f32' }, 'lse', 'one value per row');
    expectSameShape('cross_entropy_backward', scale, { shape: [1], dtype: 'f32' }, 'scale', 'a scalar');
    expectSameShape('cross_entropy_backward', g, { shape: [1], dtype: 'f32' }, 'g', 'the scalar loss');
    return [{ shape: logits.shape, dtype: 'f32' }];
  },
  cpu([x, labels, lse, scale, g], [dx], { ignoreIndex }, { inputs: [m] }) {
    const V = m.shape[m.shape.length - 1];
    crossEntropyBackward(x as FloatArray, labels as Int32Array, lse as FloatArray, scale[0], g[0], V, ignoreIndex, dx as FloatArray);
  },
  webgpu(ctx, [x, labels, lse, scale, g], [dx], { ignoreIndex }) {
    const V = x.meta.shape[x.meta.shape.length - 1];
    const name = 'cross_entropy_backward';
    const shared = [binding(labels, name), binding(lse, name), binding(scale, name), binding(g, name)];
    const xs = spans(x);
    spans(dx).forEach((d, k) => {
      if (!d.count) return;
      ctx.dispatch({
        key: `ce_backward_f32_wg${WG}`,
        wgsl: () => ceBackwardWgsl(WG),
        uniforms: new Uniforms().u32(d.count).u32(V).u32(d.start / V).i32(ignoreIndex).u32(NAN_BITS),
        bindings: [xs[k].binding, ...shared, d.binding],
        workgroups: ctx.grid(Math.ceil(d.count / WG)),
      });
    });
  },
  cuda(ctx, [x, labels, lse, scale, g], [dx], { ignoreIndex }) {
    const [rows, V] = rowsCols(x.meta.shape);
    ctx.launch('cross_entropy_backward', [x.ptr, labels.ptr, lse.ptr, scale.ptr, g.ptr, dx.ptr], [rows, V, ignoreIndex]);
  },
};
