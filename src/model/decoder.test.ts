/**
 * Decoder on the CPU backend: weights written as bf16 safetensors in memory and loaded through the loader,
 * checked against the plain-JS f64 reference (testing.ts), cached vs whole-sequence runs, inputsEmbeds vs
 * inputIds, the gradient to inputsEmbeds (finite differences), quantized logits and loader errors.
 */
import { describe, expect, it } from 'vitest';
import { Tape, gradcheck } from '../autograd';
import { SafetensorsFile } from '../formats/safetensors';
import { CpuBackend } from '../tensor/cpu';
import type { Tensor } from '../tensor/tensor';
import { FAMILIES } from './config';
import { Decoder } from './decoder';
import { bf16Tensor, referenceEmbed, referenceForward, scaledError, tinyCheckpoint, tinyConfig, tinyTensors } from '../testing/model';
import { formatWeightBytes, loadDecoderWeights, weightSpecs } from './weights';
import { decode, encode } from '../formats/encode';
import { writeSafetensors } from '../formats/safetensors';

const IDS = [3, 17, 0, 41, 8, 29, 5];
const vals = (t: Tensor) => Float64Array.from((t.backend as CpuBackend).data(t) as Float64Array);

async function build(
  family: (typeof FAMILIES)[number],
  precision: 'f64' | 'f32',
  opts: { quantize?: 'q8_0' | 'q4_0'; over?: Record<string, unknown>; cpu?: CpuBackend } = {},
) {
  const config = tinyConfig(family, opts.over);
  const tensors = tinyTensors(config, 11);
  const cpu = opts.cpu ?? new CpuBackend(precision);
  const weights = await loadDecoderWeights(config, await tinyCheckpoint(tensors), cpu, { quantize: opts.quantize });
  return { config, tensors, cpu, model: new Decoder(config, weights) };
}

describe.each(FAMILIES)('decoder %s (CPU)', (family) => {
  it('hidden states and logits equal the f64 reference; inputsEmbeds = embed(ids) gives the same', async () => {
    const { config, tensors, cpu, model } = await build(family, 'f64');
    const ids = cpu.fromValues(IDS, [IDS.length], 'i32');
    const ref = referenceForward(config, tensors, referenceEmbed(config, tensors, IDS));
    const a = model.forward({ inputIds: ids, logits: 'all' });
    // measured ≈ 1e-15 (summation order only)
    expect(scaledError(vals(a.hidden), ref.hidden)).toBeLessThan(1e-9);
    expect(scaledError(vals(a.logits!), ref.logits)).toBeLessThan(1e-9);

    const e = model.embed(ids);
    expect(vals(e)).toEqual(referenceEmbed(config, tensors, IDS)); // exactly the stored rows
    const b = model.forward({ inputsEmbeds: e, logits: [0, 4, 6] });
    expect(vals(b.hidden)).toEqual(vals(a.hidden));
    const V = config.vocabSize;
    const picked = [0, 4, 6].flatMap((r) => [...ref.logits.subarray(r * V, (r + 1) * V)]);
    expect(scaledError(vals(b.logits!), picked)).toBeLessThan(1e-9);
    const last = model.forward({ inputIds: ids, logits: 'last' });
    expect(vals(last.logits!)).toEqual(vals(a.logits!).subarray((IDS.length - 1) * V));
    model.dispose();
  });

  it.each(['f64', 'f32'] as const)('chunked with a KV cache equals the whole sequence (%s)', async (precision) => {
    const { cpu, model } = await build(family, precision);
    const whole = model.forward({ inputIds: cpu.fromValues(IDS, [IDS.length], 'i32'), logits: 'all' });
    const cache = model.newCache(16);
    const parts: number[] = [];
    const logits: number[] = [];
    // prefill 3, then 1, then 3 tokens: covers prefill, decode and chunked prefill against a cache
    for (const [s, e] of [[0, 3], [3, 4], [4, 7]]) {
      const out = model.forward({ inputIds: cpu.fromValues(IDS.slice(s, e), [e - s], 'i32'), cache, logits: 'all' });
      parts.push(...vals(out.hidden));
      logits.push(...vals(out.logits!));
    }
    expect(cache.length).toBe(IDS.length);
    // f64: identical arithmetic up to summation order; f32: rounding of one chunked softmax vs another
    const tol = precision === 'f64' ? 1e-10 : 1e-5;
    expect(scaledError(parts, vals(whole.hidden))).toBeLessThan(tol);
    expect(scaledError(logits, vals(whole.logits!))).toBeLessThan(tol);
    // explicit positions equal to the defaults change nothing
    cache.reset();
    const again = model.forward({ inputIds: cpu.fromValues(IDS, [IDS.length], 'i32'), cache, positions: IDS.map((_, i) => i) });
    expect(scaledError(vals(again.hidden), vals(whole.hidden))).toBeLessThan(tol);
    cache.dispose();
    model.dispose();
  });

  it('the gradient to inputsEmbeds passes gradcheck (1 layer, 3 tokens)', async () => {
    const { cpu, model } = await build(family, 'f64', { over: { num_hidden_layers: 1 } });
    const e = model.embed(cpu.fromValues([5, 1, 30], [3], 'i32'));
    e.requiresGrad = true;
    const r = await gradcheck((x) => model.forward({ inputsEmbeds: x }).hidden, [e], { eps: 1e-6, atol: 1e-7, rtol: 1e-5 });
    expect(r.ok, r.message).toBe(true);
    model.dispose();
  });
});

