/**
 * Links: the inner link against torch (test/golden/decoder.json's link section, via the class API), every
 * variant against a plain-JS f64 reference written here, gradcheck, state dicts and errors (GPU parity: links.gpu.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../autograd';
import { CorruptCheckpoint, InvalidArgument, ShapeMismatch } from '../errors';
import { erf } from '../kernels/activation/cpu';
import { closeness } from '../kernels/workbench/close';
import { Rng } from '../util/rng';
import type { Backend } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import type { Tensor } from '../tensor/tensor';
import { type Compared, GOLDEN_TOL, compare, f64, linkGolden } from '../../test/golden/check';
import {
  INNER_LINK_TYPES,
  InnerLink,
  type LinkTensor,
  OUTER_LINK_TYPES,
  OuterLink,
  innerLinkParamCount,
  innerLinkShapes,
  outerLinkParamCount,
  outerLinkShapes,
} from './links';

/** Values at the backend's own precision (f64 on CpuBackend('f64')). */
const vals = async (t: Tensor): Promise<Float64Array> =>
  t.backend instanceof CpuBackend ? Float64Array.from(t.backend.data(t) as Float64Array) : Float64Array.from(await t.read());

function expectClose(results: Compared[], tol: { atol: number; rtol: number }) {
  const bad = compare(results, tol).filter((r) => !r.ok).map((r) => r.message);
  expect(bad).toEqual([]);
}

// ---- plain-JS f64 reference (PyTorch semantics: biased variance, eps 1e-5, erf GELU) ----
// erf from the activation kernel's CPU reference (checked against Python's math.erf to ~3e-16)
const gelu = (x: number) => 0.5 * x * (1 + erf(x / Math.SQRT2));
type M = number[][];
const lin = (x: M, w: LinkTensor, b: LinkTensor): M =>
  x.map((row) => Array.from({ length: w.shape[0] }, (_, o) => row.reduce((s, xi, i) => s + xi * w.data[o * w.shape[1] + i], b.data[o])));
const ln = (x: M, g: LinkTensor, b: LinkTensor): M =>
  x.map((row) => {
    const mu = row.reduce((a, c) => a + c, 0) / row.length;
    const v = row.reduce((a, c) => a + (c - mu) ** 2, 0) / row.length;
    return row.map((c, i) => ((c - mu) / Math.sqrt(v + 1e-5)) * g.data[i] + b.data[i]);
  });
const addM = (a: M, b: M) => a.map((r, i) => r.map((c, j) => c + b[i][j]));

function reference(kind: 'inner' | 'outer', type: string, s: Map<string, LinkTensor>, x: M): M {
  const t =
    kind === 'inner' ? INNER_LINK_TYPES[type as keyof typeof INNER_LINK_TYPES] : OUTER_LINK_TYPES[type as keyof typeof OUTER_LINK_TYPES];
  const [lnA, lnB] = kind === 'inner' ? ['pre_ln', 'post_ln'] : ['ln_source', 'ln_target'];
  const g = (k: string) => s.get(k)!;
  const h = t.ln ? ln(x, g(`${lnA}.weight`), g(`${lnA}.bias`)) : x;
  const a = lin(h, g('proj1.weight'), g('proj1.bias'));
  const branch = t.linear ? a : lin(a.map((r) => r.map(gelu)), g('proj2.weight'), g('proj2.bias'));
  let sum = branch;
  if (t.residual) sum = kind === 'inner' ? addM(x, branch) : addM(branch, lin(x, g('residual_proj.weight'), g('residual_proj.bias')));
  return t.ln ? ln(sum, g(`${lnB}.weight`), g(`${lnB}.bias`)) : sum;
}

/** A random state dict (LN params away from 1/0 so that they matter). */
function randomState(shapes: [string, number[]][], rng: Rng): Map<string, LinkTensor> {
  return new Map(shapes.map(([name, shape]) => [name, { shape, data: rng.uniforms(shape.reduce((a, b) => a * b, 1), -0.8, 0.8) }]));
}
const matrix = (rng: Rng, T: number, d: number): M => Array.from({ length: T }, () => Array.from(rng.uniforms(d, -2, 2)));

// ---- inner link vs torch ----
type Quantised = { shape: number[]; scale: number; q: number[] };
const dequant = (t: Quantised) => Float64Array.from(t.q, (q) => q * t.scale);

