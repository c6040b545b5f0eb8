/**
 * Golden checks against PyTorch (scripts/golden/decoder.py, torch 1.13 float64): a Llama/Qwen decoder
 * layer and an inner RecursiveLink composed from F.* ops exactly as the models compose them, run on any
 * backend, compared output by output and gradient by gradient. Shared by the Node and browser tests.
 */
import { F, Tape } from '../../src/autograd';
import { ropeInvFreq } from '../../src/kernels/rope';
import type { Backend } from '../../src/tensor/backend';
import { CpuBackend } from '../../src/tensor/cpu';
import type { Tensor } from '../../src/tensor/tensor';
import { type CloseReport, type Tolerance, closeness } from '../../src/kernels/workbench/close';
import golden from './decoder.json';

/**
 * Tolerances. Elementwise |got − want| ≤ atol·max|want| + rtol·|want| per array: the absolute floor is
 * relative to the array's largest entry, so gradients of 1e-2 scale (the link's) are held as tightly as
 * logits of 1 scale, and entries that cancel to near zero are judged against the array, not against
 * themselves.
 * - f64: every kernel is exact up to f64 rounding, so only summation order differs (≈1e-15); 1e-9 leaves
 *   room for nothing but rounding.
 * - f32: inputs are exact in f32 (small integers × 2^-k), so the error is f32 rounding (6e-8) amplified
 *   through ~25 ops forward and back (norms, softmax, logsumexp, 1/‖y‖ of the cosine): measured ≤ 3e-7
 *   (CPU) and ≤ 7e-7 (Dawn, SwiftShader) of each array's peak. TOL.f32's 1e-4 / 1e-5 leave > 10x margin
 *   and still catch the convention slips that matter: no RoPE scaling 9e-3, the medium band unblended
 *   3e-3, q/k norm after RoPE 0.6, interleaved GQA heads 0.4, unshifted labels 3. An eps slip (1e-5 for
 *   1e-6) moves values by only 1e-5 and is caught by the f64 check alone.
 */
export const GOLDEN_TOL: Record<'f64' | 'f32', Tolerance> = {
  f64: { atol: 1e-9, rtol: 1e-9 },
  f32: { atol: 1e-5, rtol: 1e-4 },
};

type Quantised = { shape: number[]; scale: number; q: number[] };

/** float64 values from the script's base64 (little-endian). */
export function f64(b64: string): Float64Array {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Float64Array(bytes.buffer);
}

const dequant = (t: Quantised) => Float64Array.from(t.q, (q) => q * t.scale);

/** A result next to torch's, by name. */
export interface Compared {
  label: string;
  actual: ArrayLike<number>;
  expected: ArrayLike<number>;
}

/** Values of a float tensor at the backend's own precision (f64 on CpuBackend('f64'), not read()'s f32). */
async function values(t: Tensor): Promise<ArrayLike<number>> {
  const b = t.backend;
  if (b instanceof CpuBackend) return Float64Array.from(b.data(t) as Float32Array | Float64Array);
  return t.read();
}


interface Leaves {
  tensors: Record<string, Tensor>;
  dispose(): void;
}

function leaves(backend: Backend, inputs: Record<string, Quantised>, frozen: string[] = []): Leaves {
  const tensors: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(inputs)) {
    tensors[name] = backend.fromValues(dequant(t), t.shape);
    tensors[name].requiresGrad = !frozen.includes(name);
  }
  return { tensors, dispose: () => Object.values(tensors).forEach((t) => t.dispose()) };
}

export const decoderGolden = golden.decoder;
export const linkGolden = golden.link;

/** Hugging Face's rope config of the golden layer, in ropeInvFreq's terms. */
export const decoderRope = {
  theta: golden.decoder.rope.theta,
  headDim: golden.decoder.dims.head_dim,
  scaling: golden.decoder.rope.scaling,
};

/**
 * The decoder layer (Llama/Qwen, with Qwen2's q/k/v bias and Qwen3's per-head q/k norm) and HF's
 * causal-LM loss, from F ops. `invFreq`: 'torch' rotates by the script's f32 frequencies (bit-equal
 * inputs, for the f64 check); 'ropeInvFreq' by ours, as a model would (they differ by 1 f32 ulp in the
 * blended band, see the test).
 */
