/**
 * matmul on CUDA: the plan maps to one launch. f32/f16/bf16 weights go to cuBLASLt ("gemm_lt", row-major,
 * batched by strides); q8_0/q4_0 weights to native/cuda/src/kernels/matmul.cu ("matmul_gemv_q" for a few rows
 * against an [N, K] weight, "matmul_tiled" otherwise). "matmul_tiled" also serves what gemm_lt cannot express
 * (a transposed C with a half weight or a bias, K = 0) and a forced `path: 'tiled'`. A CUDA tensor is one
 * allocation, so no chunk splitting. The ints layouts are documented above each launch function in the .cu
 * files and in the cuBLASLt loader; keep them in sync.
 */
import { InvalidArgument } from '../../errors';
import { isQuant } from '../../formats/dtype';
import { type CudaLauncher, type CudaRef, type HalfGemm, cudaDType } from '../kernel';
import { type MatmulAttrs, type MatmulPlan, planMatmul } from './plan';

/** M up to this uses the quantized GEMV kernel (it keeps GEMV_MR = 8 rows of A in registers). */
export const CUDA_GEMV_MAX_M = 8;

export interface CudaLaunch {
  kernel: string;
  ptrs: bigint[];
  ints: number[];
  floats: number[];
}

/**
 * A row-major view of a strided 2-D operand X(r, c) = x[r*sr + c*sc]: stored as is with leading dim sr
 * (trans 0), or stored transposed with leading dim sc (trans 1); null when neither is contiguous.
 */
function rowMajor(sr: number, sc: number, rows: number, cols: number): { trans: 0 | 1; ld: number } | null {
  if (sc === 1 && sr >= cols) return { trans: 0, ld: sr };
  if (sr === 1 && sc >= rows) return { trans: 1, ld: sc };
  return null;
}

/**
 * gemm_lt: row-major C[M, N] = alpha·op(A)·op(B) (+ bias[N]), batched with strides.
 * ptrs [A, B, C, bias or 0]; ints [M, N, K, batch, transA, transB, lda, ldb, ldc, strideA, strideB, strideC,
 * dtypeA, dtypeB, accumulate, split]; floats [alpha]. A and C f32, B f32/f16/bf16 (split: HalfGemm 'split' with a
 * half B). Null when the plan does not fit.
 */
export function gemmLtLaunch(
  p: MatmulPlan,
  a: CudaRef,
  b: CudaRef,
  out: CudaRef,
  bias: CudaRef | undefined,
  halfGemm: HalfGemm = 'round',
): CudaLaunch | null {
  if (p.K === 0) return null;
  const A = rowMajor(p.a.sm, p.a.sk, p.M, p.K);
  if (!A) return null;
  const dtB = cudaDType(b.meta.dtype);
  const transB = p.b.transB ? 1 : 0;
  const strideB = p.b.sbr * p.b.cols;
  // C(m, n) = c[m*sm + n*sn]: row-major C, or (transC) row-major Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands swapped
  const C = rowMajor(p.c.sm, p.c.sn, p.M, p.N);
  if (C && C.trans === 0) {
    return {
      kernel: 'gemm_lt',
      ptrs: [a.ptr, b.ptr, out.ptr, bias ? bias.ptr : 0n],
      ints: [
        p.M,
        p.N,
        p.K,
        p.batch,
        A.trans,
        transB,
        A.ld,
        p.b.cols,
        C.ld,
        p.a.sb,
        strideB,
        p.c.sb,
        cudaDType('f32'),
        dtB,
        0,
        halfGemm === 'split' && b.meta.dtype !== 'f32' ? 1 : 0,
      ],
      floats: [1],
    };
  }
  // the swapped form puts B in gemm_lt's A slot (f32 only) and the bias along the wrong dim
  if (C && b.meta.dtype === 'f32' && !bias) {
    return {
      kernel: 'gemm_lt',
      ptrs: [b.ptr, a.ptr, out.ptr, 0n],
      ints: [
        p.N,
        p.M,
        p.K,
        p.batch,
        1 - transB,
        1 - A.trans,
        p.b.cols,
        A.ld,
        C.ld,
        strideB,
        p.a.sb,
        p.c.sb,
        cudaDType('f32'),
        cudaDType('f32'),
        0,
        0,
      ],
      floats: [1],
    };
  }
  return null;
}

/** matmul_tiled: ints [batch, M, N, K, aSb, aSm, aSk, bSbr, bCols, transB, cSb, cSm, cSn, dtypeB]. */
export function tiledLaunch(p: MatmulPlan, a: CudaRef, b: CudaRef, out: CudaRef, bias: CudaRef | undefined): CudaLaunch {
  return {
    kernel: 'matmul_tiled',
    ptrs: [a.ptr, b.ptr, out.ptr, bias ? bias.ptr : 0n],
    ints: [
      p.batch,
      p.M,
      p.N,
      p.K,
      p.a.sb,
      p.a.sm,
      p.a.sk,
      p.b.sbr,
      p.b.cols,
      p.b.transB ? 1 : 0,
      p.c.sb,
      p.c.sm,
      p.c.sn,
      cudaDType(b.meta.dtype),
    ],
    floats: [],
  };
}

/** The launch the cuda hook makes for a plan; exported for tests. */
export function planCudaMatmul(
  p: MatmulPlan,
  [a, b, bias]: CudaRef[],
  out: CudaRef,
  attrs: MatmulAttrs,
  halfGemm: HalfGemm = 'round',
): CudaLaunch | null {
  if (p.M === 0 || p.N === 0 || p.batch === 0) return null;
  const dtype = b.meta.dtype;
  if (isQuant(dtype)) {
    // matmul_gemv_q: ints [M, N, K, lda, ldc, dtypeB]; A rows and C rows contiguous, W [N, K]
    const gemvOk = p.b.transB && p.batch === 1 && p.a.sk === 1 && p.a.sm >= p.K && p.c.sn === 1 && p.c.sm >= p.N;
    if (attrs.path === 'gemv' && !gemvOk) {
      throw new InvalidArgument('matmul: the GEMV path needs transB, no batch and contiguous rows of a and c; use path "tiled"');
    }
    if (gemvOk && attrs.path !== 'tiled' && (attrs.path === 'gemv' || p.M <= CUDA_GEMV_MAX_M)) {
      return {
        kernel: 'matmul_gemv_q',
        ptrs: [a.ptr, b.ptr, out.ptr, bias ? bias.ptr : 0n],
        ints: [p.M, p.N, p.K, p.a.sm, p.c.sm, cudaDType(dtype)],
        floats: [],
      };
    }
    return tiledLaunch(p, a, b, out, bias);
  }
  // f32/f16/bf16: cuBLASLt whatever the path hint, except a forced 'tiled' (tests of the fallback)
  return (attrs.path !== 'tiled' && gemmLtLaunch(p, a, b, out, bias, halfGemm)) || tiledLaunch(p, a, b, out, bias);
}

/** The matmul KernelDef's cuda hook. */
export function cudaMatmul(ctx: CudaLauncher, inputs: CudaRef[], out: CudaRef, attrs: MatmulAttrs) {
  const p = planMatmul(inputs[0].meta, inputs[1].meta, inputs[2]?.meta, attrs);
  const l = planCudaMatmul(p, inputs, out, attrs, ctx.halfGemm);
  if (l) ctx.launch(l.kernel, l.ptrs, l.ints, l.floats);
}
