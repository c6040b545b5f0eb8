/**
 * matmul: C = op(A)·op(B) (+ bias [N]) for f32 activations A and B in f32, f16, bf16, q8_0 or q4_0
 * (quantized/half B dequantized inside the kernel). Batched A with batched or shared 2-D B; leading dims of
 * A fold into M when B is shared. Any operand may arrive split across bindings (GpuRef.chunks): the
 * dispatcher cuts the problem at chunk boundaries, and a B split along K accumulates into C in order.
 * Backward is the same kernel with other flags (see autograd/ops/linear.ts).
 */
import { InvalidArgument } from '../../errors';
import { isQuant, rowBytes } from '../../formats/dtype';
import { type GpuContext, Uniforms } from '../../gpu/context';
import type { FloatArray, GpuRef, KernelDef } from '../kernel';
import { dequantize, matmulForward } from './cpu';
import { cudaMatmul } from './cuda';
import { type Axis, type Dim, type MatmulAttrs, type MatmulPlan, planMatmul } from './plan';
import { bind, chunkStarts, locate, segments } from '../segments';
import { isSoftwareAdapter } from '../../gpu/device';
import { override } from '../../util/override';
import { type GemmGeometry, gemmGeometry, gemmKey, gemmReadsB, gemmTile, gemmWgsl } from './gemm-wgsl';
import {
  FLAG_ACCUMULATE, FLAG_BIAS, FLAG_TRANS_A, FLAG_TRANS_B, GEMV_MR, GEMV_ROWS, type GemvMode, type MatmulVariant, gemvWgsl, tiledWgsl,
} from './wgsl';

export type { MatmulAttrs } from './plan';
export { planMatmul } from './plan';
export { rowColLoader } from './wgsl';
export { bind, chunkStarts, locate, segments } from '../segments';

const TILE = 64;
/** M up to this uses the GEMV path by default (weights are read once per 4 rows of A). */
export const GEMV_MAX_M = 8;

/** C = op(A)·op(B) (+ bias): inputs [a, b] or [a, b, bias]; attrs pick transposes, batch-sum and path. */
export const matmulKernel: KernelDef<MatmulAttrs> = {
  name: 'matmul',
  outputs([a, b, bias], attrs) {
    return [{ shape: planMatmul(a, b, bias, attrs).outShape, dtype: 'f32' }];
  },
  cpu([a, b, bias], [out], attrs, { inputs, wasm }) {
    const p = planMatmul(inputs[0], inputs[1], inputs[2], attrs);
    if (wasm?.matmul(p, a as FloatArray, b, inputs[1].dtype, bias ? (bias as FloatArray) : null, out as FloatArray)) return;
    const bv = dequantize(b, inputs[1].dtype, inputs[1].shape);
    matmulForward(p, a as FloatArray, bv, bias ? (bias as FloatArray) : null, out as FloatArray);
  },
  webgpu(ctx, inputs, [out], attrs) {
    dispatchMatmul(ctx, inputs, out, attrs);
  },
  cuda(ctx, inputs, [out], attrs) {
    cudaMatmul(ctx, inputs, out, attrs);
  },
};

/**
 * How C = A·Bᵀ against an [N, K] weight is tiled at M > GEMV_MAX_M (kernels/matmul/gemm-wgsl.ts): 'direct' (4×4
 * per invocation, operands straight from storage, no barrier; it takes M ≤ GEMV_MAX_M too), 'shared' (the same
 * block from workgroup-memory tiles), or 'tiled' (the 64×64 kernel every other matmul takes). 'auto': direct on CPU
 * rasterisers (isSoftwareAdapter), tiled elsewhere: GPUs keep the kernel they had until one measures the shared cut
 * (no GPU was reachable when it was written; it is checked for correctness on lavapipe and SwiftShader). RMAS_GEMM
 * (environment in Node, globalThis.RMAS_GEMM in a page) overrides, for benchmarks and tests.
 */
export type GemmCut = 'auto' | 'direct' | 'shared' | 'tiled';

/** The cut asked for (RMAS_GEMM, else auto). */
export function askedGemm(): GemmCut {
  const v = override('RMAS_GEMM') ?? 'auto';
  if (v === 'auto' || v === 'direct' || v === 'shared' || v === 'tiled') return v;
  throw new InvalidArgument(`RMAS_GEMM=${v}: expected auto, direct, shared or tiled`);
}

/** The cut a context's weight products take: null for the 64×64 kernel. */
export function gemmCut(ctx: GpuContext): 'direct' | 'shared' | null {
  const g = askedGemm();
  if (g === 'tiled') return null;
  if (g === 'auto') return isSoftwareAdapter(ctx.report) ? 'direct' : null;
  return g;
}

interface Operand {
  ref: GpuRef;
  axis: Axis;
  starts: number[];
}

