/**
 * GGUF decoders: each committed tiny model is converted here to GGUF the way convert_hf_to_gguf.py does
 * (llama.cpp tensor names, the q/k row permutation for `llama`, rope_freqs for llama3 scaling, f32 metadata)
 * and loaded back through loadDecoderFromGguf; it must compute what the safetensors folder computes.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { QK, roundF16 } from '../formats/dtype';
import { decode, encode } from '../formats/encode';
import { type GgufKv, type GgufWriterTensor, ggufBlocks, writeGguf } from '../formats/gguf-writer';
import { GGML_TYPE } from '../formats/gguf';
import { SafetensorsFile, toStorage } from '../formats/safetensors';
import { memorySource } from '../formats/sources';
import { ropeInvFreq } from '../kernels/rope';
import { CpuBackend } from '../tensor/cpu';
import type { Tensor } from '../tensor/tensor';
import { type DecoderConfig, parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import { f32Decimal, ggufTensorName, loadDecoderFromGguf, unpermuteRows } from './gguf';
import { ggufMetadata, scaledError } from './testing';
import { attentionLayer, loadDecoderWeights, weightSpecs } from './weights';

const ROOT = resolve(import.meta.dirname, '../../models/tiny');
const NAMES = ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny'] as const;
const IDS = [3, 17, 0, 41, 8, 29, 5, 460];
const vals = (t: Tensor) => Array.from((t.backend as CpuBackend).data(t));

/** convert_hf_to_gguf.py's permute, index by index from `reshape(n_head, 2, rows//n_head//2, cols).swapaxes(1, 2)`. */
function permuteForward(w: Float64Array, rows: number, cols: number, nHead: number): Float64Array {
  const half = rows / nHead / 2;
  const out = new Float64Array(w.length);
  // output array has shape (n_head, half, 2, cols); element (h, i, s, c) is input element (h, s, i, c)
  for (let h = 0; h < nHead; h++) for (let i = 0; i < half; i++) for (let s = 0; s < 2; s++) for (let c = 0; c < cols; c++) {
    out[((h * half + i) * 2 + s) * cols + c] = w[((h * 2 + s) * half + i) * cols + c];
  }
  return out;
}

async function folder(name: string) {
  const dir = join(ROOT, name);
  const config = parseDecoderConfig(await readFile(join(dir, 'config.json'), 'utf8'), `${name}/config.json`);
  const st = await SafetensorsFile.fromBytes(new Uint8Array(await readFile(join(dir, 'model.safetensors'))), `${name}/model.safetensors`);
  const values = new Map<string, { shape: number[]; v: Float64Array }>();
  for (const s of weightSpecs(config)) {
    const t = toStorage(await st.read(s.name), s.name);
    values.set(s.name, { shape: [...t.shape], v: Float64Array.from(decode(t.dtype, t.bytes, t.shape)) });
  }
  return { config, st, values };
}

/** llama3 divisors as convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors writes them. */
function ropeFreqs(c: DecoderConfig): Float32Array {
  const s = c.rope.scaling!;
  const [factor, low, high, old] = [s.factor!, s.low_freq_factor!, s.high_freq_factor!, s.original_max_position_embeddings!];
  const D = c.headDim;
  return Float32Array.from({ length: D / 2 }, (_, i) => {
    const wavelen = (2 * Math.PI) / (1 / c.rope.theta ** ((2 * i) / D));
    if (wavelen < old / high) return 1;
    if (wavelen > old / low) return factor;
    const smooth = (old / wavelen - low) / (high - low);
    return 1 / ((1 - smooth) / factor + smooth);
  });
}

interface Variant { quantize?: boolean; arch?: string; drop?: string; freqs?: Float32Array }

