/**
 * The committed tiny checkpoints in models/tiny/ are what scripts/tiny-system/tiny-models.ts writes, and each folder is a
 * well-formed Hugging Face folder of its family: config, tensor names/shapes/dtypes, tokenizer, template.
 * Shapes are derived here from the config independently of the generator's own table.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bf16BitsToF32 } from '../src/formats/dtype.ts';
import { SafetensorsFile } from '../src/formats/safetensors.ts';
import { ropeInvFreq } from '../src/kernels/rope/index.ts';
import { type DecoderConfig, parseDecoderConfig } from '../src/model/config.ts';
import { loadTokenizerFromDir } from '../src/tokenizer/index.ts';
import { GEMMA3_VISION_TENSORS, QWEN3_5_UNREAD_TENSORS, writeTinyModels } from '../scripts/tiny-system/tiny-models.ts';

const ROOT = resolve(import.meta.dirname, '../models/tiny');
const NAMES = ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny', 'mistral-tiny', 'gemma3-tiny', 'qwen3_5-tiny', 'qwen3_5-tied-tiny'] as const;

// What each folder is meant to be (the brief), written out rather than read from the generator.
const INTENDED: Record<(typeof NAMES)[number], Partial<DecoderConfig>> = {
  'qwen3-tiny': {
    family: 'qwen3',
    hidden: 48,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 128,
    tieEmbeddings: true,
    qkvBias: false,
    oBias: false,
    qkNorm: true,
    rmsEps: 1e-6,
    maxPositions: 512,
    savedDtype: 'bfloat16',
    bosTokenId: 456,
    eosTokenIds: [458],
  },
  'llama-tiny': {
    family: 'llama',
    hidden: 64,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 16,
    intermediate: 160,
    tieEmbeddings: false,
    qkvBias: false,
    oBias: false,
    qkNorm: false,
    rmsEps: 1e-5,
    maxPositions: 512,
    savedDtype: 'bfloat16',
    bosTokenId: 456,
    eosTokenIds: [458, 456],
  },
  'qwen2-tiny': {
    family: 'qwen2',
    hidden: 32,
    layers: 2,
    heads: 4,
    kvHeads: 2,
    headDim: 8,
    intermediate: 88,
    tieEmbeddings: true,
    qkvBias: true,
    oBias: false,
    qkNorm: false,
    rmsEps: 1e-6,
    maxPositions: 512,
    savedDtype: 'bfloat16',
    bosTokenId: 456,
    eosTokenIds: [458],
  },
  'mistral-tiny': {
    family: 'mistral',
    hidden: 40,
    layers: 2,
    heads: 4,
    kvHeads: 1,
    headDim: 10,
    intermediate: 96,
    tieEmbeddings: false,
    qkvBias: false,
    oBias: false,
    qkNorm: false,
    rmsEps: 1e-5,
    maxPositions: 512,
    savedDtype: 'bfloat16',
    bosTokenId: 456,
    eosTokenIds: [458],
    slidingWindow: 4,
    windowLayers: [true, true],
  },
  // the rest from Gemma3TextConfig's defaults: eps 1e-6, tied, local base 1e4, global 1e6 scaled linearly by 8
  'gemma3-tiny': {
    family: 'gemma3',
    hidden: 56,
    layers: 3,
    heads: 4,
    kvHeads: 2,
    headDim: 24,
    intermediate: 128,
    tieEmbeddings: true,
    qkvBias: false,
    oBias: false,
    qkNorm: true,
    rmsEps: 1e-6,
    maxPositions: 512,
    savedDtype: 'bfloat16',
    bosTokenId: 456,
    eosTokenIds: [458, 456],
    slidingWindow: 4,
    windowLayers: [true, false, true],
    normOffset: 1,
    sandwichNorms: true,
    mlpAct: 'gelu_tanh',
    embedScale: Math.sqrt(56),
    attnScale: 20 ** -0.5,
  },
  // Qwen3.5-9B's shape: untied, no BOS, eos <|endoftext|> in the text_config, three DeltaNets then gated attention
  'qwen3_5-tiny': {
    family: 'qwen3_5',
    hidden: 48,
    layers: 4,
    heads: 2,
    kvHeads: 1,
    headDim: 32,
    intermediate: 96,
    tieEmbeddings: false,
    qkvBias: false,
    oBias: false,
    qkNorm: true,
    rmsEps: 1e-6,
    maxPositions: 512,
    savedDtype: 'bfloat16',
    bosTokenId: null,
    eosTokenIds: [456],
    normOffset: 1,
    sandwichNorms: false,
    mlpAct: 'silu',
    attnOutputGate: true,
    linearLayers: [true, true, true, false],
    deltaNet: { keyHeads: 2, valueHeads: 4, keyDim: 16, valueDim: 12, convKernel: 4 },
  },
  // Qwen3.5-4B's: tied; no layer_types, full_attention_interval 2 alternates linear and full layers
  'qwen3_5-tied-tiny': {
    family: 'qwen3_5',
    hidden: 40,
    layers: 4,
    heads: 2,
    kvHeads: 1,
    headDim: 24,
    intermediate: 80,
    tieEmbeddings: true,
    qkvBias: false,
    oBias: false,
    qkNorm: true,
    rmsEps: 1e-6,
    maxPositions: 512,
    savedDtype: 'bfloat16',
    bosTokenId: null,
    eosTokenIds: [456],
    normOffset: 1,
    sandwichNorms: false,
    mlpAct: 'silu',
    attnOutputGate: true,
    linearLayers: [true, false, true, false],
    deltaNet: { keyHeads: 2, valueHeads: 4, keyDim: 8, valueDim: 10, convKernel: 4 },
  },
};
const THETA = {
  'qwen3-tiny': 1e6,
  'llama-tiny': 5e5,
  'qwen2-tiny': 1e4,
  'mistral-tiny': 1e4,
  'gemma3-tiny': 1e6,
  'qwen3_5-tiny': 1e7,
  'qwen3_5-tied-tiny': 1e7,
};

async function config(name: string): Promise<DecoderConfig> {
  return parseDecoderConfig(await readFile(join(ROOT, name, 'config.json'), 'utf8'), `${name}/config.json`);
}

/** Name → shape implied by a parsed config, following Hugging Face's modeling_{llama,qwen2,qwen3}.py. */
function expectedShapes(c: DecoderConfig): Map<string, number[]> {
  const m = new Map<string, number[]>();
  const q = c.heads * c.headDim;
  const kv = c.kvHeads * c.headDim;
  m.set('model.embed_tokens.weight', [c.vocabSize, c.hidden]);
  m.set('model.norm.weight', [c.hidden]);
  if (!c.tieEmbeddings) m.set('lm_head.weight', [c.vocabSize, c.hidden]);
  for (let l = 0; l < c.layers; l++) {
    const a = `model.layers.${l}.self_attn`;
    const dn = c.deltaNet;
    if (c.linearLayers[l] && dn) {
      // transformers' Qwen3_5GatedDeltaNet: q|k|v through the conv, z, b and a per value head, the gated norm over valueDim
      const p = `model.layers.${l}.linear_attn`;
      const C = 2 * dn.keyHeads * dn.keyDim + dn.valueHeads * dn.valueDim;
      m.set(`${p}.in_proj_qkv.weight`, [C, c.hidden]);
      m.set(`${p}.in_proj_z.weight`, [dn.valueHeads * dn.valueDim, c.hidden]);
      m.set(`${p}.in_proj_b.weight`, [dn.valueHeads, c.hidden]);
      m.set(`${p}.in_proj_a.weight`, [dn.valueHeads, c.hidden]);
      m.set(`${p}.conv1d.weight`, [C, 1, dn.convKernel]);
      m.set(`${p}.A_log`, [dn.valueHeads]);
      m.set(`${p}.dt_bias`, [dn.valueHeads]);
      m.set(`${p}.norm.weight`, [dn.valueDim]);
      m.set(`${p}.out_proj.weight`, [c.hidden, dn.valueHeads * dn.valueDim]);
    } else {
      // with the output gate, q_proj yields each head's query and gate
      m.set(`${a}.q_proj.weight`, [q * (c.attnOutputGate ? 2 : 1), c.hidden]);
    m.set(`${a}.k_proj.weight`, [kv, c.hidden]);
    m.set(`${a}.v_proj.weight`, [kv, c.hidden]);
    m.set(`${a}.o_proj.weight`, [c.hidden, q]);
    if (c.qkvBias) {
      m.set(`${a}.q_proj.bias`, [q]);
      m.set(`${a}.k_proj.bias`, [kv]);
      m.set(`${a}.v_proj.bias`, [kv]);
    }
    if (c.qkNorm) {
      m.set(`${a}.q_norm.weight`, [c.headDim]);
      m.set(`${a}.k_norm.weight`, [c.headDim]);
    }
    }
    const p = `model.layers.${l}`;
    m.set(`${p}.mlp.gate_proj.weight`, [c.intermediate, c.hidden]);
    m.set(`${p}.mlp.up_proj.weight`, [c.intermediate, c.hidden]);
    m.set(`${p}.mlp.down_proj.weight`, [c.hidden, c.intermediate]);
    m.set(`${p}.input_layernorm.weight`, [c.hidden]);
    m.set(`${p}.post_attention_layernorm.weight`, [c.hidden]);
    if (c.sandwichNorms) {
      m.set(`${p}.pre_feedforward_layernorm.weight`, [c.hidden]);
      m.set(`${p}.post_feedforward_layernorm.weight`, [c.hidden]);
    }
  }
  if (c.family === 'qwen3_5') {
    // Qwen3.5's layout: the decoder under model.language_model.*, lm_head at the top, the vision tower and MTP beside it
    const moved = [...m].map(([n, sh]): [string, number[]] => [n.startsWith('model.') ? `model.language_model.${n.slice(6)}` : n, sh]);
    return new Map([...moved, ...QWEN3_5_UNREAD_TENSORS]);
  }
  if (c.family !== 'gemma3') return m;
  // gemma-3-4b-it's layout: the decoder under language_model.*, a vision tower and projector beside it
  return new Map([...[...m].map(([n, sh]): [string, number[]] => [`language_model.${n}`, sh]), ...GEMMA3_VISION_TENSORS]);
}

