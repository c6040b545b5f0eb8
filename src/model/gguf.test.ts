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
import { type GgufKv, type GgufWriterTensor, ggufBlocks, writeGguf } from '../testing/gguf-writer';
import { GGML_TYPE, readGgufHeader } from '../formats/gguf';
import { SafetensorsFile, type StTensor, toStorage, writeSafetensors } from '../formats/safetensors';
import { memorySource } from '../formats/sources';
import { ropeInvFreq } from '../kernels/rope';
import { CpuBackend } from '../tensor/cpu';
import type { Tensor } from '../tensor/tensor';
import { type DecoderConfig, parseDecoderConfig } from './config';
import { Decoder } from './decoder';
import { ggufTensorName, ggufWeightSource, loadDecoderFromGguf, moveCols, unpermuteRows, vHeadAt } from './gguf';
import { decoderConfigFromGguf, f32Decimal } from './gguf-config';
import { ggufMetadata, scaledError, tinyCheckpoint, tinyConfig, tinyTensors } from '../testing/model';
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
  if (freqs)
    tensors.push({ name: 'rope_freqs.weight', ne: [freqs.length], type: GGML_TYPE.F32, data: new Uint8Array(freqs.buffer.slice(0)) });
  for (const s of weightSpecs(c)) {
    const name = ggufTensorName(s.name, c.family)!;
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
    expect(Array.from(new Float32Array(unpermuteRows(new Uint8Array(Float32Array.from(b).buffer), 12, 4, 3).buffer))).toEqual([
      ...Array(12).keys(),
    ]);
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
    for (const s of weightSpecs(config).filter((x) => x.kind === 'norm'))
      expect(values.get(s.name)!.v.every((v) => roundF16(v) === v)).toBe(true);
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

describe('GGUF sizes are bounded before anything is sized by them', () => {
  it('block_count 1e9 is refused at once naming the key, value and limit; block_count past the tensors names the layers held', async () => {
    const { config, values } = await folder('llama-tiny');
    const embd = values.get('model.embed_tokens.weight')!;
    const header = (over: Partial<DecoderConfig>) => {
      const { type, data } = ggufBlocks('f32', encode('f32', embd.v, embd.shape), embd.shape);
      const bytes = writeGguf(ggufMetadata({ ...config, ...over }, 'llama'), [
        { name: 'token_embd.weight', ne: [...embd.shape].reverse(), type, data },
      ]);
      return readGgufHeader(memorySource(bytes, 'huge.gguf'));
    };
    const t0 = performance.now();
    await expect(decoderConfigFromGguf(await header({ layers: 1e9 }))).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: "huge.gguf: 'llama.block_count' is 1000000000, above the limit of 1024 this engine accepts (released models stay far " +
        "below it); convert the model again with llama.cpp's convert_hf_to_gguf.py",
    });
    expect(performance.now() - t0).toBeLessThan(1000);
    await expect(decoderConfigFromGguf(await header({ hidden: 0 }))).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringMatching(/huge\.gguf: metadata "llama\.embedding_length" must be a positive integer, got 0/),
    });
    // one layer more than the file holds: refused by loadDecoderWeights before any per-layer list is built
    const cpu = new CpuBackend('f32');
    const file = await readGgufHeader(memorySource(toGguf(config, values), 'two-layers.gguf'));
    const none = [false, false, false];
    const c3 = { ...(await decoderConfigFromGguf(file)), layers: 3, windowLayers: none, linearLayers: none };
    await expect(loadDecoderWeights(c3, ggufWeightSource(file, c3), cpu)).rejects.toMatchObject({
      name: 'InvalidModelConfig',
      message: 'two-layers.gguf: the config says num_hidden_layers 3 (block_count in GGUF), but the checkpoint holds 2 layer(s) ' +
        '(model.layers.2.input_layernorm.weight is missing); set num_hidden_layers to 2 if the config is wrong, or re-download the model',
    });
  });
});

// ---- Gemma 3 (gemma3) and Qwen3.5 (qwen35): the converter's changes, written here from llama.cpp's conversion/gemma.py,
// conversion/qwen.py, conversion/base.py and gguf-py/gguf/tensor_mapping.py (commit 82bb485) without gguf.ts's code ----