/** The GGUF llama.cpp's converter would write for this folder (F32 weights, F16 norms; optionally Q8_0 projections). */
function toGguf(c: DecoderConfig, values: Map<string, { shape: number[]; v: Float64Array }>, opt: Variant = {}): Uint8Array {
  const a = opt.arch ?? c.family;
  const kv: GgufKv[] = ggufMetadata(c, a);
  const tensors: GgufWriterTensor[] = [];
  const freqs = opt.freqs ?? (c.rope.scaling ? ropeFreqs(c) : null);
  if (freqs) tensors.push({ name: 'rope_freqs.weight', ne: [freqs.length], type: GGML_TYPE.F32, data: new Uint8Array(freqs.buffer.slice(0)) });
  for (const s of weightSpecs(c)) {
    const name = ggufTensorName(s.name)!;
    if (name === opt.drop) continue;
    let { v } = values.get(s.name)!;
    const shape = s.shape;
    const qk = /\.attn_([qk])\./.exec(name);
    if (c.family === 'llama' && qk) {
      const cols = shape.length === 2 ? shape[1] : 1;
      v = permuteForward(v, shape[0], cols, qk[1] === 'q' ? c.heads : c.kvHeads);
    }
    const dtype = s.kind === 'norm' ? 'f16' : opt.quantize && s.kind === 'proj' && shape[1] % QK === 0 ? 'q8_0' : 'f32';
    const { type, data } = ggufBlocks(dtype, encode(dtype, v, shape), shape);
    tensors.push({ name, ne: [...shape].reverse(), type, data });
  }
  return writeGguf(kv, tensors);
}

describe('the q/k row permutation', () => {
  it('unpermuteRows inverts convert_hf_to_gguf.py permute (rows of any byte width)', () => {
    const rows = 8, cols = 3, nHead = 2;
    const w = Float64Array.from({ length: rows * cols }, (_, i) => i);
    const p = permuteForward(w, rows, cols, nHead);
    // per head of 4 rows: HF rows [0, 1 | 2, 3] interleave to [0, 2, 1, 3]
    expect(Array.from({ length: rows }, (_, r) => p[r * cols] / cols)).toEqual([0, 2, 1, 3, 4, 6, 5, 7]);
    const bytes = new Uint8Array(Float32Array.from(p).buffer);
    expect(Array.from(new Float32Array(unpermuteRows(bytes, rows, cols * 4, nHead).buffer))).toEqual(Array.from(w));
    // a 1-element row (a bias)
    const b = permuteForward(Float64Array.from({ length: 12 }, (_, i) => i), 12, 1, 3);
    expect(Array.from(new Float32Array(unpermuteRows(new Uint8Array(Float32Array.from(b).buffer), 12, 4, 3).buffer))).toEqual([...Array(12).keys()]);
  });

  it('f32Decimal recovers the decimal a config meant from its f32', () => {
    expect([1e-5, 1e-6, 500000, 1e6, 0.1].map((v) => f32Decimal(Math.fround(v)))).toEqual([1e-5, 1e-6, 500000, 1e6, 0.1]);
  });
});

