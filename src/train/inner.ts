/**
 * The inner loop's per-sample work (docs/method.md §6.1): a teacher-forced, no-grad forward of the frozen agent
 * gives the post-norm hidden states Hs; the link learns Inner(Hs[t]) ≈ Emb(x[t+1]), the input embedding
 * of the next gold token, over the pairs whose next token is in the assistant span:
 *   loss = w_cos · Σ m·(1 − cos) / Σ m + w_mse · Σ m·mse / Σ m
 * with the masked means taken over all pairs of the batch together (upstream's left-padded batch). One
 * sample at a time, its share of the batch loss is n_s / N_batch of its own masked mean, so gradients
 * accumulate to exactly the batch gradient.
 */
import { F, Tape, noGrad } from '../autograd';
import { InvalidArgument } from '../errors';
import type { InnerLink } from '../mas/links';
import { latentRollout } from '../mas/rollout';
import type { Decoder } from '../model/decoder';
import { tidy } from '../tensor/scope';
import type { Tensor } from '../tensor/tensor';

export interface InnerExample {
  ids: readonly number[];
  /** 1 over the assistant span (end-of-turn tokens included), 0 over the prompt. */
  lossMask: readonly number[];
  /**
   * Which span tokens the read-back term scores (1) or not (0); default all of them. An arithmetic drill
   * read back as link outputs scores its results only: its operands are drawn at random.
   */
  readMask?: readonly number[];
}

export interface InnerLossWeights {
  cos: number;
  mse: number;
  /**
   * Weight of the read-back term (ours, not upstream's; 0 or absent: off): the frozen agent reads its
   * assistant span as the link writes it, Inner(Hs[t]) in place of Emb(x[t+1]) at every span position
   * (as a latent rollout feeds it), and must still predict the gold tokens: cross-entropy of its logits at
   * span positions t ≥ P against x[t+1]. Gradients reach the link through the agent's inputs.
   */
  ce?: number;
  /** Recompute the read-back forward's layer activations in backward (--gradient_checkpointing 1). */
  recompute?: boolean;
}

/** First position of the assistant span; the read-back term needs one contiguous span that ends the sample. */
function spanStart(ex: InnerExample): number {
  const P = ex.lossMask.indexOf(1);
  if (P < 1 || ex.lossMask.slice(P).some((m) => !m)) {
    throw new InvalidArgument(
      'inner step: the read-back term (--adapter_ce_weight) needs a prompt followed by one assistant span that ends the sample',
    );
  }
  return P;
}

/** Pairs (t, t + 1) the sample trains on: Σ_{t < T−1} lossMask[t + 1]. */
export function innerPairs(ex: InnerExample): number {
  let n = 0;
  for (let t = 1; t < ex.lossMask.length; t++) n += ex.lossMask[t] ? 1 : 0;
  return n;
}

/**
 * Forward and backward of one sample's share of a batch loss over `batchPairs` pairs; the gradients
 * accumulate into the link's parameters. Returns the share of the loss, [1], not requiring grad.
 */
export async function innerSampleStep(
  model: Decoder,
  inner: InnerLink,
  ex: InnerExample,
  w: InnerLossWeights,
  batchPairs: number,
): Promise<Tensor> {
  const T = ex.ids.length;
  if (ex.lossMask.length !== T) throw new InvalidArgument(`inner example: ${T} ids but ${ex.lossMask.length} mask values`);
  if (!(batchPairs > 0)) throw new InvalidArgument(`inner step: the batch has no trained pairs (${batchPairs})`);
  if (ex.readMask && ex.readMask.length !== T)
    throw new InvalidArgument(`inner example: ${T} ids but ${ex.readMask.length} read-back mask values`);
  const be = model.backend;
  const pairs = innerPairs(ex);
  const share = pairs / batchPairs;
  const ids = be.fromValues(ex.ids, [T], 'i32');
  // targets: the next token's embedding; the last row has no next token and is masked out
  const next = be.fromValues([...ex.ids.slice(1), ex.ids[T - 1]], [T], 'i32');
  const mask = be.fromValues(
    Array.from({ length: T }, (_, t) => (t < T - 1 && ex.lossMask[t + 1] ? 1 : 0)),
    [T],
  );
  const tape = new Tape();
  try {
    const hidden = noGrad(() => tidy(() => model.forward({ inputIds: ids }).hidden));
    const loss = tidy(() =>
      tape.run(() => {
        const pred = inner.forward(hidden);
        const target = noGrad(() => model.embed(next));
        let l = F.scale(F.cosineLoss(pred, target, mask), w.cos * share);
        if (w.mse) l = F.add(l, F.scale(F.mseLoss(pred, target, mask), w.mse * share));
        if (w.ce) {
          const P = spanStart(ex);
          // positions P..T-1 get Inner(Hs[P-1..T-2]); logits at P..T-2 score x[P+1..T-1]
          if (T - P >= 2) {
            const prefix = noGrad(() => model.embed(be.fromValues(ex.ids.slice(0, P), [P], 'i32')));
            const x = F.concatRows([prefix, F.sliceRows(pred, P - 1, T - P)]);
            const rows = Array.from({ length: T - P - 1 }, (_, i) => P + i);
            const out = model.forward({ inputsEmbeds: x, logits: rows, recompute: w.recompute });
            const labels = ex.ids.slice(P + 1).map((id, i) => (!ex.readMask || ex.readMask[P + 1 + i] ? id : -100));
            const ce = F.crossEntropy(out.logits!, be.fromValues(labels, [T - P - 1], 'i32'));
            l = F.add(l, F.scale(ce, w.ce * share));
          }
        }
        return l;
      }),
    );
    if (!loss.requiresGrad) throw new InvalidArgument(`inner step: link ${inner.name} is frozen; unfreeze it to train`);
    await tape.backward(loss);
    const value = noGrad(() => F.scale(loss, 1));
    hidden.dispose();
    return value;
  } finally {
    tape.dispose();
    ids.dispose();
    next.dispose();
    mask.dispose();
  }
}