type Values = Map<string, { shape: number[]; values: Float64Array }>;
type OutType = 'f32' | 'f16' | 'bf16' | 'q8_0';
const TINY_IDS = [3, 17, 0, 41, 8, 29, 5, 47];
const GEMMA = { num_hidden_layers: 6, sliding_window_pattern: 6, query_pre_attn_scalar: 16 };

/** The llama.cpp name of a Hugging Face tensor (tensor_mapping.py for MODEL_TENSORS[GEMMA3] and [QWEN35]). */
function llamaCppName(hf: string): string {
  const fixed: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight',
    'model.norm.weight': 'output_norm.weight',
    'lm_head.weight': 'output.weight',
  };
  if (fixed[hf]) return fixed[hf];
  const [, bid, rest] = /^model\.layers\.(\d+)\.(.+)$/.exec(hf)!;
  const table: Record<string, string> = {
    'input_layernorm.weight': 'attn_norm.weight',
    'post_attention_layernorm.weight': 'post_attention_norm.weight',
    'pre_feedforward_layernorm.weight': 'ffn_norm.weight',
    'post_feedforward_layernorm.weight': 'post_ffw_norm.weight',
    'self_attn.q_proj.weight': 'attn_q.weight',
    'self_attn.k_proj.weight': 'attn_k.weight',
    'self_attn.v_proj.weight': 'attn_v.weight',
    'self_attn.o_proj.weight': 'attn_output.weight',
    'self_attn.q_norm.weight': 'attn_q_norm.weight',
    'self_attn.k_norm.weight': 'attn_k_norm.weight',
    'mlp.gate_proj.weight': 'ffn_gate.weight',
    'mlp.up_proj.weight': 'ffn_up.weight',
    'mlp.down_proj.weight': 'ffn_down.weight',
    'linear_attn.in_proj_qkv.weight': 'attn_qkv.weight',
    'linear_attn.in_proj_z.weight': 'attn_gate.weight',
    'linear_attn.in_proj_b.weight': 'ssm_beta.weight',
    'linear_attn.in_proj_a.weight': 'ssm_alpha.weight',
    'linear_attn.conv1d.weight': 'ssm_conv1d.weight',
    'linear_attn.A_log': 'ssm_a',
    'linear_attn.dt_bias': 'ssm_dt.bias',
    'linear_attn.norm.weight': 'ssm_norm.weight',
    'linear_attn.out_proj.weight': 'ssm_out.weight',
  };
  return `blk.${bid}.${table[rest]}`;
}

/**
 * `_reorder_v_heads(t, dim, num_k_heads, num_v_per_k, head_dim)` on the span of `dim` from `offset`: the reshape to
 * [nk, R, hd] and swap of the first two axes move index (k·R + r)·hd + i to (r·nk + k)·hd + i.
 */
function reorderV(v: Float64Array, shape: number[], dim: 0 | 1, nk: number, R: number, hd: number, offset = 0): Float64Array {
  const [rows, cols] = shape.length === 1 ? [shape[0], 1] : [shape[0], shape.slice(1).reduce((a, b) => a * b, 1)];
  const out = Float64Array.from(v);
  for (let k = 0; k < nk; k++) for (let r = 0; r < R; r++) for (let i = 0; i < hd; i++) {
    const from = offset + (k * R + r) * hd + i, to = offset + (r * nk + k) * hd + i;
    if (dim === 0) for (let c = 0; c < cols; c++) out[to * cols + c] = v[from * cols + c];
    else for (let row = 0; row < rows; row++) out[row * cols + to] = v[row * cols + from];
  }
  return out;
}

