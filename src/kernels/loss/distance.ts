/**
 * Row-pair losses over a, b [..., d] f32 with an optional f32 row mask (one value per row; 1 = include,
 * 0 = skip; other values weight the row): cosine distance and MSE, each a masked mean over rows.
 * Forward outputs [loss [1], scale [1], (cosine: stats [rows, 3])]; backward kernels take
 * [a, b, (stats,) scale, g, mask?] and `wrt` to produce the gradient of a or b.
 */
import { type GpuContext, Uniforms } from '../../gpu/context';
import { ShapeMismatch } from '../../errors';
import {
  type FloatArray,
  type GpuRef,
  type KernelDef,
  type Meta,
  binding,
  expectDType,
  expectSameShape,
  numelOf,
  rowsCols,
} from '../kernel';
import { scratch } from '../reduce';
import { cosineBackward, cosineRows, maskedMean, mseBackward, mseRows } from './cpu';
import { encodeMaskedMean } from './crossentropy';
import { cosBackwardWgsl, mseBackwardWgsl, pairRowsWgsl } from './wgsl';

const WG = 256;

export interface WrtAttrs {
  /** Which operand the gradient is for. */
  wrt: 'a' | 'b';
}

function checkPair(name: string, a: Meta, b: Meta, mask: Meta | undefined): [rows: number, d: number] {
  expectDType(name, 'a', a, 'f32');
  expectDType(name, 'b', b, 'f32');
  expectSameShape(name, a, b);
  if (a.shape.length < 1 || a.shape[a.shape.length - 1] < 1)
    throw new ShapeMismatch(`${name}: a has shape [${a.shape}], expected [..., d] with d >= 1`);
  const [rows, d] = rowsCols(a.shape);
  if (mask) {
    expectDType(name, 'mask', mask, 'f32');
    if (numelOf(mask.shape) !== rows) {
      throw new ShapeMismatch(
        `${name}: mask has shape [${mask.shape}] (${numelOf(mask.shape)} values) but a [${a.shape}] has ${rows} rows; give one mask value per row`,
      );
    }
  }
  return [rows, d];
}

function checkScalars(name: string, ...ms: Meta[]) {
  for (const m of ms) expectSameShape(name, m, { shape: [1], dtype: 'f32' }, 'scale/g', 'a scalar');
}

function rowsPass(ctx: GpuContext, kind: 'cos' | 'mse', a: GpuRef, b: GpuRef, rowLoss: GPUBufferBinding, stats: GPUBufferBinding | null) {
  const [rows, d] = rowsCols(a.meta.shape);
  if (!rows) return;
  const name = `${kind}_loss`;
  ctx.dispatch({
    key: `${kind}_rows_f32_wg${WG}`,
    wgsl: () => pairRowsWgsl(kind, WG),
    uniforms: new Uniforms().u32(rows).u32(d),
    bindings: [binding(a, name), binding(b, name), rowLoss, ...(stats ? [stats] : [])],
    workgroups: ctx.grid(rows),
  });
}

export const cosineLossKernel: KernelDef<void> = {
  name: 'cosine_loss',
  outputs([a, b, mask]) {
    const [rows] = checkPair('cosine_loss', a, b, mask);
    return [
      { shape: [1], dtype: 'f32' },
      { shape: [1], dtype: 'f32' },
      { shape: [rows, 3], dtype: 'f32' },
    ];
  },
  cpu([a, b, mask], [loss, scale, stats], _attrs, { inputs: [m] }) {
    const [rows, d] = rowsCols(m.shape);
    const rowLoss = new Float64Array(rows);
    cosineRows(a as FloatArray, b as FloatArray, d, stats as FloatArray, rowLoss);
    const r = maskedMean(rowLoss, (mask as FloatArray | undefined) ?? null, 1);
    loss[0] = r.loss;
    scale[0] = r.scale;
  },
  webgpu(ctx, [a, b, mask], [loss, scale, stats]) {
    const rows = rowsCols(a.meta.shape)[0];
    const rowLoss = scratch(ctx, rows, 'cos-row-loss');
    rowsPass(ctx, 'cos', a, b, rowLoss.binding, binding(stats, 'cosine_loss'));
    encodeMaskedMean(
      ctx,
      rowLoss.binding,
      mask ? binding(mask, 'cosine_loss') : null,
      rows,
      1,
      binding(loss, 'cosine_loss'),
      binding(scale, 'cosine_loss'),
    );
    rowLoss.release();
  },
  cuda(ctx, [a, b, mask], [loss, scale, stats]) {
    const [rows, d] = rowsCols(a.meta.shape);
    const work = ctx.temp(Math.max(1, rows) * 4); // row losses
    ctx.launch('cosine_loss', [a.ptr, b.ptr, mask?.ptr ?? 0n, loss.ptr, scale.ptr, stats.ptr, work], [rows, d, mask ? 1 : 0]);
  },
};

