/**
 * Parameter gradients of a row norm (shared by RMSNorm and LayerNorm): with x̂ = (x − mean)·rstd per row,
 *   dγ[c] = Σ_rows g·x̂,   dβ[c] = Σ_rows g.
 * Inputs g [rows, C], x [rows, C], stats [rows, 2] = (mean, rstd) as the norms' backward kernels write them.
 * Deterministic on the GPU: blocks of rows are summed in order into partials, then the partials in order.
 */
import { GpuContext, Uniforms } from '../../gpu/context';
import { ShapeMismatch } from '../../errors';
import { type FloatArray, type KernelDef, type Meta, binding, expectDType, expectSameShape, rowsCols } from '../kernel';
import { mainSignature } from '../wgsl';

export interface ParamGradAttrs {
  gamma: boolean;
  beta: boolean;
}

export function normParamGradCpu(
  g: FloatArray,
  x: FloatArray,
  stats: FloatArray,
  cols: number,
  dgamma: FloatArray | null,
  dbeta: FloatArray | null,
) {
  dgamma?.fill(0);
  dbeta?.fill(0);
  for (let row = 0, base = 0; base < g.length; row++, base += cols) {
    const mean = stats[2 * row];
    const rstd = stats[2 * row + 1];
    for (let c = 0; c < cols; c++) {
      if (dgamma) dgamma[c] += g[base + c] * (x[base + c] - mean) * rstd;
      if (dbeta) dbeta[c] += g[base + c];
    }
  }
}

const WG = 64;

function variant({ gamma, beta }: ParamGradAttrs) {
  return gamma && beta ? 'gb' : gamma ? 'g' : 'b';
}

/** Stage 1: thread (column c, row block b) sums its block into part[(b·K + j)·C + c]. */
export function paramGradPartialWgsl(a: ParamGradAttrs): string {
  const K = Number(a.gamma) + Number(a.beta);
  const decl = a.gamma
    ? `@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;`
    : `@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<f32>;`;
  return `struct P { rows: u32, cols: u32, rb: u32 }
@group(0) @binding(0) var<uniform> u: P;
${decl}
${mainSignature(WG)} {
  let c = wid.x * ${WG}u + lid.x;
  if (c >= u.cols) { return; }
  let r0 = wid.y * u.rb;
  let r1 = min(r0 + u.rb, u.rows);
  var sg = 0.0;
  var sb = 0.0;
  for (var r = r0; r < r1; r++) {
    let gv = g[r * u.cols + c];
    ${a.gamma ? 'sg += gv * (x[r * u.cols + c] - stats[2u * r]) * stats[2u * r + 1u];' : ''}
    ${a.beta ? 'sb += gv;' : ''}
  }
  ${a.gamma ? `part[(wid.y * ${K}u) * u.cols + c] = sg;` : ''}
  ${a.beta ? `part[(wid.y * ${K}u + ${K - 1}u) * u.cols + c] = sb;` : ''}
}`;
}

/** Stage 2: one thread per column sums the row-block partials in order. */
export function paramGradFinalWgsl(a: ParamGradAttrs): string {
  const K = Number(a.gamma) + Number(a.beta);
  const outs = [a.gamma && 'dgamma', a.beta && 'dbeta'].filter(Boolean) as string[];
  return `struct P { cols: u32, nblk: u32 }
@group(0) @binding(0) var<uniform> u: P;
@group(0) @binding(1) var<storage, read> part: array<f32>;
${outs.map((n, i) => `@group(0) @binding(${i + 2}) var<storage, read_write> ${n}: array<f32>;`).join('\n')}
${mainSignature(WG)} {
  let c = wid.x * ${WG}u + lid.x;
  if (c >= u.cols) { return; }
  ${outs.map((n, j) => `var s${j} = 0.0;
  for (var b = 0u; b < u.nblk; b++) { s${j} += part[(b * ${K}u + ${j}u) * u.cols + c]; }
  ${n}[c] = s${j};`).join('\n  ')}
}`;
}

