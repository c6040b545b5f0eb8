import { describe, expect, it } from 'vitest';
import { F, Tape } from '.';
import { InvalidArgument } from '../errors';
import { VIEW_ALIGN } from '../tensor/backend';
import { CpuBackend } from '../tensor/cpu';
import { assertClose } from '../kernels/workbench/close';
import { Rng } from '../util/rng';
import { FlatParams, defaultDecay } from './params';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const seq = (n: number, k = 1) => Array.from({ length: n }, (_, i) => k * (i + 1));

/** The inner link's parameters at d = 3 (2d^2 + 6d = 36). */
const innerSpecs = () => [
  { name: 'pre_ln.weight', shape: [3], init: [1, 1, 1] },
  { name: 'pre_ln.bias', shape: [3], init: [0, 0, 0] },
  { name: 'proj1.weight', shape: [3, 3], init: seq(9, 0.1) },
  { name: 'proj1.bias', shape: [3], init: seq(3, -1) },
  { name: 'proj2.weight', shape: [3, 3], init: seq(9, 0.2) },
  { name: 'proj2.bias', shape: [3], init: seq(3, -2) },
  { name: 'post_ln.weight', shape: [3], init: [1, 1, 1] },
  { name: 'post_ln.bias', shape: [3], init: [0, 0, 0] },
];

