/**
 * Forward and backward parity of a differentiable function on the GPU and CPU backends: the same inputs,
 * the same seed gradient, outputs and every input gradient compared. Shared by the parity cases of every differentiable op.
 */
import { Tape } from '../../autograd/tape';
import type { DType } from '../../formats/dtype';
import type { Backend } from '../../tensor/backend';
import type { Tensor } from '../../tensor/tensor';
import type { Tolerance } from './close';
import { observedClose } from './parity';
import type { ParityEnv } from './parity';

export interface InputSpec {
  values: ArrayLike<number>;
  shape: number[];
  dtype?: DType;
  /** requiresGrad (default true for f32, false otherwise). */
  grad?: boolean;
}

async function run(backend: Backend, fn: (...x: Tensor[]) => Tensor, specs: InputSpec[], seed: ArrayLike<number> | null) {
  const ins = specs.map((s) => {
    const t = backend.fromValues(s.values, s.shape, s.dtype ?? 'f32');
    t.requiresGrad = s.grad ?? (s.dtype ?? 'f32') === 'f32';
    return t;
  });
  const tape = new Tape();
  const out = tape.run(() => fn(...ins));
  const y = await out.read();
  const grads: (Float32Array | null)[] = [];
  if (seed && out.requiresGrad) {
    const g = backend.fromValues(seed, out.shape);
    await tape.backward(out, g);
    g.dispose();
    for (const t of ins) grads.push(t.grad ? await t.grad.read() : null);
  }
  tape.dispose();
  ins.forEach((t) => t.dispose());
  return { y, grads, shape: out.shape };
}

/** Asserts GPU ≈ CPU for fn's output (tol) and for every input gradient (gradTol, default tol). */
export async function expectGradParity(
  env: ParityEnv, label: string, fn: (...x: Tensor[]) => Tensor, specs: InputSpec[], tol: Tolerance, gradTol = tol,
) {
  const ref = await run(env.cpu, fn, specs, null);
  const seed = env.rng.normals(ref.y.length);
  const c = await run(env.cpu, fn, specs, seed);
  const g = await run(env.gpu, fn, specs, seed);
  if (g.shape.join() !== c.shape.join()) throw new Error(`${label}: shape [${g.shape}] vs reference [${c.shape}]`);
  observedClose(g.y, c.y, tol, `${label} forward`);
  // every input that asks for a gradient must get one: a rule that records nothing, or drops an
  // input's gradient on both backends alike, would otherwise pass with nothing compared
  specs.forEach((s, i) => {
    const wants = s.grad ?? (s.dtype ?? 'f32') === 'f32';
    if (wants && (!c.grads[i] || !g.grads[i])) {
      throw new Error(`${label}: input ${i} requires grad but got none (reference: ${!!c.grads[i]}, GPU: ${!!g.grads[i]})`);
    }
    if (!wants && (c.grads[i] || g.grads[i])) throw new Error(`${label}: frozen input ${i} got a gradient`);
  });
  c.grads.forEach((cg, i) => {
    const gg = g.grads[i];
    if ((cg === null) !== (gg === null)) throw new Error(`${label}: gradient of input ${i} present on one backend only`);
    if (cg && gg) observedClose(gg, cg, gradTol, `${label} grad ${i}`);
  });
}
