import { currentTape } from '../tape';
import type { Backend } from '../../tensor/backend';
import { moveTensor } from '../../tensor/move';
import type { Tensor } from '../../tensor/tensor';

/**
 * A view of x with another shape of the same element count (no copy), differentiable: the gradient
 * is the output gradient viewed in x's shape. Models need it around attention ([T, H·D] <-> [T, H, D]).
 */
export function reshape(x: Tensor, shape: readonly number[]): Tensor {
  const y = x.reshape(shape);
  const tape = currentTape();
  if (tape && x.requiresGrad) {
    tape.record({ name: 'reshape', inputs: [x], outputs: [y], backward: ([g]) => [g ? g.reshape(x.shape) : null] });
  }
  return y;
}

/**
 * x on backend `to` (moveTensor), differentiable: the gradient moves back to x's backend. Latents cross
 * devices through it when a system's roles live on different GPUs.
 */
export function moveTo(x: Tensor, to: Backend): Tensor {
  const y = moveTensor(x, to);
  const tape = currentTape();
  if (tape && x.requiresGrad) {
    tape.record({ name: 'moveTo', inputs: [x], outputs: [y], backward: ([g]) => [g ? moveTensor(g, x.backend) : null] });
  }
  return y;
}
