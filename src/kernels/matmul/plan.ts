/**
 * Every matmul variant reduced to one canonical problem: `batch` products C_b[M, N] = Σ_k A(b,m,k)·B(b,k,n),
 * with A and C addressed by element strides and B by storage (row, col) so that quantized rows work.
 * The CPU reference and the GPU dispatcher both read this plan, so transposes, batching and the
 * flattening of leading dims are decided in one place.
 */
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { type Meta, expectDType, numelOf } from '../kernel';

export interface MatmulAttrs {
  transA?: boolean;
  /** B stored [N, K] (nn.Linear weight layout); required in practice for f16/bf16/q8_0/q4_0 weights. */
  transB?: boolean;
  /** Write C transposed ([..., N, M]): how dA of a transposed A is formed without a transpose kernel. */
  transC?: boolean;
  /** A and B share leading dims and C = Σ_batch op(A_b)·op(B_b) (weight gradients); needs transA, not transB. */
  sumBatch?: boolean;
  /** Force a GPU path (tests, benchmarks); by default GEMV serves M ≤ 8 against an [N, K] weight. */
  path?: 'tiled' | 'gemv';
}

export type Dim = 'b' | 'm' | 'n' | 'k';
/** Which logical dim an operand's dim 0 walks, and how many logical indices one dim-0 index spans. */
export interface Axis {
  dim: Dim;
  unit: number;
}

export interface MatmulPlan {
  batch: number;
  M: number;
  N: number;
  K: number;
  outShape: number[];
  /** A(b, m, k) = a[b*sb + m*sm + k*sk] */
  a: { sb: number; sm: number; sk: number; axis: Axis };
  /** B(b, k, n) = storage[row = b*sbr + (transB ? n : k), col = transB ? k : n]; cols = last dim of b. */
  b: { sbr: number; cols: number; transB: boolean; axis: Axis };
  /** C(b, m, n) = c[b*sb + m*sm + n*sn] */
  c: { sb: number; sm: number; sn: number; axis: Axis };
}

const OP = 'matmul';
const lead = (s: readonly number[], drop: number) => s.slice(0, s.length - drop);
const same = (x: readonly number[], y: readonly number[]) => x.length === y.length && x.every((v, i) => v === y[i]);

