/**
 * Differentiable training losses, each returning a [1] scalar that tape.backward can seed:
 * crossEntropy (outer links: answer tokens only), cosineLoss and mseLoss (inner links, masked rows).
 * A mean over zero included rows is 0 with zero gradients (torch gives NaN).
 */
import {
  cosineLossBackwardKernel, cosineLossKernel, crossEntropyBackwardKernel, crossEntropyKernel, mseLossBackwardKernel, mseLossKernel,
} from '../../kernels/loss';
import type { KernelDef } from '../../kernels/kernel';
import type { Tensor } from '../../tensor/tensor';
import { type BackwardRule, runOp } from './op';

/** Runs a loss kernel whose outputs after the first are kept for backward only, freeing them when nothing records. */
function lossOp<A>(def: KernelDef<A>, inputs: Tensor[], attrs: A, rule: (extra: Tensor[]) => BackwardRule['backward']): Tensor {
  let recorded = false;
  const [loss, ...extra] = runOp(def, inputs, attrs, (outs) => {
    recorded = true;
    return { saved: outs.slice(1), backward: rule(outs.slice(1)) };
  });
  if (!recorded) extra.forEach((t) => t.dispose());
  return loss;
}

/**
 * Mean over labelled rows of logsumexp(row) - row[label]; logits [..., V] f32, labels i32 of the
 * leading shape. Rows labelled `ignoreIndex` (default -100) do not count. Other labels outside
 * [0, V) throw InvalidArgument on the CPU and make the loss NaN on the GPU.
 */
export function crossEntropy(logits: Tensor, labels: Tensor, opts: { ignoreIndex?: number } = {}): Tensor {
  const attrs = { ignoreIndex: opts.ignoreIndex ?? -100 };
  return lossOp(crossEntropyKernel, [logits, labels], attrs, ([lse, scale]) => ([g], [nl]) => [
    nl ? runOp(crossEntropyBackwardKernel, [logits, labels, lse, scale, g!], attrs)[0] : null,
    null,
  ]);
}

/** Mean over included rows of 1 - cos(a_i, b_i) (torch 1.13 cosine_similarity, eps 1e-8); mask f32, one value per row. */
export function cosineLoss(a: Tensor, b: Tensor, mask?: Tensor): Tensor {
  const inputs = mask ? [a, b, mask] : [a, b];
  return lossOp(cosineLossKernel, inputs, undefined, ([scale, stats]) => ([g], [na, nb]) => {
    const grad = (wrt: 'a' | 'b') => runOp(cosineLossBackwardKernel, [a, b, stats, scale, g!, ...(mask ? [mask] : [])], { wrt })[0];
    return [na ? grad('a') : null, nb ? grad('b') : null, null];
  });
}

/** Mean over included rows and all columns of (a - b)^2; mask f32, one value per row. */
export function mseLoss(a: Tensor, b: Tensor, mask?: Tensor): Tensor {
  const inputs = mask ? [a, b, mask] : [a, b];
  return lossOp(mseLossKernel, inputs, undefined, ([scale]) => ([g], [na, nb]) => {
    const grad = (wrt: 'a' | 'b') => runOp(mseLossBackwardKernel, [a, b, scale, g!, ...(mask ? [mask] : [])], { wrt })[0];
    return [na ? grad('a') : null, nb ? grad('b') : null, null];
  });
}
