/**
 * Trainable decoders on the CPU: weight gradients of lmLoss against central finite differences (f64,
 * every family, tied and untied), HF-style initialisation, overfitting one sequence with AdamW, and the
 * save → load round trip through model.safetensors.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildTinyTokenizer } from '../../scripts/tiny-system/tokenizer';
import { Tape, noGrad } from '../autograd';
import { AdamW } from '../autograd/ops/optim';
import { f32ToBf16Bits } from '../formats/dtype';
import { openCheckpoint } from '../formats/safetensors-sharded';
import { Rng } from '../util/rng';
import { CpuBackend } from '../tensor/cpu';
import { FAMILIES } from './config';
import { Decoder } from './decoder';
import { lmLoss } from './lm-loss';
import { tinyConfig, tinyTensors } from '../testing/model';
import { createTrainableDecoder, decoderStateDict, saveDecoderCheckpoint } from './trainable';
import { attentionLayer, loadDecoderWeights, weightSpecs } from './weights';

const data = (cpu: CpuBackend, t: Parameters<CpuBackend['data']>[0]) => cpu.data(t) as Float64Array;

describe.each(FAMILIES)('trainable %s decoder: weight gradients (f64 finite differences)', (family) => {
  it.each([false, true])('tied embeddings %s: sampled coordinates of every tensor match central differences', async (tied) => {
    const config = tinyConfig(family, { num_hidden_layers: 1, tie_word_embeddings: tied });
    const cpu = new CpuBackend('f64');
    const { decoder, params } = createTrainableDecoder(config, cpu, { seed: 3 });
    // larger-than-init values (norms ≠ 1, biases ≠ 0) so that every factor of each gradient matters
    params.import(new Map([...tinyTensors(config, 5)].map(([n, t]) => [n, t.values])));
    const ids = [7, 30, 7, 12];
    const mask = [1, 1, 0, 1]; // the third token is not a target
    const loss = () => noGrad(() => {
      const l = lmLoss(decoder, ids, mask);
      const v = data(cpu, l)[0];
      l.dispose();
      return v;
    });

    const tape = new Tape();
    const l = tape.run(() => lmLoss(decoder, ids, mask));
    await tape.backward(l);
    tape.dispose();
    params.gatherGrads();
    const grad = Float64Array.from(data(cpu, params.grad));
    const flat = data(cpu, params.data);

    const rng = new Rng(9);
    const eps = 1e-5;
    let worst = 0;
    let peak = 0;
    let checked = 0;
    let nonzero = 0;
    for (const e of params.entries) {
      const picks = [rng.int(e.numel), rng.int(e.numel), rng.int(e.numel)];
      // the embedding: a row the input reads (and, tied, the head scores) and a row only the head uses
      if (e.name === 'model.embed_tokens.weight') picks.push(30 * config.hidden + 5, 40 * config.hidden + 2);
      for (const i of picks) {
        const at = e.offset + i;
        const keep = flat[at];
        flat[at] = keep + eps;
        const lp = loss();
        flat[at] = keep - eps;
        const lm = loss();
        flat[at] = keep;
        const numeric = (lp - lm) / (2 * eps);
        worst = Math.max(worst, Math.abs(numeric - grad[at]));
        peak = Math.max(peak, Math.abs(numeric));
        checked++;
        if (Math.abs(grad[at]) > 1e-6) nonzero++;
        expect(Math.abs(grad[at] - numeric), `${e.name}[${i}] analytic ${grad[at]} numeric ${numeric}`).toBeLessThan(
          1e-8 + 1e-5 * Math.abs(numeric),
        );
      }
    }
    // every tensor was sampled, most sampled gradients are nonzero (a dropped weight gradient would read 0)
    expect(checked).toBe(3 * params.entries.length + 2);
    expect(nonzero).toBeGreaterThan(checked * 0.8);
    expect(worst / peak).toBeLessThan(1e-6);
    params.dispose();
    decoder.dispose();
  });
});

describe('trainable decoder: initialisation and state dict', () => {
  it('inits like HF _init_weights (normal 0.02, ones, zeros) and ties lm_head to the embedding view', async () => {
    const tied = tinyConfig('qwen2'); // qwen2 tiny is tied and has q/k/v biases
    const cpu = new CpuBackend('f32');
    const { decoder, params } = createTrainableDecoder(tied, cpu, { seed: 1 });
    expect(decoder.weights.lmHead).toBe(decoder.weights.embed);
    expect(params.entries.map((e) => e.name)).toEqual(weightSpecs(tied).map((s) => s.name));
    expect(params.entries.some((e) => e.name === 'lm_head.weight')).toBe(false);
    const v = await params.export();
    const emb = v.get('model.embed_tokens.weight')!;
    const mean = emb.reduce((a, b) => a + b, 0) / emb.length;
    const std = Math.sqrt(emb.reduce((a, b) => a + (b - mean) ** 2, 0) / emb.length);
    expect(Math.abs(mean)).toBeLessThan(0.002);
    expect(std).toBeGreaterThan(0.019);
    expect(std).toBeLessThan(0.021);
    expect([...v.get('model.layers.0.input_layernorm.weight')!]).toEqual(new Array(32).fill(1));
    expect([...v.get('model.layers.0.self_attn.q_proj.bias')!]).toEqual(new Array(32).fill(0));
    // decay: matrices yes, norms and biases no
    const decay = Object.fromEntries(params.entries.map((e) => [e.name, e.decay]));
    expect(decay['model.layers.0.self_attn.q_proj.weight']).toBe(true);
    expect(decay['model.embed_tokens.weight']).toBe(true);
    expect(decay['model.layers.0.self_attn.q_proj.bias']).toBe(false);
    expect(decay['model.norm.weight']).toBe(false);
    // the same seed gives the same weights
    const again = createTrainableDecoder(tied, cpu, { seed: 1 });
    expect((await again.params.export()).get('model.layers.1.mlp.down_proj.weight')).toEqual(v.get('model.layers.1.mlp.down_proj.weight'));
    const sd = await decoderStateDict(params, 'bf16');
    expect(sd.get('model.norm.weight')).toEqual({
      dtype: 'BF16',
      shape: [32],
      bytes: new Uint8Array(new Uint16Array(32).fill(0x3f80).buffer),
    });
    params.dispose();
    again.params.dispose();
  });
});

describe('trainable decoder: training and checkpoints', () => {
  it('a 2-layer hidden-32 decoder over the tiny vocabulary overfits a 20-token sequence in 100 AdamW steps', async () => {
    const tok = buildTinyTokenizer({ merges: 300 }).tokenizerJson as { model: { vocab: Record<string, number> }; added_tokens: unknown[] };
    const V = Object.keys(tok.model.vocab).length + tok.added_tokens.length;
    const config = tinyConfig('llama', { vocab_size: V, hidden_size: 32, num_hidden_layers: 2, tie_word_embeddings: true });
    const cpu = new CpuBackend('f32');
    const { decoder, params } = createTrainableDecoder(config, cpu, { seed: 2 });
    const rng = new Rng(4);
    const ids = Array.from({ length: 20 }, () => rng.int(V));
    const opt = new AdamW([params], { weightDecay: 0.01, maxGradNorm: 1 });
    const losses: number[] = [];
    for (let step = 0; step < 100; step++) {
      opt.zeroGrad();
      const tape = new Tape();
      const loss = tape.run(() => lmLoss(decoder, ids));
      await tape.backward(loss);
      losses.push((await loss.read())[0]);
      tape.dispose();
      opt.gather();
      opt.step(1e-2).dispose();
    }
    // starts near ln V (uniform prediction)
    expect(Math.abs(losses[0] - Math.log(V))).toBeLessThan(0.05);
    const after = noGrad(() => lmLoss(decoder, ids));
    const final = (await after.read())[0];
    after.dispose();
    expect(final).toBeLessThan(0.1 * losses[0]);
    params.dispose();
    decoder.dispose();
  });

  it.each(FAMILIES)('%s: save -> loadDecoderWeights gives the same logits (f32 exact) and bf16 rounds each weight', async (family) => {
    const config = tinyConfig(family);
    const cpu = new CpuBackend('f32');
    const { decoder, params } = createTrainableDecoder(config, cpu, { seed: 6 });
    params.import(new Map([...tinyTensors(config, 8)].map(([n, t]) => [n, t.values])));
    const dir = await mkdtemp(join(tmpdir(), 'rmas-trainable-'));
    try {
      await saveDecoderCheckpoint(dir, params, { dtype: 'f32' });
      const store = await openCheckpoint(dir);
      const loaded = new Decoder(config, await loadDecoderWeights(config, store, cpu));
      await store.close();
      const ids = cpu.fromValues([1, 9, 33, 4, 47], [5], 'i32');
      const a = noGrad(() => decoder.forward({ inputIds: ids, logits: 'all' }).logits!);
      const b = loaded.forward({ inputIds: ids, logits: 'all' }).logits!;
      expect(Array.from(await b.read())).toEqual(Array.from(await a.read()));
      loaded.dispose();

      await saveDecoderCheckpoint(dir, params, { dtype: 'bf16' });
      const store16 = await openCheckpoint(dir);
      const w16 = await loadDecoderWeights(config, store16, cpu);
      await store16.close();
      const q = (await params.export()).get('model.layers.1.self_attn.q_proj.weight')!;
      expect(attentionLayer(w16.layers[1]).q.dtype).toBe('bf16');
      expect(Array.from(cpu.data(attentionLayer(w16.layers[1]).q) as Uint16Array)).toEqual(Array.from(q, (x) => f32ToBf16Bits(x)));
      w16.dispose();
    } finally {
      await rm(dir, { recursive: true, force: true });
      params.dispose();
      decoder.dispose();
    }
  });
});