/** Validates A, B (and bias) and builds the canonical plan. */
export function planMatmul(a: Meta, b: Meta, bias: Meta | undefined, attrs: MatmulAttrs): MatmulPlan {
  const { transA = false, transB = false, transC = false, sumBatch = false } = attrs;
  expectDType(OP, 'a (activations)', a, 'f32');
  expectDType(OP, 'b', b, 'f32', 'f16', 'bf16', 'q8_0', 'q4_0');
  if (b.shape.length < 2)
    throw new ShapeMismatch(`${OP}: b has shape [${b.shape}], expected at least 2 dims ([K, N], or [N, K] with transB)`);
  if (a.shape.length < 1 || (a.shape.length < 2 && (transA || b.shape.length > 2))) {
    throw new ShapeMismatch(`${OP}: a has shape [${a.shape}]; a 1-D a needs a 2-D b and no transA`);
  }
  const bRank2 = b.shape.length === 2;
  if (!bRank2 && !same(lead(a.shape, 2), lead(b.shape, 2))) {
    throw new ShapeMismatch(`${OP}: a [${a.shape}] and b [${b.shape}] must have equal leading (batch) dims, or b must be 2-D`);
  }
  if (sumBatch && (!transA || transB || a.shape.length !== b.shape.length)) {
    throw new InvalidArgument(
      `${OP}: sumBatch needs transA, no transB and a, b of equal rank (got ranks ${a.shape.length}, ${b.shape.length})`,
    );
  }
  const [ar, ac] = a.shape.length >= 2 ? a.shape.slice(-2) : [1, a.shape[0]];
  const [br, bc] = b.shape.slice(-2);
  let M = transA ? ac : ar;
  let K = transA ? ar : ac;
  const Kb = transB ? bc : br;
  const N = transB ? br : bc;
  if (sumBatch) K = numelOf(lead(a.shape, 1)); // rows of every batch, one long reduction
  const Kb2 = sumBatch ? numelOf(lead(b.shape, 1)) : Kb;
  if (K !== Kb2) {
    throw new ShapeMismatch(
      `${OP}: a [${a.shape}]${transA ? ' (transA)' : ''} gives K = ${K} but b [${b.shape}]${transB ? ' (transB)' : ''} gives K = ${Kb2}`,
    );
  }
  if (bias) {
    expectDType(OP, 'bias', bias, 'f32');
    if (bias.shape.length !== 1 || bias.shape[0] !== N) throw new ShapeMismatch(`${OP}: bias has shape [${bias.shape}], expected [${N}]`);
  }
  if ((b.dtype === 'q8_0' || b.dtype === 'q4_0') && bc % 32 !== 0) {
    throw new DTypeMismatch(`${OP}: a ${b.dtype} b needs its last dim to be a multiple of 32, got ${bc}`);
  }

  const aUnit = (drop: number) => numelOf(a.shape.slice(1, a.shape.length - drop));
  const cols = bc;
  const bStorageRows = br;
  // Flatten A's leading dims into M when B is shared and nothing is transposed: one big GEMM (or GEMV).
  const flatten = !sumBatch && bRank2 && a.shape.length !== 2 && !transA && !transC;
  if (flatten) {
    M = numelOf(lead(a.shape, 1));
    const outShape = [...lead(a.shape, 1), N];
    return {
      batch: 1, M, N, K, outShape,
      // a 1-D a (and its 1-D C) have dim 0 along k (n), not m
      a: { sb: 0, sm: K, sk: 1, axis: a.shape.length === 1 ? { dim: 'k', unit: 1 } : { dim: 'm', unit: aUnit(1) } },
      b: { sbr: 0, cols, transB, axis: { dim: transB ? 'n' : 'k', unit: 1 } },
      c: { sb: 0, sm: N, sn: 1, axis: a.shape.length === 1 ? { dim: 'n', unit: 1 } : { dim: 'm', unit: numelOf(outShape.slice(1, -1)) } },
    };
  }
  const rank2Axis = (t: boolean, ifT: Dim, ifN: Dim): Axis => ({ dim: t ? ifT : ifN, unit: 1 });
  if (sumBatch) {
    // A rows (all leading dims) are the reduction index: A(m, k) = a[k*M + m]; B(k, n) = b[k*N + n].
    const outShape = transC ? [N, M] : [M, N];
    return {
      batch: 1, M, N, K, outShape,
      a: { sb: 0, sm: 1, sk: M, axis: { dim: 'k', unit: aUnit(1) } },
      b: { sbr: 0, cols, transB: false, axis: { dim: 'k', unit: numelOf(b.shape.slice(1, -1)) } },
      c: { sb: 0, sm: transC ? 1 : N, sn: transC ? M : 1, axis: rank2Axis(transC, 'n', 'm') },
    };
  }
  const batchShape = lead(a.shape, 2);
  const batch = numelOf(batchShape);
  const outShape = [...batchShape, ...(transC ? [N, M] : [M, N])];
  const batched = batchShape.length > 0;
  return {
    batch, M, N, K, outShape,
    a: {
      sb: M * K, sm: transA ? 1 : K, sk: transA ? M : 1,
      axis: batched ? { dim: 'b', unit: aUnit(2) } : rank2Axis(transA, 'k', 'm'),
    },
    b: {
      sbr: bRank2 ? 0 : bStorageRows, cols, transB,
      axis: bRank2 ? rank2Axis(transB, 'n', 'k') : { dim: 'b', unit: numelOf(b.shape.slice(1, -2)) },
    },
    c: {
      sb: M * N, sm: transC ? 1 : N, sn: transC ? M : 1,
      axis: batched ? { dim: 'b', unit: numelOf(outShape.slice(1, -2)) } : rank2Axis(transC, 'n', 'm'),
    },
  };
}