/** One Hugging Face tensor as the converter writes it: [name, values, row-major shape], or null when it is dropped. */
function convertTensor(
  c: DecoderConfig,
  hf: string,
  t: { shape: number[]; values: Float64Array },
  reorder: boolean,
): [string, Float64Array, number[]] {
  let v: Float64Array = Float64Array.from(t.values); // bf16 is made f32 before modify_tensors (exact)
  let shape = [...t.shape];
  const d = c.deltaNet;
  if (d && hf.includes('.linear_attn.') && reorder && d.valueHeads !== d.keyHeads) {
    // _LinearAttentionVReorderBase.modify_tensors, before Qwen3NextModel's
    const [nk, R, dv, qk] = [d.keyHeads, d.valueHeads / d.keyHeads, d.valueDim, 2 * d.keyHeads * d.keyDim];
    if (/in_proj_qkv|conv1d/.test(hf)) v = reorderV(v, shape, 0, nk, R, dv, qk);
    else if (hf.includes('in_proj_z')) v = reorderV(v, shape, 0, nk, R, dv);
    else if (/in_proj_[ab]|A_log|dt_bias/.test(hf)) v = reorderV(v, shape, 0, nk, R, 1);
    else if (hf.includes('out_proj')) v = reorderV(v, shape, 1, nk, R, dv);
  }
  if (hf.endsWith('.A_log')) v = v.map((a) => Math.fround(-Math.exp(a)));
  else if (hf.includes('conv1d')) shape = [shape[0], shape[2]];
  // Gemma3Model.norm_shift / Qwen3NextModel: every norm.weight but the DeltaNet's gets + 1 (in f32)
  else if (hf.endsWith('norm.weight') && !hf.endsWith('linear_attn.norm.weight')) v = v.map((w) => Math.fround(1 + w));
  return [llamaCppName(hf), v, shape];
}

/** The GGUF convert_hf_to_gguf.py --outtype `out` writes from a bf16 checkpoint `hf` of config `c`. */
function convertHf(
  c: DecoderConfig,
  hf: Values,
  out: OutType,
  opt: { reorder?: boolean; kv?: GgufKv[]; extra?: GgufWriterTensor[]; drop?: string } = {},
): Uint8Array {
  const tensors: GgufWriterTensor[] = [...(opt.extra ?? [])];
  for (const s of weightSpecs(c)) {
    const [name, v, shape] = convertTensor(c, s.name, hf.get(s.name)!, opt.reorder ?? true);
    if (name === opt.drop) continue;
    // prepare_tensors: 1-D tensors, norms, ssm_conv1d and names without .weight stay F32
    const keep = shape.length <= 1 || name.endsWith('_norm.weight') || name.includes('ssm_conv1d') || !name.endsWith('.weight');
    const dtype = keep ? 'f32' : out;
    const { type, data } = ggufBlocks(dtype, encode(dtype, v, shape), shape);
    tensors.push({ name, ne: [...shape].reverse(), type, data });
  }
  return writeGguf(opt.kv ?? ggufMetadata(c), tensors);
}

/**
 * A safetensors checkpoint that must compute exactly what the GGUF does: projections and the embedding as the
 * GGUF stores them (q8_0 as its f32 values), A_log as the f32 log(−ssm_a) the GGUF implies, the rest as in `hf`.
 */
function referenceCheckpoint(c: DecoderConfig, hf: Values, out: OutType) {
  const st = new Map<string, StTensor>();
  for (const s of weightSpecs(c)) {
    const { shape, values } = hf.get(s.name)!;
    let v: ArrayLike<number> = values;
    let dtype: 'f32' | 'f16' | 'bf16' = 'f32';
    if (s.kind === 'proj' || s.kind === 'embed') {
      if (out === 'q8_0') v = decode('q8_0', encode('q8_0', values, shape), shape);
      else dtype = out;
    }
    if (s.name.endsWith('.A_log')) v = values.map((a) => Math.fround(Math.log(-Math.fround(-Math.exp(a)))));
    st.set(s.name, { dtype: ({ f32: 'F32', f16: 'F16', bf16: 'BF16' } as const)[dtype], shape, bytes: encode(dtype, v, shape) });
  }
  return SafetensorsFile.fromBytes(writeSafetensors(st), 'reference.safetensors');
}

async function logitsOf(config: DecoderConfig, weights: Awaited<ReturnType<typeof loadDecoderWeights>>, ids = TINY_IDS) {
  const m = new Decoder(config, weights);
  const out = m.forward({ inputIds: weights.backend.fromValues(ids, [ids.length], 'i32'), logits: 'all' });
  const r = { hidden: vals(out.hidden), logits: vals(out.logits!) };
  m.dispose();
  return r;
}