describe('decoder tape and cache', () => {
  it('backward through logits rows reaches inputsEmbeds; backward through a cache is refused', async () => {
    const { cpu, model } = await build('qwen3', 'f64', { over: { num_hidden_layers: 1 } });
    const e = model.embed(cpu.fromValues([5, 1, 30], [3], 'i32'));
    e.requiresGrad = true;
    const r = await gradcheck((x) => model.forward({ inputsEmbeds: x, logits: [2, 0] }).logits!, [e], { atol: 1e-7, rtol: 1e-5 });
    expect(r.ok, r.message).toBe(true);
    const tape = new Tape();
    expect(() => tape.run(() => model.forward({ inputsEmbeds: e, cache: model.newCache(4) }))).toThrow(/KV cache/);
    tape.dispose();
    model.dispose();
  });
});

describe('quantized weights', () => {
  // Bounds on max |Δlogit| / max |logit| against the bf16 model. Measured with these random weights:
  // q8_0 1.0-1.2e-2, q4_0 1.8-2.3e-1 over the three families. Both are quantization noise, not a layout
  // slip: the ratio (≈ 16) is the ratio of the quantization steps (1/127 vs 1/8 of a block's peak), and the
  // exact check below holds. Random tiny weights are harsher than trained ones (no outliers to absorb, and
  // the logit peak is small); the bounds leave 2-2.5x margin.
  const BOUND = { q8_0: 3e-2, q4_0: 0.5 } as const;
  // Qwen3.5 has no such bound here: with these random weights its logits move by 23% (q8_0) and 90% (q4_0) of
  // the peak, almost all from in_proj_qkv. Its DeltaNet normalises q, k and each head's output on its own, so
  // directions, not sizes, carry the signal, and random tiny heads have near-cancelling ones (an output o = (q·k)βv
  // with q·k near 0 at the first position flips with the noise). The exact check still holds for it.
  const CLOSE = (family: (typeof FAMILIES)[number], q: keyof typeof BOUND) => (family === 'qwen3_5' ? Infinity : BOUND[q]);
  it.each(FAMILIES)('%s: exact against dequantized weights; close to the unquantized model; memory shrinks', async (family) => {
    const base = await build(family, 'f64');
    const ids = base.cpu.fromValues(IDS, [IDS.length], 'i32');
    const want = vals(base.model.forward({ inputIds: ids, logits: 'all' }).logits!);
    const specs = new Map(weightSpecs(base.config).map((s) => [s.name, s]));
    for (const q of ['q8_0', 'q4_0'] as const) {
      const m = await build(family, 'f64', { quantize: q, cpu: base.cpu });
      const got = vals(m.model.forward({ inputIds: ids, logits: 'all' }).logits!);
      // the engine computes with exactly the dequantized weights
      const dq = (t: { values: Float64Array; shape: number[] }) =>
        ({ ...t, values: Float64Array.from(decode(q, encode(q, t.values, t.shape), t.shape)) });
      const deq = new Map([...m.tensors].map(([n, t]) => [n, specs.get(n)!.kind !== 'proj' ? t : dq(t)]));
      // a tied head reads a quantized copy of the table, the embedding lookup the table itself
      const tied = m.config.tieEmbeddings;
      expect(m.model.weights.lmHead === m.model.weights.embed, 'the tied head is a copy').toBe(false);
      if (tied) deq.set('lm_head.weight', dq(deq.get('model.embed_tokens.weight')!));
      const ref = referenceForward({ ...m.config, tieEmbeddings: false }, deq, referenceEmbed(m.config, deq, IDS));
      expect(scaledError(got, ref.logits)).toBeLessThan(1e-9);
      const err = scaledError(got, want);
      console.log(`${family} ${q}: logits error ${err.toExponential(2)} of peak; weights ${formatWeightBytes(m.model.weights)}`);
      expect(err).toBeLessThan(CLOSE(family, q));
      expect(m.model.weights.bytes[q]).toBeGreaterThan(0);
      expect(m.model.weights.totalBytes).toBeLessThan(base.model.weights.totalBytes);
      m.model.dispose();
    }
    base.model.dispose();
  });
});

