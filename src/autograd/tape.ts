/**
 * Reverse-mode autograd on an explicit tape.
 *
 *   const tape = new Tape();
 *   const loss = tape.run(() => lossFn(params));   // ops inside record when an input requires grad
 *   await tape.backward(loss);                      // leaves' .grad accumulate
 *   tape.dispose();                                 // frees recorded intermediates and saved tensors
 *
 * Frozen tensors (requiresGrad false) get no gradient, but values computed from trainable ones do
 * requiresGrad and pass activation gradients through frozen weights. Where a value fans out, the
 * gradients of its uses are summed.
 */
import { InvalidArgument } from '../errors';
import { setTidyRetainHook, untrack } from '../tensor/scope';
import type { Tensor } from '../tensor/tensor';

export interface GradNode {
  name: string;
  inputs: readonly Tensor[];
  outputs: readonly Tensor[];
  /** Gradients w.r.t. each input (null where the input needs none), given output gradients (null = zero). */
  backward(gradOutputs: (Tensor | null)[], needsGrad: boolean[]): (Tensor | null)[];
  /** Tensors kept only for backward; disposed with the tape. */
  saved: Tensor[];
}

const stack: Tape[] = [];

/** The tape ops record onto, if any (null inside noGrad). */
export const currentTape = (): Tape | null => {
  const top = stack[stack.length - 1];
  return top && top !== PAUSED ? top : null;
};

/** Runs `fn` with recording paused (inference inside a training step, optimizer updates). */
export function noGrad<T>(fn: () => T): T {
  stack.push(PAUSED);
  try {
    return fn();
  } finally {
    stack.pop();
  }
}

/** Tapes recorded on and not yet disposed (for tidy's retain hook). */
const live = new Set<Tape>();

export class Tape {
  readonly nodes: GradNode[] = [];
  private paused = false;
  /** Inputs of recorded ops that are not themselves recorded or trainable (labels, masks, frozen activations). */
  private readonly consts = new Set<Tensor>();
  /** Those of them a tidy() scope handed over: freed with the tape. */
  private readonly owned: Tensor[] = [];

  /** Takes `t` over if a recorded op reads it; see setTidyRetainHook. */
  retain(t: Tensor): boolean {
    if (!this.consts.has(t)) return false;
    this.owned.push(t);
    return true;
  }

  /** Runs `fn` with this tape recording. */
  run<T>(fn: () => T): T {
    stack.push(this);
    try {
      return fn();
    } finally {
      stack.pop();
    }
  }

  /** Records an op if any input requires grad; marks its outputs. Called by autograd/ops. */
  record(node: Omit<GradNode, 'saved'> & { saved?: Tensor[] }) {
    if (this.paused || !node.inputs.some((t) => t.requiresGrad)) {
      node.saved?.forEach((t) => t.dispose());
      return;
    }
    const full: GradNode = { ...node, saved: node.saved ?? [] };
    live.add(this);
    for (const t of node.inputs) if (!t.requiresGrad && !t.gradNode) this.consts.add(t);
    // the tape owns what it recorded: an enclosing tidy() must not free it before backward
    for (const t of full.saved) untrack(t);
    for (const o of node.outputs) {
      untrack(o);
      o.requiresGrad = true;
      o.gradNode = full;
    }
    this.nodes.push(full);
  }

  /**
   * Backpropagates from `root` (seeded with `seed`, default ones for a scalar) and accumulates
   * gradients into every leaf that requires grad. Returns the map of leaf gradients.
   */
  async backward(root: Tensor, seed?: Tensor): Promise<Map<Tensor, Tensor>> {
    const leafGrads = this.backwardSync(root, seed);
    // a graph may span backends (moveTo): wait for each one its gradients were computed on
    await Promise.all([...new Set([root.backend, ...[...leafGrads.keys()].map((t) => t.backend)])].map((b) => b.sync()));
    return new Map([...leafGrads.keys()].map((k) => [k, k.grad!]));
  }

  /**
   * backward() without waiting for the backend (returns the leaves it reached): for a backward rule that
   * backpropagates through a recomputed piece of the graph (recompute.ts) while the enclosing tape's
   * backward runs.
   */
  backwardSync(root: Tensor, seed?: Tensor): Map<Tensor, Tensor> {
    if (!root.requiresGrad) throw new InvalidArgument(`backward: ${root} does not depend on any tensor that requires grad`);
    if (!seed && root.numel !== 1)
      throw new InvalidArgument(`backward: ${root} is not a scalar; pass a seed gradient of shape [${root.shape}]`);
    return noGrad(() => this.propagate(root, seed));
  }

  private propagate(root: Tensor, seed?: Tensor): Map<Tensor, Tensor> {
    const grads = new Map<Tensor, Tensor>();
    grads.set(root, seed ?? root.backend.fromValues([1], root.shape, 'f32'));
    const ownSeed = !seed;
    const leafGrads = new Map<Tensor, Tensor>();
    for (let i = this.nodes.length - 1; i >= 0; i--) {
      const node = this.nodes[i];
      const gOut = node.outputs.map((o) => grads.get(o) ?? null);
      if (gOut.every((g) => g === null)) continue;
      const needs = node.inputs.map((t) => t.requiresGrad);
      const gIn = node.backward(gOut, needs);
      for (const o of node.outputs) {
        const g = grads.get(o);
        if (g && (o !== root || ownSeed)) g.dispose();
        grads.delete(o);
      }
      node.inputs.forEach((t, k) => {
        const g = gIn[k];
        if (!g || !needs[k]) {
          if (g && !needs[k]) g.dispose();
          return;
        }
        const target = t.gradNode ? grads : leafGrads;
        const prev = target.get(t);
        target.set(t, prev ? accumulate(prev, g) : g);
      });
    }
    for (const [leaf, g] of leafGrads) leaf.grad = leaf.grad ? accumulate(leaf.grad, g) : g;
    return leafGrads;
  }

  /** Disposes every recorded intermediate and saved tensor; leaves and `keep` survive. */
  dispose(keep: Tensor[] = []) {
    const keepSet = new Set(keep);
    for (const n of this.nodes) {
      for (const t of n.saved) if (!keepSet.has(t)) t.dispose();
      for (const t of n.outputs) if (!keepSet.has(t)) t.dispose();
    }
    this.nodes.length = 0;
    for (const t of this.owned) if (!keepSet.has(t)) t.dispose();
    this.owned.length = 0;
    this.consts.clear();
    live.delete(this);
  }
}

setTidyRetainHook((t) => {
  for (const tape of live) if (tape.retain(t)) return true;
  return false;
});

const PAUSED = new Tape();
(PAUSED as unknown as { paused: boolean }).paused = true;

/** Sum of two gradients; both inputs are consumed. Set by autograd/ops (which owns the add kernel). */
let accumulate: (a: Tensor, b: Tensor) => Tensor = () => {
  throw new Error('autograd: accumulate not registered (import autograd/index)');
};
export function setAccumulate(fn: (a: Tensor, b: Tensor) => Tensor) {
  accumulate = fn;
}