const FAMILIES = [['gemma3', GEMMA], ['qwen3_5', {}]] as const;

describe.each(FAMILIES)('GGUF of tiny %s as llama.cpp writes it', (family, over) => {
  const config = tinyConfig(family, over);
  const hf = tinyTensors(config, 7);

  it('reads the config.json values back, with normOffset 0 for the stored 1 + w', async () => {
    // every stored 1 + w is exact in f32, so normOffset 0 multiplies by exactly 1 + w
    for (const s of weightSpecs(config).filter((x) => x.kind === 'norm'))
      expect(hf.get(s.name)!.values.every((w) => Math.fround(1 + w) === 1 + w)).toBe(true);
    const g = await loadDecoderFromGguf(memorySource(convertHf(config, hf, 'f32'), `${family}.gguf`), new CpuBackend('f32'));
    expect(g.config).toEqual({ ...config, normOffset: 0 });
    g.weights.dispose();
  });

  it.each(['f32', 'f16', 'bf16'] as const)(
    '%s GGUF: hidden states and logits equal the safetensors model exactly (f64 and f32 CPU)',
    async (out) => {
      for (const precision of ['f64', 'f32'] as const) {
        const cpu = new CpuBackend(precision);
        const g = await loadDecoderFromGguf(memorySource(convertHf(config, hf, out), `${family}-${out}.gguf`), cpu);
        const a = await logitsOf(config, await loadDecoderWeights(config, await referenceCheckpoint(config, hf, out), cpu));
        const b = await logitsOf(g.config, g.weights);
        expect(b.hidden).toEqual(a.hidden);
        expect(b.logits).toEqual(a.logits);
      }
    },
  );

  it('Q8_0 GGUF: every q8_0 tensor equals the Hugging Face tensor quantized directly; logits equal its values exactly', async () => {
    const cpu = new CpuBackend('f64');
    const g = await loadDecoderFromGguf(memorySource(convertHf(config, hf, 'q8_0'), `${family}-q8.gguf`), cpu);
    const src = ggufWeightSource(g.file, g.config);
    let quantized = 0;
    for (const s of weightSpecs(config).filter((x) => x.kind === 'proj' || x.kind === 'embed')) {
      const t = await src.readStorage!(s.name);
      expect(t.dtype).toBe('q8_0');
      const { shape, values } = hf.get(s.name)!;
      expect(t.bytes, s.name).toEqual(encode('q8_0', values, shape));
      quantized++;
    }
    expect(quantized).toBeGreaterThan(10);
    const a = await logitsOf(config, await loadDecoderWeights(config, await referenceCheckpoint(config, hf, 'q8_0'), cpu));
    expect((await logitsOf(g.config, g.weights)).logits).toEqual(a.logits);
  });
});