/** Rows per block: enough blocks to fill a GPU for narrow weights, few enough that stage 2 stays short. */
const rowsPerBlock = (rows: number) => Math.max(32, Math.ceil(rows / 256));

export const normParamGradKernel: KernelDef<ParamGradAttrs> = {
  name: 'norm_param_grad',
  outputs([g, x, stats], a) {
    const name = 'norm_param_grad';
    expectDType(name, 'g', g, 'f32');
    expectDType(name, 'x', x, 'f32');
    expectDType(name, 'stats', stats, 'f32');
    expectSameShape(name, g, x, 'g', 'x');
    const [rows, cols] = rowsCols(x.shape);
    if (stats.shape.length !== 2 || stats.shape[0] !== rows || stats.shape[1] !== 2) {
      throw new ShapeMismatch(`${name}: stats has shape [${stats.shape}], expected [${rows}, 2] (mean, rstd per row)`);
    }
    if (!a.gamma && !a.beta) throw new ShapeMismatch(`${name}: asked for neither dgamma nor dbeta`);
    const out: Meta = { shape: [cols], dtype: 'f32' };
    return a.gamma && a.beta ? [out, out] : [out];
  },
  cpu([g, x, stats], outs, a, { inputs }) {
    const cols = rowsCols(inputs[0].shape)[1];
    const dg = a.gamma ? (outs[0] as FloatArray) : null;
    const db = a.beta ? (outs[a.gamma ? 1 : 0] as FloatArray) : null;
    normParamGradCpu(g as FloatArray, x as FloatArray, stats as FloatArray, cols, dg, db);
  },
  webgpu(ctx, [g, x, stats], outs, a) {
    const [rows, cols] = rowsCols(x.meta.shape);
    const K = Number(a.gamma) + Number(a.beta);
    const rb = rowsPerBlock(rows);
    const nblk = Math.max(1, Math.ceil(rows / rb));
    const v = variant(a);
    const name = 'norm_param_grad';
    const part = ctx.createBuffer(nblk * K * cols * 4, GpuContext.STORAGE, `${name}-partials`);
    const partB = { buffer: part, offset: 0, size: nblk * K * cols * 4 };
    ctx.dispatch({
      key: `norm_param_grad_partial_f32_${v}_wg${WG}`,
      wgsl: () => paramGradPartialWgsl(a),
      uniforms: new Uniforms().u32(rows).u32(cols).u32(rb),
      bindings: a.gamma ? [binding(g, name), binding(x, name), binding(stats, name), partB] : [binding(g, name), partB],
      workgroups: [Math.ceil(cols / WG), rows ? nblk : 0],
    });
    ctx.dispatch({
      key: `norm_param_grad_final_f32_${v}_wg${WG}`,
      wgsl: () => paramGradFinalWgsl(a),
      uniforms: new Uniforms().u32(cols).u32(rows ? nblk : 0),
      bindings: [partB, ...outs.map((o) => binding(o, name))],
      workgroups: [Math.ceil(cols / WG)],
    });
    // The pool hands the buffer out again only after this batch is submitted, so releasing now is safe.
    ctx.releaseBuffer(part);
  },
  cuda(ctx, [g, x, stats], outs, a) {
    const [rows, cols] = rowsCols(x.meta.shape);
    const K = Number(a.gamma) + Number(a.beta);
    const rb = rowsPerBlock(rows);
    const nblk = Math.ceil(rows / rb);
    const part = nblk ? ctx.temp(nblk * K * cols * 4) : 0n;
    const dgamma = a.gamma ? outs[0].ptr : 0n;
    const dbeta = a.beta ? outs[a.gamma ? 1 : 0].ptr : 0n;
    ctx.launch('norm_param_grad', [g.ptr, x.ptr, stats.ptr, part, dgamma, dbeta], [rows, cols, Number(a.gamma), Number(a.beta), rb]);
  },
};
