import { topkKernel } from '../../kernels/topk';
import type { Tensor } from '../../tensor/tensor';
import { runOp } from './op';

/**
 * The k largest values of each row of x [..., V] (f32) and their indices, descending; ties go to
 * the lower index and NaN sorts last; 1 ≤ k ≤ min(V, 32). Not differentiable.
 */
export function topk(x: Tensor, k: number): { values: Tensor; indices: Tensor } {
  const [values, indices] = runOp(topkKernel, [x], { k });
  return { values, indices };
}