function dispatchMatmul(ctx: GpuContext, [a, b, bias]: GpuRef[], out: GpuRef, attrs: MatmulAttrs) {
  const p = planMatmul(a.meta, b.meta, bias?.meta, attrs);
  if (p.M === 0 || p.N === 0 || p.batch === 0) return;
  const operand = (ref: GpuRef, axis: Axis): Operand => ({ ref, axis, starts: chunkStarts(ref, axis.unit) });
  const A = operand(a, p.a.axis);
  const B = operand(b, p.b.axis);
  const C = operand(out, p.c.axis);
  const bias_ = bias ? operand(bias, { dim: 'n', unit: 1 }) : null;
  const cuts: Record<Dim, number[]> = { b: [], m: [], n: [], k: [] };
  for (const o of [A, B, C, bias_]) if (o) cuts[o.axis.dim].push(...o.starts);

  const dtype = b.meta.dtype;
  const native = dtype === 'f16' && ctx.hasFeature('shader-f16');
  const kSegs = segments(p.K, cuts.k);
  const gemvOk = p.b.transB && p.batch === 1 && kSegs.length === 1;
  if (attrs.path === 'gemv' && !gemvOk) {
    throw new InvalidArgument('matmul: the GEMV path needs transB, no batch and the whole K in one binding; use path "tiled"');
  }
  const asked = p.b.transB ? gemmCut(ctx) : null;
  // the direct cut takes short products too: on a CPU rasteriser the GEMV's 32 lanes a row and tree of barriers
  // made a 4-token prefill of Qwen3-0.6B take 105 s on SwiftShader
  const gemv = attrs.path === 'gemv' || (attrs.path !== 'tiled' && gemvOk && p.M <= GEMV_MAX_M && asked !== 'direct');
  const cols = p.b.cols;
  // word mode reads whole u32 words of a weight row; f16/bf16 rows are word-aligned only for even K
  const mode: GemvMode = isQuant(dtype) || ((dtype === 'f16' || dtype === 'bf16') && !native && cols % 2 === 0) ? 'word' : 'elem';
  const ldb = isQuant(dtype) ? rowBytes(dtype, cols) / 4 : gemv && mode === 'word' ? cols / 2 : cols;

  const variant: MatmulVariant = { dtype, native };
  const cut = gemv ? null : asked;
  const path = gemv ? `gemv-${mode}` : 'tiled';
  const key = `matmul_${dtype}${native ? 'n' : ''}_${path}_wg256`;
  // the A/C strides already encode transA/transC; the flag only picks the coalesced tile-load mapping
  const layout = (p.a.sm === 1 && p.M > 1 ? FLAG_TRANS_A : 0) | (p.b.transB ? FLAG_TRANS_B : 0);
  const wgsl = gemv ? () => gemvWgsl(variant, mode) : () => tiledWgsl(variant);

  const maxWg = ctx.report.limits.maxComputeWorkgroupsPerDimension;
  const bSegs = segments(p.batch, cuts.b, maxWg);
  // the register-tiled GEMM's tiles are at least 4 rows by 32 columns (gemmGeometry)
  const mSegs = segments(p.M, cuts.m, maxWg * (gemv ? GEMV_MR : cut ? 4 : TILE));
  const nSegs = segments(p.N, cuts.n, gemv ? Infinity : maxWg * (cut ? 32 : TILE));

  for (const [b0, b1] of bSegs) for (const [m0, m1] of mSegs) for (const [n0, n1] of nSegs) {
    kSegs.forEach(([k0, k1], ki) => {
      const pos: Record<Dim, number> = { b: b0, m: m0, n: n0, k: k0 };
      const at = (o: Operand) => {
        const { chunk, local } = locate(o.ref, o.starts, pos[o.axis.dim]);
        return { chunk, rel: { ...pos, [o.axis.dim]: local } as Record<Dim, number> };
      };
      const ra = at(A);
      const rb = at(B);
      const rc = at(C);
      const rbias = bias_ ? at(bias_) : null;
      const uni = new Uniforms()
        .u32(m1 - m0).u32(n1 - n0).u32(k1 - k0).u32(layout | (ki > 0 ? FLAG_ACCUMULATE : 0) | (ki === 0 && bias ? FLAG_BIAS : 0))
        .u32(offsetA(p, ra.rel)).u32(p.a.sb).u32(p.a.sm).u32(p.a.sk)
        .u32(rb.rel.b * p.b.sbr + (p.b.transB ? rb.rel.n : rb.rel.k)).u32(p.b.transB ? rb.rel.k : rb.rel.n).u32(p.b.sbr).u32(ldb)
        .u32(rc.rel.b * p.c.sb + rc.rel.m * p.c.sm + rc.rel.n * p.c.sn).u32(p.c.sb).u32(p.c.sm).u32(p.c.sn)
        .u32(rbias ? rbias.rel.n : 0).u32(cols);
      const bindings = [bind(ra.chunk), bind(rb.chunk), bind((rbias ?? ra).chunk), bind(rc.chunk)];
      // B's first column here is rb.rel.k (transB); a pair or block it would cut takes the 64×64 kernel
      if (cut && gemmReadsB(dtype, native, ldb, rb.rel.k)) {
        const g: GemmGeometry = gemmGeometry(m1 - m0, n1 - n0, cut === 'shared');
        const { tm, tn } = gemmTile(g);
        const grid: [number, number, number] = [Math.ceil((n1 - n0) / tn), Math.ceil((m1 - m0) / tm), b1 - b0];
        ctx.dispatch({ key: gemmKey(variant, g), wgsl: () => gemmWgsl(variant, g), uniforms: uni, bindings, workgroups: grid });
        return;
      }
      const workgroups: [number, number, number] = gemv
        ? [...ctx.grid(Math.ceil((n1 - n0) / GEMV_ROWS)), Math.ceil((m1 - m0) / GEMV_MR)]
        : [Math.ceil((n1 - n0) / TILE), Math.ceil((m1 - m0) / TILE), b1 - b0];
      ctx.dispatch({ key, wgsl, uniforms: uni, bindings, workgroups });
    });
  }
}

const offsetA = (p: MatmulPlan, r: Record<Dim, number>) => r.b * p.a.sb + r.m * p.a.sm + r.k * p.a.sk;