describe('loader errors', () => {
  const config = tinyConfig('qwen2');
  const tensors = tinyTensors(config, 3);
  const file = (skip: string | null, reshape: [string, number[]] | null = null) => {
    const entries = [...tensors].filter(([n]) => n !== skip).map(([n, t]) => {
      const shape = reshape && reshape[0] === n ? reshape[1] : t.shape;
      return [n, bf16Tensor(shape, t.values)] as const;
    });
    return SafetensorsFile.fromBytes(writeSafetensors(entries), 'broken/model.safetensors');
  };
  const cpu = new CpuBackend('f32');

  it('a missing tensor is a CorruptCheckpoint naming the file, the tensor and its shape', async () => {
    const src = await file('model.layers.1.self_attn.k_proj.bias');
    await expect(loadDecoderWeights(config, src, cpu)).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringMatching(/broken\/model\.safetensors.*"model\.layers\.1\.self_attn\.k_proj\.bias" \[16\]/),
    });
  });

  it('a wrong shape is a ShapeMismatch naming the file, the tensor and both shapes', async () => {
    const src = await file(null, ['model.layers.0.mlp.up_proj.weight', [32, 64]]);
    await expect(loadDecoderWeights(config, src, cpu)).rejects.toMatchObject({
      name: 'ShapeMismatch',
      message: expect.stringMatching(
        /broken\/model\.safetensors.*"model\.layers\.0\.mlp\.up_proj\.weight" has shape \[32, 64\].*\[64, 32\]/,
      ),
    });
  });

  it('loaded weights are frozen and memory is counted per dtype', async () => {
    const w = await loadDecoderWeights(config, await file(null), cpu);
    expect([w.embed, w.norm, ...Object.values(w.layers[0]).filter((t): t is Tensor => !!t)].every((t) => !t.requiresGrad)).toBe(true);
    // biases become f32, everything else stays bf16; tied: no lm_head
    const biasElems = 2 * (32 + 16 + 16);
    expect(w.bytes.f32).toBe(4 * biasElems);
    const all = [...tensors.values()].reduce((s, t) => s + t.values.length, 0);
    expect(w.bytes.bf16).toBe(2 * (all - biasElems));
    expect(w.lmHead).toBe(w.embed);
    w.dispose();
  });
});
