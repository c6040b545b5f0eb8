/** CPU references for elementwise binary ops with row broadcast, scaling, and column sums. */
import type { FloatArray } from '../kernel';

export type BinaryOp = 'add' | 'sub' | 'mul';

/** out[i] = a[i] op b[i % b.length]  (b is a or a trailing slice of a's shape). */
export function binaryForward(op: BinaryOp, a: FloatArray, b: FloatArray, out: FloatArray) {
  const bn = b.length;
  for (let i = 0; i < a.length; i++) {
    const x = a[i];
    const y = b[i % bn];
    out[i] = op === 'add' ? x + y : op === 'sub' ? x - y : x * y;
  }
}

/** out[i] = alpha * a[i] + beta */
export function scaleForward(a: FloatArray, alpha: number, beta: number, out: FloatArray) {
  for (let i = 0; i < a.length; i++) out[i] = alpha * a[i] + beta;
}

/** out[c] = sum over rows r of a[r * cols + c]: the backward of a row-broadcast operand. */
export function sumRowsForward(a: FloatArray, cols: number, out: FloatArray) {
  out.fill(0);
  for (let i = 0; i < a.length; i++) out[i % cols] += a[i];
}
