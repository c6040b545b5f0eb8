/**
 * The committed tiny checkpoints in models/tiny/ are what models/generate.ts writes, and each folder is a
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
import { GEMMA3_VISION_TENSORS, writeTinyModels } from '../models/generate.ts';

const ROOT = resolve(import.meta.dirname, '../models/tiny');
const NAMES = ['qwen3-tiny', 'llama-tiny', 'qwen2-tiny', 'mistral-tiny', 'gemma3-tiny'] as const;

// What each folder is meant to be (the brief), written out rather than read from the generator.
const INTENDED: Record<(typeof NAMES)[number], Partial<DecoderConfig>> = {
  'qwen3-tiny': { family: 'qwen3', hidden: 48, layers: 2, heads: 4, kvHeads: 2, headDim: 16, intermediate: 128, tieEmbeddings: true, qkvBias: false, oBias: false, qkNorm: true, rmsEps: 1e-6, maxPositions: 512, savedDtype: 'bfloat16', bosTokenId: 456, eosTokenIds: [458] },
  'llama-tiny': { family: 'llama', hidden: 64, layers: 2, heads: 4, kvHeads: 2, headDim: 16, intermediate: 160, tieEmbeddings: false, qkvBias: false, oBias: false, qkNorm: false, rmsEps: 1e-5, maxPositions: 512, savedDtype: 'bfloat16', bosTokenId: 456, eosTokenIds: [458, 456] },
  'qwen2-tiny': { family: 'qwen2', hidden: 32, layers: 2, heads: 4, kvHeads: 2, headDim: 8, intermediate: 88, tieEmbeddings: true, qkvBias: true, oBias: false, qkNorm: false, rmsEps: 1e-6, maxPositions: 512, savedDtype: 'bfloat16', bosTokenId: 456, eosTokenIds: [458] },
  'mistral-tiny': { family: 'mistral', hidden: 40, layers: 2, heads: 4, kvHeads: 1, headDim: 10, intermediate: 96, tieEmbeddings: false, qkvBias: false, oBias: false, qkNorm: false, rmsEps: 1e-5, maxPositions: 512, savedDtype: 'bfloat16', bosTokenId: 456, eosTokenIds: [458], slidingWindow: 4, windowLayers: [true, true] },
  // the rest from Gemma3TextConfig's defaults: eps 1e-6, tied, local base 1e4, global 1e6 scaled linearly by 8
  'gemma3-tiny': { family: 'gemma3', hidden: 56, layers: 3, heads: 4, kvHeads: 2, headDim: 24, intermediate: 128, tieEmbeddings: true, qkvBias: false, oBias: false, qkNorm: true, rmsEps: 1e-6, maxPositions: 512, savedDtype: 'bfloat16', bosTokenId: 456, eosTokenIds: [458, 456], slidingWindow: 4, windowLayers: [true, false, true], normOffset: 1, sandwichNorms: true, mlpAct: 'gelu_tanh', embedScale: Math.sqrt(56), attnScale: 20 ** -0.5 },
};
const THETA = { 'qwen3-tiny': 1e6, 'llama-tiny': 5e5, 'qwen2-tiny': 1e4, 'mistral-tiny': 1e4, 'gemma3-tiny': 1e6 };

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
    m.set(`${a}.q_proj.weight`, [q, c.hidden]);
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
    if (name !== 'mistral-tiny' && name !== 'gemma3-tiny') expect([c.slidingWindow, c.windowLayers]).toEqual([null, [false, false]]);
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
      if (GEMMA3_VISION_TENSORS.some(([n]) => n === tensor)) continue; // stand-ins the engine never reads
      if (tensor.endsWith('norm.weight')) {
        // Gemma's norms scale by (1 + w): zero-centred
        expect(Math.abs(mean(v) - (c.normOffset ? 0 : 1)), tensor).toBeLessThan(0.1);
        expect(std(v), tensor).toBeGreaterThan(0.05);
        expect(std(v), tensor).toBeLessThan(0.15);
      } else if (tensor.endsWith('.bias')) {
        expect(std(v), tensor).toBeGreaterThan(0.05);
        expect(std(v), tensor).toBeLessThan(0.15);
      } else {
        const target = tensor.endsWith('model.embed_tokens.weight') ? 1 : 1 / Math.sqrt(shape[1]!);
        expect(Math.abs(mean(v)), tensor).toBeLessThan(0.1 * target);
        expect(std(v) / target, tensor).toBeGreaterThan(0.9);
        expect(std(v) / target, tensor).toBeLessThan(1.1);
      }
    }
  });

  it('the tokenizer loads from the folder, fits the vocabulary and agrees with the config ids', async () => {
    const c = await config(name);
    const tok = await loadTokenizerFromDir(dir);
    expect(tok.vocabSize).toBeLessThanOrEqual(c.vocabSize);
    expect(tok.vocabSize).toBe(461);
    expect(tok.idOf('<|endoftext|>')).toBe(c.bosTokenId);
    expect(tok.eosTokenIds).toEqual([458]);
    expect(c.eosTokenIds).toContain(tok.eosTokenIds[0]);
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
    const text = tok.applyChatTemplate([{ role: 'user', content: 'What is 6 times 7?' }], { addGenerationPrompt: true, kwargs: { enable_thinking: false } });
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
