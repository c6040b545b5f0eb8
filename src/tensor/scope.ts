/**
 * tidy(): disposes every tensor created inside `fn` except what it returns. Inference code (a decode
 * step, a latent rollout) creates many intermediates; tidy frees them without bookkeeping by hand.
 * Tensors that an autograd tape records are owned by the tape (it untracks them) and survive.
 */
import type { Tensor } from './tensor';

const scopes: Set<Tensor>[] = [];

/** Called by the Tensor constructor. */
export function track(t: Tensor) {
  scopes[scopes.length - 1]?.add(t);
}

/** Takes a tensor out of the current scopes (the tape owns it from now on). */
export function untrack(t: Tensor) {
  for (const s of scopes) s.delete(t);
}

type Kept = Tensor | Tensor[] | Record<string, Tensor> | void | number | string | boolean | null;

function keptTensors(result: unknown): Tensor[] {
  if (!result || typeof result !== 'object') return [];
  if (Array.isArray(result)) return result.filter(isTensor);
  if (isTensor(result)) return [result];
  return Object.values(result).filter(isTensor);
}

const isTensor = (x: unknown): x is Tensor => !!x && typeof x === 'object' && 'dispose' in x && 'shape' in x && 'dtype' in x;

/**
 * Set by autograd: true when a live tape recorded an op that reads `t` (a constant input such as labels, a
 * mask or a frozen stage's output) and now owns it; tidy then leaves it for the tape to free after backward.
 */
let retainHook: ((t: Tensor) => boolean) | null = null;
export function setTidyRetainHook(fn: (t: Tensor) => boolean) {
  retainHook = fn;
}

export function tidy<T extends Kept>(fn: () => T): T {
  const scope = new Set<Tensor>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } finally {
    scopes.pop();
  }
  const keep = new Set(keptTensors(result));
  // recorded outputs belong to their tape, and so do the constants a recorded op reads
  for (const t of scope) if (!keep.has(t) && !t.gradNode && !retainHook?.(t)) t.dispose();
  // what is returned belongs to the enclosing scope, if any (unless a tape owns it)
  for (const t of keep) if (!t.gradNode) track(t);
  return result;
}