/**
 * The rollout read-back term (ours; the tiny system's latent phase): the agent runs its own latent rollout
 * from the sample's prompt, m = span length steps without grad (H_roll, as `latentRollout` computes it at
 * inference), then reads prompt ⊕ Inner(H_roll[0..m−2]) with grad. That sequence's hidden states at
 * positions P−1..T−2 are H_roll itself, so its logits there are the rollout's argmax-decoded logits; each
 * is scored with cross-entropy against the gold span token x[P + k]. Unlike the read-back term, the link's
 * inputs are the agent's own rollout states rather than teacher-forced ones, so it trains the rollout the
 * system runs (gradients are truncated at H_roll: one step of the recursion, not all of it).
 *
 * Returns `weight` · share · mean CE as a [1] tensor (share = the sample's pairs over the batch's, as
 * innerSampleStep) and accumulates its gradients into the link's and, when they train, the agent's
 * parameters. `hidden` supplies H_roll [m, d] (tests); it is computed here otherwise.
 */
export async function rolloutSampleStep(
  model: Decoder, inner: InnerLink, ex: InnerExample, weight: number, batchPairs: number, opts: { hidden?: Tensor } = {},
): Promise<Tensor> {
  const T = ex.ids.length;
  if (ex.lossMask.length !== T) throw new InvalidArgument(`inner example: ${T} ids but ${ex.lossMask.length} mask values`);
  if (!(batchPairs > 0)) throw new InvalidArgument(`rollout step: the batch has no trained pairs (${batchPairs})`);
  const P = spanStart(ex);
  const m = T - P;
  const be = model.backend;
  const share = innerPairs(ex) / batchPairs;
  const H = opts.hidden ?? await latentRollout(model, inner, [ex.ids.slice(0, P)], m, { what: 'the rollout read-back term' });
  if (H.rank !== 2 || H.shape[0] !== m || H.shape[1] !== model.config.hidden) {
    if (!opts.hidden) H.dispose();
    throw new InvalidArgument(`rollout step: H_roll must be [${m}, ${model.config.hidden}], got [${H.shape}]`);
  }
  const tape = new Tape();
  try {
    const loss = tidy(() => tape.run(() => {
      const prefix = noGrad(() => model.embed(be.fromValues(ex.ids.slice(0, P), [P], 'i32')));
      const logits = readBackRollout(model, inner, prefix, H, { output: 'logits' });
      const ce = F.crossEntropy(logits, be.fromValues(ex.ids.slice(P), [m], 'i32'));
      return F.scale(ce, weight * share);
    }));
    if (!loss.requiresGrad) throw new InvalidArgument(`rollout step: neither link ${inner.name} nor the agent trains; unfreeze one`);
    await tape.backward(loss);
    const value = noGrad(() => F.scale(loss, 1));
    return value;
  } finally {
    tape.dispose();
    if (!opts.hidden) H.dispose();
  }
}

/**
 * A latent rollout read back with grad (no grad was recorded while it ran): `prompt` (embedding rows
 * [P, d]) ⊕ Inner(H[0..m−2]) through the agent. Causal attention makes the forward's states at positions
 * P−1..P+m−2 equal to H, the rollout's own states, now as functions of the prompt rows, the link and the
 * agent (the recursion itself is not differentiated). Returns those m rows' hidden states [m, d] or their
 * logits [m, vocab]. Used by rolloutSampleStep and by the outer loop's 'rollout' latents.
 */
export function readBackRollout(
  model: Decoder, inner: InnerLink, prompt: Tensor, H: Tensor, opts: { output: 'hidden' | 'logits'; recompute?: boolean },
): Tensor {
  const P = prompt.shape[0];
  const m = H.shape[0];
  const x = m > 1 ? F.concatRows([prompt, inner.forward(F.sliceRows(H, 0, m - 1))]) : prompt;
  if (opts.output === 'logits') {
    return model.forward({ inputsEmbeds: x, logits: Array.from({ length: m }, (_, k) => P - 1 + k), recompute: opts.recompute }).logits!;
  }
  return F.sliceRows(model.forward({ inputsEmbeds: x, recompute: opts.recompute }).hidden, P - 1, m);
}
