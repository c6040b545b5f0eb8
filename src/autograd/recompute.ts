/**
 * Activation recomputation (gradient checkpointing): `recompute(fn, inputs, params)` computes fn(inputs)
 * without recording its intermediates and records one node that keeps only the inputs. Its backward runs fn
 * again on aliases of the inputs, on a tape of its own, backpropagates the output's gradient through that
 * and hands back the inputs' gradients; the trainable tensors fn reads (`params`, a layer's weights) get
 * their gradients accumulated as they would without recomputation. A decoder layer's activations at 4096
 * tokens are tens of times its input; recomputing them per layer trades one more forward for that memory.
 *
 * fn must be a pure function of its inputs and params (no sampling, no in-place cache writes).
 */
import { InvalidArgument } from '../errors';
import { tidy } from '../tensor/scope';
import type { Tensor } from '../tensor/tensor';
import { Tape, currentTape, noGrad } from './tape';

export function recompute(fn: (...xs: Tensor[]) => Tensor, inputs: readonly Tensor[], params: readonly Tensor[] = []): Tensor {
  const tape = currentTape();
  const trainable = params.filter((p) => p.requiresGrad);
  if (!tape || (!inputs.some((t) => t.requiresGrad) && !trainable.length)) return fn(...inputs);
  const out = noGrad(() => tidy(() => fn(...inputs)));
  tape.record({
    name: 'recompute',
    // the trainable params are inputs so that the node records when only they train; their gradients are
    // accumulated by the recomputation's own backward, so the node returns null for them
    inputs: [...inputs, ...trainable],
    outputs: [out],
    backward: ([g], needs) => {
      if (!g) return needs.map(() => null);
      const inner = new Tape();
      const aliases = inputs.map((t, i) => {
        const a = t.reshape(t.shape);
        a.requiresGrad = needs[i]!;
        return a;
      });
      try {
        // temporaries the recomputation does not record go with the tidy; what it records, the inner tape owns
        const y = tidy(() => inner.run(() => fn(...aliases)));
        if (!y.requiresGrad) {
          y.dispose();
          return needs.map(() => null);
        }
        if (y.shape.length !== g.shape.length || y.shape.some((n, i) => n !== g.shape[i])) {
          throw new InvalidArgument(`recompute: the recomputed output has shape [${y.shape}], the forward's was [${g.shape}]`);
        }
        // outside any tidy: the params' accumulated gradients must outlive this rule
        inner.backwardSync(y, g);
        const grads = aliases.map((a) => {
          const ga = a.grad;
          a.grad = null;
          return ga;
        });
        return [...grads, ...trainable.map(() => null)];
      } finally {
        inner.dispose();
        for (const a of aliases) a.dispose();
      }
    },
  });
  return out;
}