export async function decoderCase(backend: Backend, invFreq: 'torch' | 'ropeInvFreq'): Promise<Compared[]> {
  const g = golden.decoder;
  const { T, Hq, Hkv, head_dim: D, rms_eps: eps } = g.dims;
  const L = leaves(backend, g.inputs);
  const w = L.tensors;
  const freq = invFreq === 'torch' ? Float32Array.from(g.rope.inv_freq_f32) : ropeInvFreq(decoderRope);
  const inv = backend.fromValues(freq, [freq.length]);
  const pos = backend.fromValues(g.positions, [T], 'i32');
  // HF ForCausalLMLoss: labels padded with -100 and shifted left, so row t predicts token t + 1
  const shifted = [...g.labels.slice(1), -100];
  const labels = backend.fromValues(shifted, [T], 'i32');

  const tape = new Tape();
  const { hidden, logits, loss } = tape.run(() => {
    const x = w.x;
    let h = F.rmsNorm(x, w.input_norm, eps);
    const heads = (t: Tensor, n: number) => F.reshape(t, [T, n, D]);
    let q = heads(F.linear(h, w['q_proj.weight'], w['q_proj.bias']), Hq);
    let k = heads(F.linear(h, w['k_proj.weight'], w['k_proj.bias']), Hkv);
    const v = heads(F.linear(h, w['v_proj.weight'], w['v_proj.bias']), Hkv);
    q = F.rope(F.rmsNorm(q, w.q_norm, eps), pos, inv);
    k = F.rope(F.rmsNorm(k, w.k_norm, eps), pos, inv);
    const o = F.reshape(F.attention(q, k, v), [T, Hq * D]);
    const x1 = F.add(x, F.linear(o, w['o_proj.weight']));
    h = F.rmsNorm(x1, w.post_norm, eps);
    const mlp = F.linear(F.swiglu(F.linear(h, w['gate_proj.weight']), F.linear(h, w['up_proj.weight'])), w['down_proj.weight']);
    const x2 = F.add(x1, mlp);
    const hidden = F.rmsNorm(x2, w.final_norm, eps);
    const logits = F.linear(hidden, w['lm_head.weight']);
    return { hidden, logits, loss: F.crossEntropy(logits, labels) };
  });
  await tape.backward(loss);
  const out: Compared[] = [
    { label: 'hidden', actual: await values(hidden), expected: f64(g.hidden) },
    { label: 'logits', actual: await values(logits), expected: f64(g.logits) },
    { label: 'loss', actual: await values(loss), expected: [g.loss] },
  ];
  for (const [name, want] of Object.entries(g.grads)) {
    const grad = w[name].grad;
    if (!grad) throw new Error(`decoder: no gradient reached ${name}`);
    out.push({ label: `d loss / d ${name}`, actual: await values(grad), expected: f64(want) });
  }
  tape.dispose();
  [inv, pos, labels].forEach((t) => t.dispose());
  L.dispose();
  return out;
}

/** The inner RecursiveLink y = LN_post(x + W2·GELU(W1·LN_pre(x) + b1) + b2) and the masked cosine loss. */
export async function linkCase(backend: Backend): Promise<Compared[]> {
  const g = golden.link;
  const L = leaves(backend, g.inputs, ['target']);
  const p = L.tensors;
  const mask = backend.fromValues(g.mask, [g.rows]);
  const tape = new Tape();
  const { y, loss } = tape.run(() => {
    const mid = F.gelu(F.linear(F.layerNorm(p.h, p['pre_ln.weight'], p['pre_ln.bias'], g.ln_eps), p['proj1.weight'], p['proj1.bias']));
    const y = F.layerNorm(F.add(p.h, F.linear(mid, p['proj2.weight'], p['proj2.bias'])), p['post_ln.weight'], p['post_ln.bias'], g.ln_eps);
    return { y, loss: F.cosineLoss(y, p.target, mask) };
  });
  await tape.backward(loss);
  const out: Compared[] = [
    { label: 'y', actual: await values(y), expected: f64(g.y) },
    { label: 'loss', actual: await values(loss), expected: [g.loss] },
  ];
  for (const [name, want] of Object.entries(g.grads)) {
    const grad = p[name].grad;
    if (!grad) throw new Error(`link: no gradient reached ${name}`);
    out.push({ label: `d loss / d ${name}`, actual: await values(grad), expected: f64(want) });
  }
  tape.dispose();
  mask.dispose();
  L.dispose();
  return out;
}

/** Closeness per array with the floor scaled by the array's largest |expected| (see GOLDEN_TOL). */
export function compare(results: Compared[], tol: Tolerance): CloseReport[] {
  return results.map(({ label, actual, expected }) => {
    let peak = 0;
    for (let i = 0; i < expected.length; i++) peak = Math.max(peak, Math.abs(expected[i]));
    return closeness(actual, expected, { atol: tol.atol * peak, rtol: tol.rtol }, label);
  });
}

/** Worst error over all arrays, relative to each array's largest entry (the figure the report quotes). */
export function worstScaled(results: Compared[]): { label: string; err: number } {
  let worst = { label: '', err: 0 };
  for (const { label, actual, expected } of results) {
    let peak = 0;
    let diff = 0;
    for (let i = 0; i < expected.length; i++) {
      peak = Math.max(peak, Math.abs(expected[i]));
      diff = Math.max(diff, Math.abs(actual[i] - expected[i]));
    }
    const err = Number.isNaN(diff) ? Infinity : diff / peak;
    if (!(err <= worst.err)) worst = { label, err };
  }
  return worst;
}
