/**
 * Differentiable linear ops: matmul, linear (nn.Linear), embedding and cast.
 * Weight gradients come as f32 whatever the weight's storage dtype; frozen weights (requiresGrad false,
 * the usual case for f16/bf16/q8_0/q4_0 LLM weights) pass only the activation gradient.
 */
import { castKernel } from '../../kernels/cast';
import { sumRowsKernel } from '../../kernels/elementwise';
import { embeddingBackwardKernel, embeddingKernel } from '../../kernels/embedding';
import { type MatmulAttrs, matmulKernel } from '../../kernels/matmul';
import type { DType } from '../../formats/dtype';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

const mm = (a: Tensor, b: Tensor, attrs: MatmulAttrs) => runOp1(matmulKernel, [a, b], attrs);

/** A 2-D view of a 1-D operand (only inside backward rules, where views need no gradient). */
const as2d = (t: Tensor, last: number) => (t.rank === 1 ? t.reshape([1, last]) : t);

/** dA = dC·op(B)ᵀ, laid out like A. */
function gradA(g: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
  // with transA, dA = (dC·op(B)ᵀ)ᵀ: written transposed by the kernel rather than transposed afterwards
  return mm(g, b, { transB: !transB, transC: transA });
}

/** dB = op(A)ᵀ·dC (transposed when transB), summed over A's batch when B is shared; f32. */
function gradB(g: Tensor, a: Tensor, b: Tensor, transA: boolean, transB: boolean): Tensor {
  const sharedOverBatch = b.rank === 2 && a.rank !== 2;
  if (!sharedOverBatch) {
    return transB ? mm(g, a, { transA: true, transB: transA }) : mm(a, g, { transA: !transA });
  }
  if (!transA) {
    // all leading dims of A and dC form one reduction: a single GEMM, no per-batch temporaries
    const a2 = as2d(a, a.shape[0]);
    const g2 = as2d(g, g.shape[0]);
    const out = transB ? mm(g2, a2, { transA: true, sumBatch: true }) : mm(a2, g2, { transA: true, sumBatch: true });
    if (a2 !== a) a2.dispose();
    if (g2 !== g) g2.dispose();
    return out;
  }
  const perBatch = transB ? mm(g, a, { transA: true, transB: true }) : mm(a, g, {});
  const out = runOp1(sumRowsKernel, [perBatch], { shape: b.shape });
  perBatch.dispose();
  return out;
}

/** Column sums of dC: sumRows, or (when dC is split across bindings, which sumRows cannot walk) 1ᵀ·dC. */
function gradBias(g: Tensor, bias: Tensor): Tensor {
  const split = g.storage.kind === 'webgpu' && g.storage.chunks.length > 1;
  if (!split) return runOp1(sumRowsKernel, [g], { shape: bias.shape });
  const ones = g.backend.fromValues(new Float32Array(g.numel / bias.shape[0]).fill(1), [...g.shape.slice(0, -1), 1]);
  const row = mm(ones, g, { transA: true, sumBatch: true });
  const out = row.reshape(bias.shape);
  ones.dispose();
  row.dispose();
  return out;
}

/** op(a)·op(b) with batched a and batched or shared 2-D b (any weight dtype; a is f32). */
export function matmul(a: Tensor, b: Tensor, opts: { transA?: boolean; transB?: boolean } = {}): Tensor {
  const { transA = false, transB = false } = opts;
  return runOp1(matmulKernel, [a, b], { transA, transB }, () => ({
    backward: ([g], [na, nb]) => [na ? gradA(g!, b, transA, transB) : null, nb ? gradB(g!, a, b, transA, transB) : null],
  }));
}

/** PyTorch nn.Linear: y = x·wᵀ + b with w [out, in], b [out]; x [..., in]. */
export function linear(x: Tensor, w: Tensor, b?: Tensor): Tensor {
  const inputs = b ? [x, w, b] : [x, w];
  return runOp1(matmulKernel, inputs, { transB: true }, () => ({
    backward: ([g], [nx, nw, nb]) => [
      nx ? gradA(g!, w, false, true) : null,
      nw ? gradB(g!, x, w, false, true) : null,
      ...(b ? [nb ? gradBias(g!, b) : null] : []),
    ],
  }));
}

/** Rows of `table` [V, d] (any dtype) at i32 `ids` of any shape: [...ids, d] f32. */
export function embedding(ids: Tensor, table: Tensor): Tensor {
  return runOp1(embeddingKernel, [ids, table], undefined, () => ({
    backward: ([g], [, nt]) => [null, nt ? runOp1(embeddingBackwardKernel, [ids, g!], { V: table.shape[0] }) : null],
  }));
}

/**
 * x stored as `dtype` (f32, f16, bf16; or the same dtype: a copy). The gradient passes straight through
 * as f32 (the derivative of rounding is taken as 1, as for any reduced-precision storage).
 */
export function cast(x: Tensor, dtype: DType): Tensor {
  return runOp1(castKernel, [x], { dtype }, () => ({
    backward: ([g]) => [runOp1(castKernel, [g!], { dtype: 'f32' })],
  }));
}