async function goldenViaClass(backend: Backend): Promise<Compared[]> {
  const g = linkGolden;
  const inputs = g.inputs as Record<string, Quantised>;
  const state = new Map(innerLinkShapes('ln_res_adapter', g.d).map(([k]) => [k, { shape: inputs[k].shape, data: dequant(inputs[k]) }]));
  const link = InnerLink.fromStateDict(backend, state, { d: g.d });
  const x = backend.fromValues(dequant(inputs.h), inputs.h.shape);
  x.requiresGrad = true;
  const target = backend.fromValues(dequant(inputs.target), inputs.target.shape);
  const mask = backend.fromValues(g.mask, [g.rows]);
  const tape = new Tape();
  const { y, loss } = tape.run(() => {
    const y = link.forward(x);
    return { y, loss: F.cosineLoss(y, target, mask) };
  });
  await tape.backward(loss);
  const out: Compared[] = [
    { label: 'y', actual: await vals(y), expected: f64(g.y) },
    { label: 'loss', actual: await vals(loss), expected: [g.loss] },
  ];
  for (const [name, want] of Object.entries(g.grads)) {
    const grad = name === 'h' ? x.grad : link.params.get(name).grad;
    expect(grad, `gradient of ${name}`).toBeTruthy();
    out.push({ label: `d loss / d ${name}`, actual: await vals(grad!), expected: f64(want as string) });
  }
  tape.dispose();
  [x, target, mask].forEach((t) => t.dispose());
  link.dispose();
  return out;
}

describe('InnerLink ln_res_adapter vs torch (golden)', () => {
  it.each([
    ['f64', GOLDEN_TOL.f64],
    ['f32', GOLDEN_TOL.f32],
  ] as const)('cpu %s: output, masked cosine loss and every gradient', async (p, tol) => {
    const res = await goldenViaClass(new CpuBackend(p));
    expect(res).toHaveLength(2 + 9);
    expectClose(res, tol);
  });
});

// ---- every variant vs the JS reference ----
describe('variants vs plain-JS f64 reference', () => {
  const be = new CpuBackend('f64');
  it.each(Object.keys(INNER_LINK_TYPES))('inner %s (d 6, T 3)', async (type) => {
    const rng = new Rng(11);
    const state = randomState(innerLinkShapes(type as keyof typeof INNER_LINK_TYPES, 6), rng);
    const link = InnerLink.fromStateDict(be, state, { type });
    const x = matrix(rng, 3, 6);
    const y = await vals(link.forward(be.fromValues(x.flat(), [3, 6])));
    const r = closeness(y, reference('inner', type, state, x).flat(), { atol: 1e-12, rtol: 1e-12 }, type);
    expect(r.ok, r.message).toBe(true);
  });
  it.each(Object.keys(OUTER_LINK_TYPES))('outer %s (d_in 5, d_out 4, T 3)', async (type) => {
    const rng = new Rng(12);
    const state = randomState(outerLinkShapes(type as keyof typeof OUTER_LINK_TYPES, 5, 4), rng);
    const link = OuterLink.fromStateDict(be, state, { type, dIn: 5, dOut: 4 });
    expect([link.dIn, link.dOut]).toEqual([5, 4]);
    const x = matrix(rng, 3, 5);
    const out = link.forward(be.fromValues(x.flat(), [3, 5]));
    expect(out.shape).toEqual([3, 4]);
    const r = closeness(await vals(out), reference('outer', type, state, x).flat(), { atol: 1e-12, rtol: 1e-12 }, type);
    expect(r.ok, r.message).toBe(true);
  });
  it('aliases pick the same variants as upstream', () => {
    expect(InnerLink.create(be, 3, { type: '2layer_res' }).type).toBe('res_adapter');
    expect(InnerLink.create(be, 3, { type: '1layer' }).type).toBe('linear_adapter');
    expect(OuterLink.create(be, 3, 2, { type: '2layer_ln_res' }).type).toBe('outer_ln_res_adapter');
    expect(OuterLink.create(be, 3, 2, { type: '1layer_res' }).type).toBe('outer_linear_res_adapter');
  });
});

