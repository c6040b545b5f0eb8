/**
 * Forward-and-backward parity through autograd: runs `fn` on the GPU and CPU tensors of each pair
 * under a tape, backpropagates the same random seed and compares the output and every gradient.
 * (A helper for the norm, activation and rope cases; it would sit well in testing/parity.ts.)
 */
import { Tape } from '../../autograd/tape';
import type { Tensor } from '../../tensor/tensor';
import { Rng } from '../../testing/rng';
import { type ParityEnv, type Tolerance, expectParity, pair } from '../../testing';

export type Pair = { g: Tensor; c: Tensor };

/** A pair whose two tensors require grad (or not). */
export function gradPair(env: ParityEnv, values: ArrayLike<number>, shape: readonly number[], requiresGrad = true): Pair {
  const p = pair(env, values, shape);
  p.g.requiresGrad = p.c.requiresGrad = requiresGrad;
  return p;
}

export async function expectGradParity(
  env: ParityEnv, fn: (...ts: Tensor[]) => Tensor, inputs: Pair[], tol: Tolerance, gradTol: Tolerance, label: string,
) {
  const grads = async (side: 'g' | 'c') => {
    const ts = inputs.map((p) => p[side]);
    for (const t of ts) t.grad?.dispose(), (t.grad = null);
    const tape = new Tape();
    const out = tape.run(() => fn(...ts));
    const seed = out.backend.fromValues(seedValues(out.numel), out.shape);
    await tape.backward(out, seed);
    return { out, tape, seed, grads: ts.map((t) => t.grad) };
  };
  // the same seed gradient on both sides
  const seedBase = env.rng.int(2 ** 31);
  const seedValues = (n: number) => new Rng(seedBase).normals(n);
  const gpu = await grads('g');
  const cpu = await grads('c');
  await expectParity(gpu.out, cpu.out, tol, `${label} forward`);
  for (let i = 0; i < inputs.length; i++) {
    const [a, b] = [gpu.grads[i], cpu.grads[i]];
    if (!inputs[i].c.requiresGrad) {
      if (a || b) throw new Error(`${label}: input ${i} is frozen but got a gradient`);
      continue;
    }
    if (!a || !b) throw new Error(`${label}: input ${i} got no gradient (gpu ${!!a}, cpu ${!!b})`);
    await expectParity(a, b, gradTol, `${label} grad of input ${i}`);
  }
  for (const s of [gpu, cpu]) s.tape.dispose(), s.seed.dispose();
}
