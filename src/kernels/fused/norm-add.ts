/**
 * res + rmsNorm(y)·(offset + w) in one dispatch: Gemma 3's post-feed-forward norm with its residual add (the sandwich's
 * attention side folds into the next fused GEMV instead, FusedGemvAttrs.preAdd).
 */
import { Uniforms } from '../../gpu/context';
import { type FloatArray, type KernelDef, binding, expectDType, expectSameShape, rowsCols } from '../kernel';
import { checkRowParam, floatValues } from '../rmsnorm';
import { flatWorkgroup, loadFn, mainSignature } from '../wgsl';
import { wgSumWgsl } from '../rmsnorm/wgsl';

export interface NormAddAttrs {
  eps: number;
  offset: number;
}

const WG = 256;

/** Inputs: y [.., K], w [K], res shaped like y. */
export const normAddKernel: KernelDef<NormAddAttrs> = {
  name: 'norm_add',
  outputs([y, w, res]) {
    checkRowParam('norm_add', y, w, 'weight', ['f32', 'f16', 'bf16']);
    expectDType('norm_add', 'residual', res, 'f32');
    expectSameShape('norm_add', y, res, 'y', 'residual');
    return [{ shape: y.shape, dtype: 'f32' }];
  },
  cpu([y, w, res], [out], { eps, offset }, { inputs }) {
    const [rows, cols] = rowsCols(inputs[0].shape);
    const [yv, rv, o] = [y as FloatArray, res as FloatArray, out as FloatArray];
    const wv = floatValues(w, inputs[1].dtype);
    for (let r = 0; r < rows; r++) {
      let ss = 0;
      for (let c = 0; c < cols; c++) ss += yv[r * cols + c] ** 2;
      const s = 1 / Math.sqrt(ss / cols + eps);
      // the normalised value is an f32 tensor on the unfused path
      for (let c = 0; c < cols; c++) o[r * cols + c] = rv[r * cols + c] + Math.fround(yv[r * cols + c] * s * (offset + wv[c]));
    }
  },
  webgpu(ctx, [y, w, res], [out], { eps, offset }) {
    const [rows, cols] = rowsCols(y.meta.shape);
    if (rows === 0) return;
    const wd = w.meta.dtype;
    ctx.dispatch({
      key: `norm_add_w${wd}_wg${WG}`,
      wgsl: () => `struct P { rows: u32, cols: u32, eps: f32, woff: f32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> y: array<f32>;
${loadFn('w', 2, wd)}
@group(0) @binding(3) var<storage, read> res: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
${wgSumWgsl(WG)}
${mainSignature(WG)} {
  let row = ${flatWorkgroup};
  if (row >= u.rows) { return; }
  let base = row * u.cols;
  var ss = 0.0;
  for (var c = lid.x; c < u.cols; c += ${WG}u) { let v = y[base + c]; ss += v * v; }
  let r = inverseSqrt(wg_sum(vec2<f32>(ss, 0.0), lid.x).x / f32(u.cols) + u.eps);
  for (var c = lid.x; c < u.cols; c += ${WG}u) { out[base + c] = res[base + c] + y[base + c] * r * (u.woff + load_w(c)); }
}`,
      uniforms: new Uniforms().u32(rows).u32(cols).f32(eps).f32(offset),
      bindings: [y, w, res, out].map((r) => binding(r, 'norm_add')),
      workgroups: ctx.grid(rows),
    });
  },
};
