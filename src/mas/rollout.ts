/**
 * The latent rollout of one agent (docs/method.md §4.1) and the message it sends on. Upstream re-runs the whole
 * sequence m times without a cache; attention is causal, so prefilling the prompt pieces once into a KV
 * cache and then feeding one inner-link embedding per step computes the same hidden states (up to float
 * rounding) in O(m) single-row forwards instead of m full ones.
 *
 * Everything stays on the backend: the collected states H are written row by row into one [m, d] tensor,
 * and nothing is read back.
 */
import { F, noGrad } from '../autograd';
import { Cancelled, InvalidArgument, ShapeMismatch } from '../errors';
import { type GpuCounters, counterDelta } from '../gpu/counters';
import type { Decoder, KVCache } from '../model/decoder';
import { joinPieces } from '../model/generate';
import type { Backend } from '../tensor/backend';
import { moveTensor } from '../tensor/move';
import { tidy } from '../tensor/scope';
import { Tensor } from '../tensor/tensor';
import type { InnerLink, OuterLink } from './links';

/** A piece of a prompt: token ids, or embedding rows f32 [n, d] (latents from another agent). */
export type Piece = readonly number[] | Tensor;

export function checkCancelled(signal: AbortSignal | undefined, what: string) {
  if (signal?.aborted) throw new Cancelled(`cancelled during ${what}`);
}

/** Lets queued messages (an abort from the page) arrive between steps; only when the caller can cancel. */
async function yieldIfCancellable(signal: AbortSignal | undefined, what: string) {
  if (!signal) return;
  await new Promise((r) => setTimeout(r, 0));
  checkCancelled(signal, what);
}

export function pieceLength(p: Piece): number {
  return p instanceof Tensor ? p.shape[0] : p.length;
}

/** The pieces as embedding tensors (ids through the model's input embedding); empty pieces are dropped. */
export function embedPieces(model: Decoder, pieces: readonly Piece[]): Tensor[] {
  const d = model.config.hidden;
  return noGrad(() =>
    pieces.filter((p) => pieceLength(p) > 0).map((p) => {
      if (p instanceof Tensor) {
        if (p.rank !== 2 || p.shape[1] !== d)
          throw new ShapeMismatch(`latents of shape [${p.shape}] cannot enter a model of hidden size ${d}`);
        return p;
      }
      const ids = model.backend.fromValues(p, [p.length], 'i32');
      try {
        return model.embed(ids);
      } finally {
        ids.dispose();
      }
    }),
  );
}

/** Prefills the pieces into `cache` and returns the post-norm hidden state of the last position, [1, d]. */
export function prefill(model: Decoder, pieces: readonly Piece[], cache: KVCache): Tensor {
  return noGrad(() =>
    tidy(() => {
      const xs = embedPieces(model, pieces);
      if (!xs.length) throw new InvalidArgument('rollout: the prompt is empty');
      let hidden: Tensor | null = null;
      for (const x of joinPieces(xs)) hidden = model.forward({ inputsEmbeds: x, cache }).hidden;
      const T = hidden!.shape[0];
      return F.embedding(model.backend.fromValues([T - 1], [1], 'i32'), hidden!);
    }),
  );
}

export interface RolloutOptions {
  signal?: AbortSignal;
  /** For messages ("planner, round 2"). */
  what?: string;
  /**
   * On a backend that counts (WebGPU), called once with the work of the latent steps after the first (each: Inner(h)
   * fed through the model, its state appended to H), summed over `steps` of them; not called for m = 1.
   */
  onCounted?: (c: GpuCounters, steps: number) => void;
}

/**
 * m latent steps: h = post-norm hidden at the last position; H gets h; Inner(h) is fed as the next input
 * embedding. Returns H [m, d]. The last Inner(h_m) is never fed, as upstream.
 */
export async function latentRollout(
  model: Decoder,
  inner: InnerLink,
  pieces: readonly Piece[],
  m: number,
  opts: RolloutOptions = {},
): Promise<Tensor> {
  const what = opts.what ?? 'the latent rollout';
  const steps = rolloutSteps(model, inner, pieces, m, what, opts.onCounted);
  try {
    checkCancelled(opts.signal, what);
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value;
      await yieldIfCancellable(opts.signal, what); // checks after letting an abort arrive
    }
  } finally {
    steps.return(undefined as never); // a cancelled rollout still frees its cache and states
  }
}

/**
 * The same rollout without yielding between steps (no cancellation), for callers that must stay
 * synchronous: a training loss recorded on a tape (src/train/outer.ts). Runs without grad.
 */
