/**
 * Teacher-forced language-model loss: mean next-token cross-entropy of the logits at every position
 * but the last against the following id (transformers' causal-LM loss with labels = ids). Written in F
 * ops, so inside a recording Tape it is differentiable w.r.t. every weight that requires grad.
 */
import { F } from '../autograd';
import { InvalidArgument } from '../errors';
import { tidy } from '../tensor/scope';
import type { Tensor } from '../tensor/tensor';
import type { Decoder } from './decoder';

/**
 * Mean cross-entropy over predicted tokens, [1]. `lossMask` (one value per id) leaves a token out as a
 * target where it is 0 (its label becomes −100), as masking prompt tokens does; the first id is never a
 * target. When every target is masked the loss is 0.
 */
export function lmLoss(decoder: Decoder, ids: readonly number[], lossMask?: readonly number[]): Tensor {
  const T = ids.length;
  const V = decoder.config.vocabSize;
  if (T < 2) throw new InvalidArgument(`lmLoss: need at least 2 tokens (an input and a target), got ${T}`);
  if (lossMask && lossMask.length !== T)
    throw new InvalidArgument(`lmLoss: lossMask has ${lossMask.length} values for ${T} ids; give one per id`);
  const bad = ids.findIndex((id) => !Number.isInteger(id) || id < 0 || id >= V);
  if (bad >= 0)
    throw new InvalidArgument(
      `lmLoss: id ${ids[bad]} at position ${bad} is outside the vocabulary [0, ${V}); check the tokenizer matches the model`,
    );
  // row t predicts ids[t + 1]; the last row has no target
  const labels = Int32Array.from({ length: T }, (_, t) => (t + 1 < T && (!lossMask || lossMask[t + 1] !== 0) ? ids[t + 1] : -100));
  const b = decoder.backend;
  // tidy frees ids/labels when nothing records; a recording tape keeps them for embedding's and CE's backward
  return tidy(() => {
    const { logits } = decoder.forward({ inputIds: b.fromValues(ids, [T], 'i32'), logits: 'all' });
    return F.crossEntropy(logits!, b.fromValues(labels, [T], 'i32'));
  });
}