describe('GGUF of Qwen3.5 (qwen35): what the converter changes', () => {
  const config = tinyConfig('qwen3_5');
  const hf = tinyTensors(config, 7);
  const cpu = new CpuBackend('f64');

  it('the tiny model has more value heads than key heads, so the head order matters', async () => {
    expect(config.deltaNet).toMatchObject({ keyHeads: 2, valueHeads: 4 });
    const g = await loadDecoderFromGguf(memorySource(convertHf(config, hf, 'f32', { reorder: false }), 'grouped.gguf'), cpu);
    const a = await logitsOf(config, await loadDecoderWeights(config, await referenceCheckpoint(config, hf, 'f32'), cpu));
    // a file left in the grouped order is read as tiled: other heads meet, other logits
    expect(scaledError((await logitsOf(g.config, g.weights)).logits, a.logits)).toBeGreaterThan(1e-3);
  });

  it('A_log comes back within an f32 rounding; the logits within 1e-6 of the checkpoint itself', async () => {
    const g = await loadDecoderFromGguf(memorySource(convertHf(config, hf, 'bf16'), 'q35.gguf'), cpu);
    const aLog = (await ggufWeightSource(g.file, g.config).read('model.layers.0.linear_attn.A_log'));
    const back = new Float32Array(aLog.bytes.buffer, aLog.bytes.byteOffset, 4);
    hf.get('model.layers.0.linear_attn.A_log')!.values.forEach((a, i) =>
      expect(Math.abs(back[i] - a)).toBeLessThan(3e-7 * Math.max(1, Math.abs(a))),
    );
    const ref = await logitsOf(config, await loadDecoderWeights(config, await tinyCheckpoint(hf), cpu));
    expect(scaledError((await logitsOf(g.config, g.weights)).logits, ref.logits)).toBeLessThan(1e-6);
  });

  it('every tensor the engine needs has its GGUF name in the file (what the download plan looks up, src/store/plan.ts)', async () => {
    const file = await readGgufHeader(memorySource(convertHf(config, hf, 'bf16'), 'q35.gguf'));
    const names = new Set(file.tensors.map((t) => t.name));
    const missing = weightSpecs(config).map((s) => s.name).filter((n) => !names.has(ggufTensorName(n, config.family) ?? ''));
    expect(missing).toEqual([]);
  });

  it('a multi-token-prediction block after the decoder (nextn_predict_layers) is left out', async () => {
    const kv = ggufMetadata(config).map((e) => (e.key === 'qwen35.block_count' ? { ...e, value: config.layers + 1 } as GgufKv : e));
    kv.push({ key: 'qwen35.nextn_predict_layers', type: 'u32', value: 1 });
    const mtp = (name: string, n: number): GgufWriterTensor => ({ name, ne: [n], type: GGML_TYPE.F32, data: new Uint8Array(4 * n) });
    const g = await loadDecoderFromGguf(
      memorySource(
        convertHf(config, hf, 'f32', { kv, extra: [mtp('blk.2.attn_norm.weight', 32), mtp('blk.2.nextn.enorm.weight', 32)] }),
        'mtp.gguf',
      ),
      cpu,
    );
    expect(g.config.layers).toBe(config.layers);
    expect(g.config.linearLayers).toEqual(config.linearLayers);
    const a = await logitsOf(config, await loadDecoderWeights(config, await referenceCheckpoint(config, hf, 'f32'), cpu));
    expect((await logitsOf(g.config, g.weights)).logits).toEqual(a.logits);
  });
});

describe('GGUF of Gemma 3 (gemma3): what llama.cpp does not read from the file', () => {
  it('every tensor the engine needs has its GGUF name in the file (what the download plan looks up)', async () => {
    const config = tinyConfig('gemma3', { query_pre_attn_scalar: 16 });
    const file = await readGgufHeader(memorySource(convertHf(config, tinyTensors(config, 3), 'bf16'), 'g3.gguf'));
    const names = new Set(file.tensors.map((t) => t.name));
    expect(weightSpecs(config).map((s) => s.name).filter((n) => !names.has(ggufTensorName(n, config.family) ?? ''))).toEqual([]);
  });

  it('without sliding_window_pattern every 6th layer is global; a written pattern is read', async () => {
    // the tiny 2-layer model alternates (pattern 2): the converter keeps the window but not the pattern
    const config = tinyConfig('gemma3', { query_pre_attn_scalar: 16 });
    const hf = tinyTensors(config, 3);
    const cpu = new CpuBackend('f64');
    const plain = await loadDecoderFromGguf(memorySource(convertHf(config, hf, 'f32'), 'p6.gguf'), cpu);
    expect(plain.config.windowLayers).toEqual([true, true]);
    const kv = [...ggufMetadata(config), { key: 'gemma3.attention.sliding_window_pattern', type: 'u32', value: 2 } as GgufKv];
    const g = await loadDecoderFromGguf(memorySource(convertHf(config, hf, 'f32', { kv }), 'p2.gguf'), cpu);
    expect(g.config.windowLayers).toEqual([true, false]);
    const a = await logitsOf(config, await loadDecoderWeights(config, await referenceCheckpoint(config, hf, 'f32'), cpu));
    expect((await logitsOf(g.config, g.weights)).logits).toEqual(a.logits);
  });

  it('the attention scale is 1/√head_dim, or 1/√(hidden/heads) with 62 layers (the 27B), whatever query_pre_attn_scalar was', async () => {
    const config = tinyConfig('gemma3', { query_pre_attn_scalar: 12 });
    const header = (layers: number) => {
      const kv = ggufMetadata({ ...config, layers }).filter((e) => !e.key.endsWith('sliding_window'));
      const e = new Uint8Array(4 * config.vocabSize * config.hidden);
      return readGgufHeader(
        memorySource(
          writeGguf(kv, [{ name: 'token_embd.weight', ne: [config.hidden, config.vocabSize], type: GGML_TYPE.F32, data: e }]),
          'h.gguf',
        ),
      );
    };
    expect((await decoderConfigFromGguf(await header(2))).attnScale).toBe(16 ** -0.5);
    expect((await decoderConfigFromGguf(await header(62))).attnScale).toBe((32 / 4) ** -0.5);
  });
});

