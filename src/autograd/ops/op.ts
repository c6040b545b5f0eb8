/**
 * Runs a kernel on tensors and, when a tape is recording and an input requires grad, records the
 * backward rule. Backward rules return fresh tensors (reshaped views are fine), never the incoming
 * gradient objects themselves, because the tape disposes those after use.
 */
import { InvalidArgument } from '../../errors';
import type { KernelDef } from '../../kernels/kernel';
import type { Tensor } from '../../tensor/tensor';
import { currentTape } from '../tape';

export interface BackwardRule {
  /** Extra tensors computed in forward and kept only for backward (disposed with the tape). */
  saved?: Tensor[];
  backward(gradOutputs: (Tensor | null)[], needsGrad: boolean[]): (Tensor | null)[];
}

export function runOp<A>(
  def: KernelDef<A>,
  inputs: readonly Tensor[],
  attrs: A,
  grad?: (outputs: Tensor[]) => BackwardRule,
): Tensor[] {
  if (!inputs.length) throw new InvalidArgument(`${def.name}: no inputs`);
  const outputs = inputs[0].backend.run(def, inputs, attrs);
  const tape = currentTape();
  if (tape && grad && inputs.some((t) => t.requiresGrad)) {
    const rule = grad(outputs);
    tape.record({ name: def.name, inputs, outputs, saved: rule.saved, backward: rule.backward });
  }
  return outputs;
}

/** Convenience for single-output kernels. */
export function runOp1<A>(def: KernelDef<A>, inputs: readonly Tensor[], attrs: A, grad?: (out: Tensor) => BackwardRule): Tensor {
  return runOp(def, inputs, attrs, grad && ((outs) => grad(outs[0])))[0];
}