export function latentRolloutSync(
  model: Decoder,
  inner: InnerLink,
  pieces: readonly Piece[],
  m: number,
  what = 'the latent rollout',
): Tensor {
  const steps = rolloutSteps(model, inner, pieces, m, what);
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** The rollout's steps; it pauses (yields) between two forwards and returns H [m, d]. */
function* rolloutSteps(model: Decoder, inner: InnerLink, pieces: readonly Piece[], m: number, what: string,
  onCounted?: RolloutOptions['onCounted']): Generator<void, Tensor> {
  if (!Number.isInteger(m) || m < 1) throw new InvalidArgument(`${what}: latent steps must be a positive integer, got ${m}`);
  const d = model.config.hidden;
  if (inner.d !== d) throw new ShapeMismatch(`${what}: inner link ${inner.name} has size ${inner.d} but the model's hidden size is ${d}`);
  const T = pieces.reduce((n, p) => n + pieceLength(p), 0);
  const be = model.backend;
  const cache = model.newCache(T + m);
  const H = be.zeros([m, 1, d]);
  let h: Tensor | null = null;
  try {
    h = prefill(model, pieces, cache);
    let from: GpuCounters | null = null;
    for (let i = 0; ; i++) {
      // in a scope: the [1, 1, d] view would otherwise keep h's storage alive after h.dispose()
      noGrad(() => tidy(() => F.kvAppend(H, h!.reshape([1, 1, d]), i)));
      if (i === 0 && onCounted && be.counters) from = be.counters();
      if (i === m - 1) {
        if (from && m > 1) onCounted!(counterDelta(from, be.counters!()), m - 1);
        break;
      }
      yield;
      const prev: Tensor = h;
      h = noGrad(() => tidy(() => model.forward({ inputsEmbeds: inner.forward(prev), cache }).hidden));
      prev.dispose();
    }
    return H.reshape([m, d]);
  } finally {
    H.dispose(); // the [m, d] reshape keeps the storage alive
    h?.dispose();
    cache.dispose();
  }
}

/**
 * The rollouts of several prompts through one agent at once, each as latentRollout runs it alone (the same bits: each
 * prompt is prefilled into its own rows of a batch cache, then each latent step feeds Inner(h) of every prompt through
 * one batched forward, Decoder.stepBatch). Returns each prompt's H [m, d].
 */
export async function latentRolloutBatch(model: Decoder, inner: InnerLink, prompts: readonly (readonly Piece[])[], m: number,
  opts: Pick<RolloutOptions, 'signal' | 'what'> = {}): Promise<Tensor[]> {
  const what = opts.what ?? 'the latent rollouts';
  if (!Number.isInteger(m) || m < 1) throw new InvalidArgument(`${what}: latent steps must be a positive integer, got ${m}`);
  const d = model.config.hidden;
  if (inner.d !== d) throw new ShapeMismatch(`${what}: inner link ${inner.name} has size ${inner.d} but the model's hidden size is ${d}`);
  const B = prompts.length;
  const be = model.backend;
  const T = Math.max(...prompts.map((p) => p.reduce((n, x) => n + pieceLength(x), 0)));
  const cache = model.newBatchCache(B, T + m);
  // every prompt's state of step i sits at row i·B + b
  const H = be.zeros([m, B, d]);
  let h: Tensor | null = null;
  try {
    checkCancelled(opts.signal, what);
    h = noGrad(() => tidy(() => F.concatRows(prompts.map((pieces, b) => {
      const xs = embedPieces(model, pieces);
      if (!xs.length) throw new InvalidArgument(`${what}: prompt ${b} is empty`);
      const { hidden } = model.prefillRow(cache, b, { inputsEmbeds: xs });
      return F.embedding(be.fromValues([hidden.shape[0] - 1], [1], 'i32'), hidden);
    }))));
    for (let i = 0; ; i++) {
      noGrad(() => tidy(() => F.kvAppend(H, h!.reshape([1, B, d]), i)));
      if (i === m - 1) break;
      await yieldIfCancellable(opts.signal, what);
      const prev: Tensor = h;
      h = noGrad(() => tidy(() => model.stepBatch({ inputsEmbeds: inner.forward(prev), cache }).hidden));
      prev.dispose();
    }
    const all = H.reshape([m * B, d]);
    try {
      return prompts.map((_, b) =>
        noGrad(() =>
          tidy(() =>
            F.embedding(
              be.fromValues(
                Array.from({ length: m }, (_, i) => i * B + b),
                [m],
                'i32',
              ),
              all,
            ),
          ),
        ),
      );
    } finally {
      all.dispose();
    }
  } finally {
    H.dispose();
    h?.dispose();
    cache.dispose();
  }
}

/**
 * A message on the receiving agent's backend (roles placed on different devices): L itself when it is
 * already there, else a copy, and L is freed.
 */
export function deliver(L: Tensor, to: Backend): Tensor {
  if (L.backend === to) return L;
  try {
    return moveTensor(L, to);
  } finally {
    L.dispose();
  }
}

/** The message one agent sends another: Outer(Inner(H)), [m, d_target] (the inner link is applied again). */
export function linkMessage(inner: InnerLink, outer: OuterLink, H: Tensor): Tensor {
  if (outer.dIn !== inner.d) throw new ShapeMismatch(`outer link ${outer.name} takes size ${outer.dIn} but ${inner.name} gives ${inner.d}`);
  return noGrad(() => tidy(() => outer.forward(inner.forward(H))));
}