// ---- gradients ----
describe('gradcheck (f64)', () => {
  const be = new CpuBackend('f64');
  const check = async (link: InnerLink | OuterLink, T: number) => {
    const x = be.fromValues(new Rng(5).uniforms(T * link.dIn, -2, 2), [T, link.dIn]);
    x.requiresGrad = true;
    const rep = await gradcheck((xx) => link.forward(xx), [x, ...link.params.list()]);
    expect(rep.ok, rep.message).toBe(true);
    expect(rep.inputs.length).toBe(1 + link.params.entries.length);
  };
  it.each(Object.keys(OUTER_LINK_TYPES))('outer %s: input and every parameter', async (type) => {
    await check(
      OuterLink.fromStateDict(be, randomState(outerLinkShapes(type as keyof typeof OUTER_LINK_TYPES, 5, 4), new Rng(3)), { type }),
      3,
    );
  });
  it.each(Object.keys(INNER_LINK_TYPES))('inner %s: input and every parameter', async (type) => {
    await check(
      InnerLink.fromStateDict(be, randomState(innerLinkShapes(type as keyof typeof INNER_LINK_TYPES, 5), new Rng(4)), { type }),
      3,
    );
  });

  it('a frozen link passes the same input gradient and takes none itself', async () => {
    const link = OuterLink.create(be, 5, 4, { seed: 9 });
    const x = be.fromValues(new Rng(2).uniforms(15, -2, 2), [3, 5]);
    x.requiresGrad = true;
    const seedT = be.fromValues(new Rng(3).uniforms(12), [3, 4]);
    const run = async () => {
      const tape = new Tape();
      const y = tape.run(() => link.forward(x));
      await tape.backward(y, seedT);
      tape.dispose();
      const g = await vals(x.grad!);
      x.grad!.dispose();
      x.grad = null;
      return g;
    };
    const live = await run();
    expect(link.params.get('proj1.weight').grad).toBeTruthy();
    link.params.zeroGrad();
    expect(link.freeze().frozen).toBe(true);
    const frozen = await run();
    expect(link.params.list().every((p) => p.grad === null)).toBe(true);
    expect(Array.from(frozen)).toEqual(Array.from(live));
    expect(link.unfreeze().frozen).toBe(false);
  });
});

// ---- sizes, init, state dicts ----
describe('parameter counts and init', () => {
  it('match the spec formulas at release sizes (no allocation)', () => {
    expect(innerLinkParamCount(2048)).toBe(2 * 2048 ** 2 + 6 * 2048);
    expect(innerLinkParamCount(2048)).toBe(8_400_896);
    expect(innerLinkParamCount(1536)).toBe(4_727_808);
    const outer = (i: number, o: number) => 3 * i * o + 2 * o * o + 2 * i + 6 * o;
    expect(outerLinkParamCount(2048, 2048)).toBe(outer(2048, 2048));
    expect(outerLinkParamCount(2048, 2048)).toBe(20_987_904);
    expect(outerLinkParamCount(2048, 1536)).toBe(14_169_088);
    expect(outerLinkParamCount(2560, 2560)).toBe(32_788_480);
  });
  it('counted at small sizes equal the formulas', () => {
    const be = new CpuBackend('f32');
    for (const d of [1, 3, 17]) expect(InnerLink.create(be, d).numParams).toBe(2 * d * d + 6 * d);
    for (const [i, o] of [[5, 4], [3, 7], [1, 1]]) expect(OuterLink.create(be, i, o).numParams).toBe(3 * i * o + 2 * o * o + 2 * i + 6 * o);
    expect(OuterLink.create(be, 5, 4).hidden).toBe(8);
    expect(OuterLink.create(be, 5, 4, { type: 'outer_res_adapter' }).hidden).toBe(4);
  });
  it('PyTorch defaults: U(±1/√fan_in) for Linear, γ = 1 and β = 0 for LayerNorm, seeded', async () => {
    const be = new CpuBackend('f32');
    const s = await OuterLink.create(be, 50, 20, { seed: 4 }).stateDict();
    const bound = {
      'proj1.weight': 50,
      'proj1.bias': 50,
      'proj2.weight': 40,
      'proj2.bias': 40,
      'residual_proj.weight': 50,
      'residual_proj.bias': 50,
    };
    for (const [k, fan] of Object.entries(bound)) {
      const a = Array.from(s.get(k)!.data);
      const m = Math.max(...a.map(Math.abs));
      expect(m, k).toBeLessThanOrEqual(1 / Math.sqrt(fan));
      expect(m, k).toBeGreaterThan(0.8 / Math.sqrt(fan)); // spread over the whole range, not a narrower one
    }
    for (const k of ['ln_source', 'ln_target']) {
      expect(new Set(s.get(`${k}.weight`)!.data)).toEqual(new Set([1]));
      expect(new Set(s.get(`${k}.bias`)!.data)).toEqual(new Set([0]));
    }
    const again = await OuterLink.create(be, 50, 20, { seed: 4 }).stateDict();
    expect(Array.from(again.get('proj2.weight')!.data)).toEqual(Array.from(s.get('proj2.weight')!.data));
  });
});