export const cosineLossBackwardKernel: KernelDef<WrtAttrs> = {
  name: 'cosine_loss_backward',
  outputs([a, b, stats, scale, g, mask]) {
    const [rows] = checkPair('cosine_loss_backward', a, b, mask);
    expectSameShape('cosine_loss_backward', stats, { shape: [rows, 3], dtype: 'f32' }, 'stats', 'the forward statistics');
    checkScalars('cosine_loss_backward', scale, g);
    return [{ shape: a.shape, dtype: 'f32' }];
  },
  cpu([a, b, stats, scale, g, mask], [dx], { wrt }, { inputs: [m] }) {
    const d = rowsCols(m.shape)[1];
    const [x, y] = wrt === 'a' ? [a, b] : [b, a];
    cosineBackward(
      x as FloatArray,
      y as FloatArray,
      stats as FloatArray,
      (mask as FloatArray | undefined) ?? null,
      scale[0],
      g[0],
      d,
      wrt === 'a' ? 1 : 2,
      dx as FloatArray,
    );
  },
  webgpu(ctx, [a, b, stats, scale, g, mask], [dx], { wrt }) {
    const n = numelOf(a.meta.shape);
    if (!n) return;
    const name = 'cosine_loss_backward';
    const [x, y] = wrt === 'a' ? [a, b] : [b, a];
    const xb = binding(x, name);
    ctx.dispatch({
      key: `cos_backward_f32_wg${WG}`,
      wgsl: () => cosBackwardWgsl(WG),
      uniforms: new Uniforms()
        .u32(n)
        .u32(rowsCols(a.meta.shape)[1])
        .u32(wrt === 'a' ? 1 : 2)
        .u32(mask ? 1 : 0),
      bindings: [
        xb,
        binding(y, name),
        binding(stats, name),
        mask ? binding(mask, name) : xb,
        binding(scale, name),
        binding(g, name),
        binding(dx, name),
      ],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [a, b, stats, scale, g, mask], [dx], { wrt }) {
    const [rows, d] = rowsCols(a.meta.shape);
    const [x, y] = wrt === 'a' ? [a, b] : [b, a];
    ctx.launch(
      'cosine_loss_backward',
      [x.ptr, y.ptr, stats.ptr, mask?.ptr ?? 0n, scale.ptr, g.ptr, dx.ptr],
      [rows, d, wrt === 'a' ? 1 : 2, mask ? 1 : 0],
    );
  },
};

export const mseLossKernel: KernelDef<void> = {
  name: 'mse_loss',
  outputs([a, b, mask]) {
    checkPair('mse_loss', a, b, mask);
    return [
      { shape: [1], dtype: 'f32' },
      { shape: [1], dtype: 'f32' },
    ];
  },
  cpu([a, b, mask], [loss, scale], _attrs, { inputs: [m] }) {
    const [rows, d] = rowsCols(m.shape);
    const rowLoss = new Float64Array(rows);
    mseRows(a as FloatArray, b as FloatArray, d, rowLoss);
    const r = maskedMean(rowLoss, (mask as FloatArray | undefined) ?? null, d);
    loss[0] = r.loss;
    scale[0] = r.scale;
  },
  webgpu(ctx, [a, b, mask], [loss, scale]) {
    const [rows, d] = rowsCols(a.meta.shape);
    const rowLoss = scratch(ctx, rows, 'mse-row-loss');
    rowsPass(ctx, 'mse', a, b, rowLoss.binding, null);
    encodeMaskedMean(
      ctx,
      rowLoss.binding,
      mask ? binding(mask, 'mse_loss') : null,
      rows,
      d,
      binding(loss, 'mse_loss'),
      binding(scale, 'mse_loss'),
    );
    rowLoss.release();
  },
  cuda(ctx, [a, b, mask], [loss, scale]) {
    const [rows, d] = rowsCols(a.meta.shape);
    const work = ctx.temp(Math.max(1, rows) * 4); // row losses
    ctx.launch('mse_loss', [a.ptr, b.ptr, mask?.ptr ?? 0n, loss.ptr, scale.ptr, work], [rows, d, mask ? 1 : 0]);
  },
};

export const mseLossBackwardKernel: KernelDef<WrtAttrs> = {
  name: 'mse_loss_backward',
  outputs([a, b, scale, g, mask]) {
    checkPair('mse_loss_backward', a, b, mask);
    checkScalars('mse_loss_backward', scale, g);
    return [{ shape: a.shape, dtype: 'f32' }];
  },
  cpu([a, b, scale, g, mask], [dx], { wrt }, { inputs: [m] }) {
    const d = rowsCols(m.shape)[1];
    mseBackward(
      a as FloatArray,
      b as FloatArray,
      (mask as FloatArray | undefined) ?? null,
      scale[0],
      g[0],
      d,
      wrt === 'a' ? 1 : -1,
      dx as FloatArray,
    );
  },
  webgpu(ctx, [a, b, scale, g, mask], [dx], { wrt }) {
    const n = numelOf(a.meta.shape);
    if (!n) return;
    const name = 'mse_loss_backward';
    const ab = binding(a, name);
    ctx.dispatch({
      key: `mse_backward_f32_wg${WG}`,
      wgsl: () => mseBackwardWgsl(WG),
      uniforms: new Uniforms().u32(n).u32(rowsCols(a.meta.shape)[1]).f32(wrt === 'a' ? 1 : -1).u32(mask ? 1 : 0),
      bindings: [ab, binding(b, name), mask ? binding(mask, name) : ab, binding(scale, name), binding(g, name), binding(dx, name)],
      workgroups: ctx.grid(Math.ceil(n / WG)),
    });
  },
  cuda(ctx, [a, b, scale, g, mask], [dx], { wrt }) {
    const [rows, d] = rowsCols(a.meta.shape);
    ctx.launch(
      'mse_loss_backward',
      [a.ptr, b.ptr, mask?.ptr ?? 0n, scale.ptr, g.ptr, dx.ptr],
      [rows, d, mask ? 1 : 0],
      [wrt === 'a' ? 1 : -1],
    );
  },
};