describe.each(NAMES)('GGUF conversion of %s', (name) => {
  it('config equals config.json for the fields GGUF carries', async () => {
    const { config, values } = await folder(name);
    const g = await loadDecoderFromGguf(memorySource(toGguf(config, values), `${name}.gguf`), new CpuBackend('f32'));
    // GGUF keeps one eos id, no saved dtype and no sliding window (the tiny models use none)
    expect(g.config).toEqual({ ...config, eosTokenIds: [config.eosTokenIds[0]], savedDtype: null, slidingWindow: null });
    expect(ropeInvFreq(g.config.rope)).toEqual(ropeInvFreq(config.rope));
    g.weights.dispose();
  });

  it.each(['f32', 'f64'] as const)('F32/F16 GGUF: hidden states and logits equal the safetensors model exactly (%s)', async (precision) => {
    const { config, st, values } = await folder(name);
    const cpu = new CpuBackend(precision);
    // F16 norms hold the bf16 values exactly (all are normal numbers near 1)
    for (const s of weightSpecs(config).filter((x) => x.kind === 'norm')) expect(values.get(s.name)!.v.every((v) => roundF16(v) === v)).toBe(true);
    const ref = new Decoder(config, await loadDecoderWeights(config, st, cpu));
    const g = await loadDecoderFromGguf(memorySource(toGguf(config, values), `${name}.gguf`), cpu);
    const m = new Decoder(g.config, g.weights);
    const ids = cpu.fromValues(IDS, [IDS.length], 'i32');
    const a = ref.forward({ inputIds: ids, logits: 'all' });
    const b = m.forward({ inputIds: ids, logits: 'all' });
    expect(vals(b.hidden)).toEqual(vals(a.hidden));
    expect(vals(b.logits!)).toEqual(vals(a.logits!));
    ref.dispose(); m.dispose();
  });

  it('Q8_0 GGUF: q8_0 blocks pass through unchanged; logits within the q8_0 bound', async () => {
    const { config, st, values } = await folder(name);
    const cpu = new CpuBackend('f64');
    const f = await loadDecoderFromGguf(memorySource(toGguf(config, values), `${name}.gguf`), cpu);
    const g = await loadDecoderFromGguf(memorySource(toGguf(config, values, { quantize: true }), `${name}-q8.gguf`), cpu);
    // the loaded q/k (un-permuted from quantized rows) equal the HF tensor quantized directly
    const q = values.get('model.layers.1.self_attn.q_proj.weight')!;
    if (config.hidden % QK === 0) {
      expect(attentionLayer(g.weights.layers[1]).q.dtype).toBe('q8_0');
      expect(Array.from(await cpu.readBytes(attentionLayer(g.weights.layers[1]).q))).toEqual(Array.from(encode('q8_0', q.v, q.shape)));
    }
    expect(attentionLayer(g.weights.layers[0]).o.dtype).toBe('q8_0');
    const ids = cpu.fromValues(IDS, [IDS.length], 'i32');
    const a = new Decoder(f.config, f.weights).forward({ inputIds: ids, logits: 'all' });
    const b = new Decoder(g.config, g.weights).forward({ inputIds: ids, logits: 'all' });
    // decoder.test.ts measures q8_0 logits at 1.0-1.2e-2 of the peak on random tiny models; same bound here
    expect(scaledError(vals(b.logits!), vals(a.logits!))).toBeLessThan(3e-2);
    if (config.hidden % QK === 0 && config.intermediate % QK === 0) {
      // every projection quantizable: identical to quantize-on-load from the safetensors folder
      const r = new Decoder(config, await loadDecoderWeights(config, st, cpu, { quantize: 'q8_0' }));
      expect(vals(b.logits!)).toEqual(vals(r.forward({ inputIds: ids, logits: 'all' }).logits!));
    }
    expect(g.weights.totalBytes).toBeLessThan(f.weights.totalBytes);
  });
});

describe('GGUF errors name the file', () => {
  it('missing tensor, unknown architecture, unmatched rope_freqs', async () => {
    const { config, values } = await folder('llama-tiny');
    const cpu = new CpuBackend('f32');
    const load = (v: Variant, n: string) => loadDecoderFromGguf(memorySource(toGguf(config, values, v), n), cpu);
    await expect(load({ drop: 'blk.1.ffn_up.weight' }, 'gap.gguf')).rejects.toMatchObject({
      name: 'CorruptCheckpoint', message: expect.stringMatching(/gap\.gguf lacks 1 tensor.*model\.layers\.1\.mlp\.up_proj\.weight/),
    });
    await expect(load({ arch: 'gpt2' }, 'gpt.gguf')).rejects.toMatchObject({
      name: 'UnknownModelType', message: expect.stringMatching(/gpt\.gguf: general\.architecture "gpt2" is not supported/),
    });
    await expect(load({ freqs: Float32Array.from([1, 1.5, 3, 7, 8, 8, 8, 8]) }, 'odd.gguf')).rejects.toMatchObject({
      name: 'UnsupportedFeature', message: expect.stringMatching(/odd\.gguf: rope_freqs\.weight/),
    });
  });
});