describe('state dicts', () => {
  const be = new CpuBackend('f32');
  it('round trip keeps upstream keys, shapes and outputs', async () => {
    const a = InnerLink.create(be, 6, { seed: 3 });
    const s = await a.stateDict();
    expect([...s.keys()]).toEqual([
      'pre_ln.weight',
      'pre_ln.bias',
      'proj1.weight',
      'proj1.bias',
      'proj2.weight',
      'proj2.bias',
      'post_ln.weight',
      'post_ln.bias',
    ]);
    const b = InnerLink.fromStateDict(be, s);
    const x = be.fromValues(new Rng(1).uniforms(12), [2, 6]);
    expect(Array.from(await b.forward(x).read())).toEqual(Array.from(await a.forward(x).read()));

    const o = OuterLink.create(be, 5, 3, { seed: 2 });
    const os = await o.stateDict();
    expect([...os].map(([k, t]) => `${k}:${t.shape}`)).toEqual([
      'ln_source.weight:5', 'ln_source.bias:5', 'proj1.weight:6,5', 'proj1.bias:6', 'proj2.weight:3,6', 'proj2.bias:3',
      'residual_proj.weight:3,5', 'residual_proj.bias:3', 'ln_target.weight:3', 'ln_target.bias:3',
    ]);
    const o2 = OuterLink.create(be, 5, 3, { seed: 99 });
    o2.load(os);
    const x5 = be.fromValues(new Rng(1).uniforms(10), [2, 5]);
    expect(Array.from(await o2.forward(x5).read())).toEqual(Array.from(await o.forward(x5).read()));
  });
});

describe('errors', () => {
  const be = new CpuBackend('f32');
  const inner = () => randomState(innerLinkShapes('ln_res_adapter', 4), new Rng(1));
  const outer = () => randomState(outerLinkShapes('outer_ln_res_adapter', 5, 4), new Rng(1));
  it('missing or extra keys are CorruptCheckpoint naming them', () => {
    const s = inner();
    s.delete('post_ln.bias');
    expect(() => InnerLink.fromStateDict(be, s, { name: 'planner inner' })).toThrow(CorruptCheckpoint);
    expect(() => InnerLink.fromStateDict(be, s, { name: 'planner inner' })).toThrow(/planner inner.*lacks post_ln\.bias/);
    const o = outer();
    o.set('extra.weight', { shape: [1], data: [0] });
    expect(() => OuterLink.fromStateDict(be, o)).toThrow(/unexpected extra\.weight/);
    // a res_adapter file loaded as the released type
    expect(() => InnerLink.fromStateDict(be, randomState(innerLinkShapes('res_adapter', 4), new Rng(1)))).toThrow(
      /lacks pre_ln\.weight.*pass that type/,
    );
  });
  it('sizes that do not match are ShapeMismatch naming the link and both sizes', () => {
    expect(() => OuterLink.fromStateDict(be, outer(), { name: 'outer_23', dIn: 5, dOut: 6 })).toThrow(ShapeMismatch);
    expect(() => OuterLink.fromStateDict(be, outer(), { name: 'outer_23', dIn: 5, dOut: 6 })).toThrow(/outer_23.*size is 4.*hidden size 6/);
    expect(() => InnerLink.fromStateDict(be, inner(), { name: 'solver inner', d: 8 })).toThrow(/solver inner.*4.*8/);
    const s = outer();
    s.set('ln_target.bias', { shape: [5], data: new Float32Array(5) });
    expect(() => OuterLink.fromStateDict(be, s, { name: 'outer_12' })).toThrow(/outer_12.*ln_target\.bias.*\[5\].*\[4\]/);
    const link = OuterLink.fromStateDict(be, outer(), { name: 'outer_12' });
    expect(() => link.forward(be.zeros([2, 4]))).toThrow(/outer_12.*\[T, 5\].*4 vs 5/);
  });
  it('unknown types are InvalidArgument listing the known ones', () => {
    expect(() => InnerLink.create(be, 4, { type: '3layer' })).toThrow(InvalidArgument);
    expect(() => InnerLink.create(be, 4, { type: '3layer' })).toThrow(/ln_res_adapter.*2layer_res/);
    expect(() => OuterLink.create(be, 4, 4, { type: 'ln_res_adapter' })).toThrow(/outer_ln_res_adapter/);
    expect(() => InnerLink.create(be, 0)).toThrow(InvalidArgument);
  });
});