function bf16Values(bytes: Uint8Array): Float64Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Float64Array.from({ length: bytes.byteLength / 2 }, (_, i) => bf16BitsToF32(view.getUint16(2 * i, true)));
}

const mean = (v: Float64Array) => v.reduce((a, b) => a + b, 0) / v.length;
const std = (v: Float64Array) => {
  const m = mean(v);
  return Math.sqrt(v.reduce((a, b) => a + (b - m) ** 2, 0) / v.length);
};

describe('tiny models: generator output', () => {
  let tmp = '';
  afterAll(async () => {
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('regenerating gives byte-identical files to the committed folders (npm run models:tiny to refresh)', async () => {
    tmp = await mkdtemp(join(tmpdir(), 'rmas-tiny-'));
    await writeTinyModels(tmp);
    for (const name of NAMES) {
      const committed = (await readdir(join(ROOT, name))).sort();
      const fresh = (await readdir(join(tmp, name))).sort();
      expect(committed, name).toEqual(fresh);
      for (const file of fresh) {
        const [a, b] = await Promise.all([readFile(join(ROOT, name, file)), readFile(join(tmp, name, file))]);
        expect(a.equals(b), `${name}/${file} differs from a fresh generation`).toBe(true);
      }
    }
  });

  it('every folder stays small enough to commit', async () => {
    for (const name of NAMES) {
      let total = 0;
      for (const file of await readdir(join(ROOT, name))) total += (await readFile(join(ROOT, name, file))).byteLength;
      expect(total, name).toBeLessThan(512 * 1024);
    }
  });
});

describe.each(NAMES)('tiny model %s', (name) => {
  const dir = join(ROOT, name);

  it('config.json parses into the intended family and shape', async () => {
    const c = await config(name);
    expect(c).toMatchObject(INTENDED[name]);
    expect(c.vocabSize).toBe(461); // 256 bytes + 200 merges + 5 added tokens
    expect(c.rope.theta).toBe(THETA[name]);
    // only Mistral (every layer) and Gemma 3 (its sliding layers) window; the others attend to the whole prefix
    if (name !== 'mistral-tiny' && name !== 'gemma3-tiny')
      expect([c.slidingWindow, c.windowLayers]).toEqual([null, Array(c.layers).fill(false)]);
    const gen = JSON.parse(await readFile(join(dir, 'generation_config.json'), 'utf8')) as Record<string, unknown>;
    expect(gen).toMatchObject({ do_sample: true, temperature: 0.6, top_p: 0.95, top_k: 20, eos_token_id: [458, 456] });
  });

  it('model.safetensors holds exactly the implied BF16 tensors, with format pt', async () => {
    const c = await config(name);
    const st = await SafetensorsFile.fromBytes(new Uint8Array(await readFile(join(dir, 'model.safetensors'))), `${name}/model.safetensors`);
    expect(st.metadata).toEqual({ format: 'pt' });
    const want = expectedShapes(c);
    expect(st.names().sort()).toEqual([...want.keys()].sort());
    for (const [tensor, shape] of want) {
      const info = st.info(tensor);
      expect([tensor, info.dtype, [...info.shape]]).toEqual([tensor, 'BF16', shape]);
    }
  });

  it('weights have the documented scales: norms 1 ± 0.1 (Gemma 0 ± 0.1), linear 1/√fan_in, embeddings 1, biases 0.1', async () => {
    const c = await config(name);
    const st = await SafetensorsFile.fromBytes(new Uint8Array(await readFile(join(dir, 'model.safetensors'))));
    for (const [tensor, shape] of expectedShapes(c)) {
      const v = bf16Values((await st.read(tensor)).bytes);
      expect(v.every(Number.isFinite), tensor).toBe(true);
      // Norm and bias vectors have 8-64 values, so their sample std is loose (±50%); matrices are tight.
      if ([...GEMMA3_VISION_TENSORS, ...QWEN3_5_UNREAD_TENSORS].some(([n]) => n === tensor)) continue; // stand-ins the engine never reads
      if (tensor.endsWith('.A_log')) {
        // the DeltaNet's decay rate exp(A_log) near 0.2 (4 values: loose)
        expect(Math.abs(mean(v) + 1.6), tensor).toBeLessThan(0.5);
      } else if (tensor.endsWith('.dt_bias')) {
        expect(std(v), tensor).toBeLessThan(0.2);
      } else if (tensor.endsWith('norm.weight')) {
        // Gemma's and Qwen3.5's norms scale by (1 + w): zero-centred; the DeltaNet's gated norm has a plain w
        const plain = !c.normOffset || tensor.endsWith('linear_attn.norm.weight');
        expect(Math.abs(mean(v) - (plain ? 1 : 0)), tensor).toBeLessThan(0.1);
        expect(std(v), tensor).toBeGreaterThan(0.05);
        expect(std(v), tensor).toBeLessThan(0.15);
      } else if (tensor.endsWith('.bias')) {
        expect(std(v), tensor).toBeGreaterThan(0.05);
        expect(std(v), tensor).toBeLessThan(0.15);
      } else {
        // the conv's fan-in is its kernel (depthwise)
        const target = tensor.endsWith('model.embed_tokens.weight') ? 1 : 1 / Math.sqrt(shape[shape.length - 1]!);
        // the sample mean of n values is within 3 standard errors (the DeltaNet's b and a rows hold a few hundred)
        expect(Math.abs(mean(v)), tensor).toBeLessThan(Math.max(0.1, 3 / Math.sqrt(v.length)) * target);
        // the sample std of n values within 4 of its standard errors (1/√(2n)), and never looser than ±10%
        const tol = Math.max(0.1, 4 / Math.sqrt(2 * v.length));
        expect(std(v) / target, tensor).toBeGreaterThan(1 - tol);
        expect(std(v) / target, tensor).toBeLessThan(1 + tol);
      }
    }
  });

  it('the tokenizer loads from the folder, fits the vocabulary and agrees with the config ids', async () => {
    const c = await config(name);
    const tok = await loadTokenizerFromDir(dir);
    expect(tok.vocabSize).toBeLessThanOrEqual(c.vocabSize);
    expect(tok.vocabSize).toBe(461);
    // Qwen3.5 has no BOS, and its text_config's eos is <|endoftext|> (generation stops on either, generation_config.json)
    expect(tok.idOf('<|endoftext|>')).toBe(name.startsWith('qwen3_5') ? 456 : c.bosTokenId);
    expect(tok.eosTokenIds).toEqual([458]);
    expect(c.eosTokenIds).toContain(name.startsWith('qwen3_5') ? 456 : tok.eosTokenIds[0]);
    // The same tokenizer in every folder; pinned ids catch a change of merges or tokenizer class.
    const ids = tok.encode('The answer is 42.');
    expect(ids).toEqual([267, 297, 266, 32, 52, 50, 46]);
    expect(tok.decode(ids)).toBe('The answer is 42.');
  });

  it('the ChatML template renders from its file', async () => {
    const tok = await loadTokenizerFromDir(dir);
    const jinja = existsSync(join(dir, 'chat_template.jinja'));
    const cfg = JSON.parse(await readFile(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
    // llama-tiny tests the separate-file path; the Qwen folders keep it in tokenizer_config.json.
    expect(jinja).toBe(name === 'llama-tiny');
    expect(typeof cfg.chat_template === 'string').toBe(!jinja);
    const text = tok.applyChatTemplate([{ role: 'user', content: 'What is 6 times 7?' }], {
      addGenerationPrompt: true,
      kwargs: { enable_thinking: false },
    });
    expect(text).toBe('<|im_start|>user\nWhat is 6 times 7?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
    const ids = tok.encode(text, { addSpecialTokens: false });
    expect(ids.slice(0, 1)).toEqual([457]);
    expect(ids.filter((i) => i === 458)).toHaveLength(1);
  });
});

describe('llama-tiny rope scaling', () => {
  it('touches all three llama3 bands at head_dim 16 (kept, smoothed, divided by 8)', async () => {
    const c = await config('llama-tiny');
    const scaled = ropeInvFreq(c.rope);
    const plain = Array.from({ length: 8 }, (_, i) => 1 / 500000 ** ((2 * i) / 16));
    expect(scaled[0]).toBeCloseTo(plain[0]!, 6); // wavelength 6.3 < 64/4: unchanged
    // wavelength 32.5 between 16 and 64: smooth = (64/32.5 - 1)/3, freq (1 - smooth)/8 + smooth of plain
    const wl = (2 * Math.PI) / plain[1]!;
    const smooth = (64 / wl - 1) / (4 - 1);
    expect(scaled[1]! / plain[1]!).toBeCloseTo((1 - smooth) / 8 + smooth, 5);
    expect(scaled[1]! / plain[1]!).toBeGreaterThan(0.2);
    for (let i = 2; i < 8; i++) expect(scaled[i]! / plain[i]!).toBeCloseTo(1 / 8, 5); // wavelength > 64
  });
});
