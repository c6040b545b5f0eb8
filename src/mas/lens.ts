/**
 * The logit lens on a latent message: what the receiving agent's LM head would read from each latent row, as its
 * k most likely tokens, and the row's L2 norm. The tab shows it for every message an outer link sends.
 */
import { F, noGrad } from '../autograd';
import { tidy } from '../tensor/scope';
import type { Tensor } from '../tensor/tensor';
import type { Tokenizer } from '../tokenizer';

/** One message read through a lens: per latent row, its norm and top tokens. */
export interface LensReading {
  norms: number[];
  /** top[i] = the k most likely tokens (text, probability) for latent i, most likely first. */
  top: { token: string; prob: number }[][];
  /** The vocabulary size: a uniform lens gives each token 1/vocab. */
  vocab: number;
}

/**
 * `lmHead` ([V, d]) on each row of `L` ([m, d]) → top-k (text, probability), and each row's L2 norm. Softmax and
 * top-k run on L's backend, so only [m, k] probabilities and ids and [m] norms come back (not the [m, V]
 * probabilities: ~19 MB for 32 rows over a 151,936-token vocabulary). Ties go to the lower id; k is capped at the
 * vocabulary size (F.topk takes at most 32). Special tokens are decoded too: a latent that reads as one shows it.
 */
export async function logitLens(L: Tensor, lmHead: Tensor, tok: Pick<Tokenizer, 'decode'>, k: number): Promise<LensReading> {
  const [values, indices, sq] = noGrad(() =>
    tidy(() => {
      const probs = F.softmax(F.linear(L, lmHead));
      const top = F.topk(probs, Math.min(k, probs.shape[probs.shape.length - 1]));
      return [top.values, top.indices, F.sumLastDim(F.mul(L, L))];
    }),
  );
  try {
    const [p, ids, s] = await Promise.all([values.read(), indices.readI32(), sq.read()]);
    const [m, kk] = values.shape as [number, number];
    const top: LensReading['top'] = [];
    for (let r = 0; r < m; r++) {
      const row = Array.from({ length: kk }, (_, j) => r * kk + j);
      top.push(row.map((j) => ({ token: tok.decode([ids[j]], { skipSpecialTokens: false }), prob: p[j] })));
    }
    return { norms: [...s].map((x) => Math.sqrt(x)), top, vocab: lmHead.shape[0]! };
  } finally {
    values.dispose();
    indices.dispose();
    sq.dispose();
  }
}

/** A message's top reading: one latent's most likely token, its probability, and which latent (0-based). */
export interface TopReading {
  token: string;
  prob: number;
  latent: number;
}

/**
 * What a message reads as at a glance: of its latents' most likely tokens, the most probable (the earliest on a tie);
 * with `accept` (e.g. the task's values), the most probable of the accepted ones when any latent reads as one. Null
 * for a message of no latents.
 */
export function topReading(r: Pick<LensReading, 'top'>, accept?: (token: string) => boolean): TopReading | null {
  const firsts = r.top.flatMap((row, latent) => (row[0] ? [{ token: row[0].token, prob: row[0].prob, latent }] : []));
  const kept = accept ? firsts.filter((t) => accept(t.token)) : [];
  const pool = kept.length ? kept : firsts;
  return pool.reduce<TopReading | null>((best, t) => (!best || t.prob > best.prob ? t : best), null);
}