describe('FlatParams', () => {
  it('lays parameters out at VIEW_ALIGN offsets as trainable views of one buffer', async () => {
    const fp = new FlatParams(cpu, innerSpecs());
    expect(fp.entries.map((e) => e.offset)).toEqual(seq(8).map((i) => (i - 1) * VIEW_ALIGN));
    expect(fp.size).toBe(8 * VIEW_ALIGN);
    const w = fp.get('proj1.weight');
    expect(w.shape).toEqual([3, 3]);
    expect(w.requiresGrad).toBe(true);
    expect([...(await w.read())]).toEqual(seq(9, 0.1).map(Math.fround));
    (cpu.data(fp.data) as Float32Array)[2 * VIEW_ALIGN] = 42; // the view shares the storage
    expect((await w.read())[0]).toBe(42);
    const mask = await fp.decayMask.read();
    expect(fp.entries.filter((e) => e.decay).map((e) => e.name)).toEqual(['proj1.weight', 'proj2.weight']);
    expect(mask.reduce((a, b) => a + b, 0)).toBe(18);
  });

  it('puts biases and norm parameters in the no-decay group by name and rank', () => {
    expect(defaultDecay('proj1.weight', [4, 4])).toBe(true);
    expect(defaultDecay('residual_proj.weight', [4, 8])).toBe(true);
    expect(defaultDecay('proj1.bias', [4])).toBe(false);
    expect(defaultDecay('ln_source.weight', [4])).toBe(false);
    expect(defaultDecay('blocks.0.ln_1.weight', [4, 4])).toBe(false);
    expect(defaultDecay('model.norm.weight', [4, 4])).toBe(false);
    expect(defaultDecay('kernel.weight', [4, 4])).toBe(true);
    const fp = new FlatParams(cpu, [{ name: 'a', shape: [2, 2], init: [1, 2, 3, 4], decay: false }], { decay: () => true });
    expect(fp.entries[0].decay).toBe(false);
  });

  it('gathers tape gradients into the flat buffer, copying or accumulating, and zeroes', async () => {
    const fp = new FlatParams(f64, [
      { name: 'w', shape: [2, 3], init: seq(6) },
      { name: 'b', shape: [3], init: [1, 1, 1] },
      { name: 'unused', shape: [2], init: [5, 5] },
    ]);
    const x = f64.fromValues([1, 2, 3, 4, 5, 6], [2, 3]);
    const run = async () => {
      const tape = new Tape();
      // L = sum(x * w + b): dL/dw = x, dL/db = 2 (b broadcasts over 2 rows)
      const loss = tape.run(() => F.sum(F.add(F.mul(x, fp.get('w')), fp.get('b'))));
      await tape.backward(loss);
      tape.dispose();
    };
    await run();
    fp.gatherGrads();
    expect(fp.get('w').grad).toBeNull();
    let g = await fp.export('grad');
    expect([...g.get('w')!]).toEqual([1, 2, 3, 4, 5, 6]);
    expect([...g.get('b')!]).toEqual([2, 2, 2]);
    expect([...g.get('unused')!]).toEqual([0, 0]);
    await run();
    fp.gatherGrads({ accumulate: true });
    g = await fp.export('grad');
    expect([...g.get('w')!]).toEqual([2, 4, 6, 8, 10, 12]);
    expect([...g.get('b')!]).toEqual([4, 4, 4]);
    await run();
    fp.zeroGrad();
    expect(fp.get('b').grad).toBeNull();
    expect((await fp.grad.read()).every((v) => v === 0)).toBe(true);
  });

  it('round-trips through export/import and rejects bad checkpoints without writing', async () => {
    const fp = new FlatParams(cpu, innerSpecs());
    const saved = await fp.export();
    expect([...saved.keys()]).toEqual(innerSpecs().map((s) => s.name));
    const other = new FlatParams(cpu, innerSpecs().map((s) => ({ ...s, init: s.init.map(() => 0) })));
    other.import(saved);
    expect([...(await other.data.read())]).toEqual([...(await fp.data.read())]);
    const before = await other.data.read();
    const bad = new Map(saved);
    bad.set('proj2.bias', new Float32Array(4));
    expect(() => other.import(bad)).toThrow(/expected 3/);
    expect(() => other.import(new Map([['nope', [1]]]))).toThrow(/unknown parameter 'nope'/);
    expect(() => other.import(new Map([['proj1.bias', [7, 8, 9]]]))).toThrow(/missing/);
    expect([...(await other.data.read())]).toEqual([...before]);
    other.import(new Map([['proj1.bias', [7, 8, 9]]]), { partial: true });
    expect([...(await other.get('proj1.bias').read())]).toEqual([7, 8, 9]);
    other.import(new Map([['proj1.bias', [1, 2, 3]]]), { part: 'm', partial: true });
    expect([...(await other.export('m')).get('proj1.bias')!]).toEqual([1, 2, 3]);
  });

  it('rejects duplicate names and wrong initial value counts', () => {
    expect(
      () =>
        new FlatParams(cpu, [
          { name: 'a', shape: [2], init: [1, 2] },
          { name: 'a', shape: [1], init: [1] },
        ]),
    ).toThrow(InvalidArgument);
    expect(() => new FlatParams(cpu, [{ name: 'a', shape: [2, 2], init: [1, 2] }])).toThrow(/4 elements/);
    expect(() => new FlatParams(cpu, []).get('x')).toThrow(/no parameter 'x'/);
  });

  it('trains: gatherGrads -> clip -> AdamW lowers a masked cosine loss', async () => {
    const rng = new Rng(2);
    const fp = new FlatParams(cpu, [{ name: 'w', shape: [4, 8], init: rng.normals(32) }]);
    const target = cpu.fromValues(rng.normals(32), [4, 8]);
    const mask = cpu.fromValues([1, 1, 0, 1], [4]);
    const opt = new F.AdamW([fp], { weightDecay: 0.01 });
    const losses: number[] = [];
    for (let s = 0; s < 30; s++) {
      opt.zeroGrad();
      const tape = new Tape();
      const loss = tape.run(() => F.cosineLoss(fp.get('w'), target, mask));
      losses.push((await loss.read())[0]);
      await tape.backward(loss);
      tape.dispose();
      opt.gather();
      opt.step(0.1).dispose();
    }
    expect(losses.every((l, i) => i === 0 || l < losses[i - 1])).toBe(true);
    expect(losses[29]).toBeLessThan(0.25 * losses[0]);
    // row 2 is masked out: its gradient is 0, so only weight decay moved it
    const w = await fp.get('w').read();
    const w0 = new Rng(2).normals(32);
    assertClose(w.slice(16, 24), w0.slice(16, 24).map((v) => v * (1 - 0.1 * 0.01) ** 30), { atol: 1e-6, rtol: 1e-5 }, 'masked row');
  });

  it('allocates only the values up front: gradient, moments and mask come with their first use', async () => {
    const fp = new FlatParams(f64, innerSpecs());
    expect(fp.allocated).toEqual([]);
    // a frozen module read on a tape, as an inner link is in outer training: still the values only
    for (const t of fp.list()) t.requiresGrad = false;
    const x = f64.fromValues(seq(3), [1, 3]);
    x.requiresGrad = true;
    const tape = new Tape();
    const y = tape.run(() => F.sum(F.matmul(x, fp.get('proj1.weight'), { transB: true })));
    await tape.backward(y);
    tape.dispose();
    fp.zeroGrad();
    fp.resetOptimizerState();
    expect(fp.allocated).toEqual([]);
    // the gradient buffer reads as zeros when first asked for; training brings the rest
    expect(Array.from(await fp.grad.read()).every((v) => v === 0)).toBe(true);
    expect(fp.allocated).toEqual(['grad']);
    for (const t of fp.list()) t.requiresGrad = true;
    const opt = new F.AdamW([fp], { weightDecay: 0.01 });
    const tape2 = new Tape();
    const loss = tape2.run(() => F.sum(F.matmul(x, fp.get('proj1.weight'), { transB: true })));
    await tape2.backward(loss);
    tape2.dispose();
    opt.gather();
    opt.step(0.1).dispose();
    expect(fp.allocated).toEqual(['grad', 'm', 'v', 'decayMask']);
    // proj1.weight decays, the rest is masked out of decay (the mask built on first use)
    const mask = Array.from(await fp.decayMask.read());
    const w = fp.entries.find((e) => e.name === 'proj1.weight')!;
    expect(mask.slice(w.offset, w.offset + 9)).toEqual(Array(9).fill(1));
    expect(mask.reduce((a, b) => a + b, 0)).toBe(2 * 9);
    fp.dispose();
    expect(fp.allocated).toEqual([]);
  });
});