describe('moving value heads in quantized rows', () => {
  const rows = 3, cols = 64;
  const x = Float64Array.from({ length: rows * cols }, (_, i) => Math.sin(i * 1.7) * (1 + (i % 5)));
  it.each(['q8_0', 'q4_0'] as const)(
    '%s: a permutation within blocks keeps the blocks; across blocks it gives their exact f32 values',
    (dt) => {
      const t = { dtype: dt, shape: [rows, cols], bytes: encode(dt, x, [rows, cols]) };
      const values = decode(dt, t.bytes, t.shape);
      const expectMoved = (m: ReturnType<typeof moveCols>, from: (c: number) => number) => {
        const got = decode(m.dtype, m.bytes, m.shape);
        for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) expect(got[r * cols + c]).toBe(values[r * cols + from(c)]);
      };
      // value heads of 8 columns, 2 key heads × 4 (one block of 32 each side): stays inside its block
      const inBlock = (c: number) => (c < 32 ? vHeadAt(c >> 3, 2, 4) * 8 + (c & 7) : c);
      const a = moveCols(t, inBlock);
      expect(a.dtype).toBe(dt);
      expectMoved(a, inBlock);
      // 2 key heads × 8 value heads of 8 columns: heads cross the two blocks
      const across = (c: number) => vHeadAt(c >> 3, 2, 8) * 8 + (c & 7);
      const b = moveCols(t, across);
      expect(b.dtype).toBe('f32');
      expectMoved(b, across);
    },
  );
});

describe('GGUF errors for gemma3 and qwen35 name the file', () => {
  const config = tinyConfig('qwen3_5');
  const hf = tinyTensors(config, 7);
  const load = (name: string, h: Values, opt: Parameters<typeof convertHf>[3]) =>
    loadDecoderFromGguf(memorySource(convertHf(config, h, 'f32', opt), name), new CpuBackend('f32'));

  it('a mixture-of-experts Qwen, rope sections off the text axes, an ssm_a that is not −exp(A_log), ' +
    'a missing DeltaNet tensor', async () => {
    await expect(load('moe.gguf', hf, { kv: ggufMetadata(config, 'qwen35moe') })).rejects.toMatchObject({
      name: 'UnknownModelType',
      message: expect.stringMatching(/moe\.gguf: general\.architecture "qwen35moe" is not supported \(mixture-of-experts/),
    });
    const sections = ggufMetadata(config).map((e) =>
      e.key.endsWith('dimension_sections') ? ({ ...e, value: [0, 1, 0, 0] } as GgufKv) : e,
    );
    await expect(load('mrope.gguf', hf, { kv: sections })).rejects.toMatchObject({
      name: 'UnsupportedFeature',
      message: expect.stringMatching(/mrope\.gguf: qwen35\.rope\.dimension_sections \[0, 1, 0, 0\] put rotary pair 0 /),
    });
    const nan = new Map(hf).set('model.layers.0.linear_attn.A_log', { shape: [4], values: Float64Array.from([Number.NaN, 0, 0, 0]) });
    await expect(load('nan.gguf', nan, {})).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringMatching(/nan\.gguf: ssm_a must hold −exp\(A_log\) < 0/),
    });
    await expect(load('gap.gguf', hf, { drop: 'blk.0.ssm_a' })).rejects.toMatchObject({
      name: 'CorruptCheckpoint',
      message: expect.stringMatching(/gap\.gguf lacks 1 tensor.*model\.layers\.0\.linear_attn\.A_log/),
    });
  });
});
