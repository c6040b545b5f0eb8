import { describe, expect, it } from 'vitest';
import { InvalidModelConfig, UnknownModelType } from '../errors';
import { ropeInvFreq } from '../kernels/rope';
import { CONFIG_LIMITS, parseDecoderConfig } from './config';
import { TINY_QWEN3_CONFIG } from './model.bench';
import qwen3TinyJson from '../../models/tiny/qwen3-tiny/config.json';
import { tinyConfigJson } from '../testing/model';

const TINY_QWEN35 = tinyConfigJson('qwen3_5');

// Trimmed copies of the released configs of the Sequential-Light agents.
const qwen3 = {
  architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', hidden_size: 2048, intermediate_size: 6144,
  num_hidden_layers: 28, num_attention_heads: 16, num_key_value_heads: 8, head_dim: 128, max_position_embeddings: 40960,
  rms_norm_eps: 1e-6, rope_theta: 1000000, rope_scaling: null, tie_word_embeddings: true, vocab_size: 151936,
  attention_bias: false, hidden_act: 'silu', torch_dtype: 'bfloat16', bos_token_id: 151643, eos_token_id: 151645,
  sliding_window: null, use_sliding_window: false, max_window_layers: 28,
};
const llama = {
  architectures: ['LlamaForCausalLM'], model_type: 'llama', hidden_size: 2048, intermediate_size: 8192,
  num_hidden_layers: 16, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 64, max_position_embeddings: 131072,
  rms_norm_eps: 1e-5, rope_theta: 500000.0, tie_word_embeddings: true, vocab_size: 128256, attention_bias: false, mlp_bias: false,
  rope_scaling: { factor: 32.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: 'llama3' },
  bos_token_id: 128000, eos_token_id: [128001, 128008, 128009], hidden_act: 'silu', torch_dtype: 'bfloat16',
};
const qwen2 = {
  architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2', hidden_size: 1536, intermediate_size: 8960,
  num_hidden_layers: 28, num_attention_heads: 12, num_key_value_heads: 2, max_position_embeddings: 4096,
  rms_norm_eps: 1e-6, rope_theta: 10000.0, sliding_window: 4096, use_sliding_window: false, max_window_layers: 21,
  tie_word_embeddings: true, vocab_size: 151936, bos_token_id: 151643, eos_token_id: 151645, hidden_act: 'silu', torch_dtype: 'bfloat16',
};

describe('decoder config', () => {
  it('reads Qwen3-1.7B: explicit head_dim, q/k norm, no biases', () => {
    const c = parseDecoderConfig(JSON.stringify(qwen3));
    expect(c).toMatchObject({
      family: 'qwen3', hidden: 2048, layers: 28, heads: 16, kvHeads: 8, headDim: 128, intermediate: 6144, rmsEps: 1e-6,
      tieEmbeddings: true, qkvBias: false, oBias: false, qkNorm: true, slidingWindow: null, eosTokenIds: [151645], savedDtype: 'bfloat16',
    });
    expect(c.rope).toEqual({ theta: 1000000, headDim: 128, partialRotaryFactor: undefined, scaling: null });
  });

  it('reads Llama-3.2-1B: llama3 rope scaling, several EOS ids', () => {
    const c = parseDecoderConfig(llama);
    expect(c).toMatchObject({
      family: 'llama',
      headDim: 64,
      kvHeads: 8,
      qkvBias: false,
      qkNorm: false,
      eosTokenIds: [128001, 128008, 128009],
    });
    expect(c.rope.scaling?.rope_type).toBe('llama3');
    // the scaled frequencies: the top (high-frequency) band untouched, the lowest divided by the factor
    const inv = ropeInvFreq(c.rope);
    expect(inv[0]).toBe(1);
    expect(inv[31]).toBeCloseTo(500000 ** (-62 / 64) / 32, 12);
  });

  it('reads Qwen2.5-Math-1.5B: q/k/v biases, head_dim derived, window off', () => {
    const c = parseDecoderConfig(qwen2);
    expect(c).toMatchObject({
      family: 'qwen2',
      hidden: 1536,
      heads: 12,
      kvHeads: 2,
      headDim: 128,
      qkvBias: true,
      oBias: false,
      slidingWindow: null,
    });
    expect(parseDecoderConfig(qwen2).windowLayers).toEqual(Array(28).fill(false));
    expect(parseDecoderConfig({ ...qwen2, use_sliding_window: true })).toMatchObject({
      slidingWindow: 4096,
      windowLayers: [...Array(21).fill(false), ...Array(7).fill(true)],
    });
  });

  it('accepts the newer rope_parameters form', () => {
    const { rope_theta: _t, rope_scaling: s, ...rest } = llama;
    const c = parseDecoderConfig({ ...rest, rope_parameters: { ...s, rope_theta: 500000 } });
    expect(c.rope.theta).toBe(500000);
    expect([...ropeInvFreq(c.rope)]).toEqual([...ropeInvFreq(parseDecoderConfig(llama).rope)]);
  });

  it('names unknown families and malformed values', () => {
    expect(() => parseDecoderConfig({ ...qwen3, model_type: 'gpt2' }, 'm/config.json')).toThrow(UnknownModelType);
    expect(() => parseDecoderConfig({ ...qwen3, model_type: 'gpt2' }, 'm/config.json')).toThrow(/m\/config.json.*gpt2/);
    // an image-text wrapper's decoder is under text_config
    expect(() => parseDecoderConfig({ ...qwen3, model_type: 'gemma3' }, 'm/config.json')).toThrow(
      /m\/config.json: a gemma3 config holds its decoder under text_config/,
    );
    expect(() => parseDecoderConfig('{ not json')).toThrow(InvalidModelConfig);
    expect(() => parseDecoderConfig({ ...qwen3, hidden_size: '2048' })).toThrow(/hidden_size/);
    expect(() => parseDecoderConfig({ ...qwen3, num_key_value_heads: 5 })).toThrow(/multiple/);
    expect(() => parseDecoderConfig({ ...llama, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow(/yarn/);
    expect(() => parseDecoderConfig({ ...qwen2, head_dim: undefined, hidden_size: 1537 })).toThrow(/divisible/);
  });

  it("reads an image-text checkpoint's text_config, with the wrapper's tie_word_embeddings and dtype where it has none", () => {
    const { tie_word_embeddings: _t, torch_dtype: _d, ...inner } = { ...qwen3, torch_dtype: 'bfloat16' } as Record<string, unknown>;
    const wrapped = {
      model_type: 'llava_like',
      tie_word_embeddings: false,
      torch_dtype: 'float16',
      vision_config: { hidden_size: 7 },
      text_config: inner,
    };
    const c = parseDecoderConfig(wrapped);
    expect([c.family, c.hidden, c.tieEmbeddings, c.savedDtype]).toEqual(['qwen3', parseDecoderConfig(qwen3).hidden, false, 'float16']);
    // the text config's own value wins
    expect(parseDecoderConfig({ ...wrapped, text_config: { ...inner, tie_word_embeddings: true } }).tieEmbeddings).toBe(true);
    // qwen3_5_text names its family
    expect(
      parseDecoderConfig({ ...wrapped, model_type: 'qwen3_5', text_config: { ...inner, model_type: 'qwen3_5_text' } }, 'q/config.json')
        .family,
    ).toBe('qwen3_5');
    expect(() => parseDecoderConfig({ ...wrapped, text_config: 3 })).toThrow(/text_config must be a JSON object/);
  });

  it('qwen3_5: Qwen3.5-4B as released (image-text wrapper, DeltaNet sizes, every 4th layer attends, partial rotary)', () => {
    const L = 'linear_attention';
    const F4 = 'full_attention';
    const text = {
      attention_bias: false,
      attn_output_gate: true,
      dtype: 'bfloat16',
      eos_token_id: 248044,
      full_attention_interval: 4,
      head_dim: 256,
      hidden_act: 'silu',
      hidden_size: 2560,
      intermediate_size: 9216,
      layer_types: Array.from({ length: 8 }, () => [L, L, L, F4]).flat(),
      linear_conv_kernel_dim: 4,
      linear_key_head_dim: 128,
      linear_num_key_heads: 16,
      linear_num_value_heads: 32,
      linear_value_head_dim: 128,
      max_position_embeddings: 262144,
      model_type: 'qwen3_5_text',
      mtp_num_hidden_layers: 1,
      num_attention_heads: 16,
      num_hidden_layers: 32,
      num_key_value_heads: 4,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: true,
      vocab_size: 248320,
      rope_parameters: {
        mrope_interleaved: true,
        mrope_section: [11, 11, 10],
        rope_type: 'default',
        rope_theta: 10000000,
        partial_rotary_factor: 0.25,
      },
    };
    const wrapper = {
      architectures: ['Qwen3_5ForConditionalGeneration'],
      model_type: 'qwen3_5',
      tie_word_embeddings: true,
      text_config: text,
      vision_config: { depth: 24 },
    };
    const c = parseDecoderConfig(wrapper);
    expect([
      c.family,
      c.hidden,
      c.layers,
      c.heads,
      c.kvHeads,
      c.headDim,
      c.tieEmbeddings,
      c.normOffset,
      c.qkNorm,
      c.attnOutputGate,
      c.eosTokenIds,
    ]).toEqual(['qwen3_5', 2560, 32, 16, 4, 256, true, 1, true, true, [248044]]);
    expect(c.deltaNet).toEqual({ keyHeads: 16, valueHeads: 32, keyDim: 128, valueDim: 128, convKernel: 4 });
    expect(c.linearLayers.flatMap((lin, i) => (lin ? [] : [i]))).toEqual([3, 7, 11, 15, 19, 23, 27, 31]);
    expect([c.rope.theta, c.rope.partialRotaryFactor, c.rope.scaling, c.slidingWindow]).toEqual([1e7, 0.25, null, null]);
    expect(ropeInvFreq(c.rope)).toHaveLength(32); // 64 of the 256 dims rotate
    // without layer_types, full_attention_interval (default 4) places the attention layers; a quarter rotates by default
    const { layer_types: _l, ...bare } = text;
    const { partial_rotary_factor: _p, ...rope } = text.rope_parameters;
    const d = parseDecoderConfig({ ...bare, rope_parameters: rope, num_hidden_layers: 6, full_attention_interval: 3 });
    expect([d.linearLayers, d.rope.partialRotaryFactor]).toEqual([[true, true, false, true, true, false], 0.25]);
    expect(() => parseDecoderConfig({ ...text, layer_types: [L, F4] }, 'q/config.json')).toThrow(
      /q\/config.json: layer_types must list 32/,
    );
    expect(() => parseDecoderConfig({ ...text, linear_num_value_heads: 24 })).toThrow(
      /linear_num_value_heads \(24\) must be a multiple of linear_num_key_heads \(16\)/,
    );
    expect(() => parseDecoderConfig({ ...text, hidden_act: 'gelu' })).toThrow(InvalidModelConfig);
  });

  it('mistral: the sliding window on every layer when set (v0.1, BioMistral), none when null (v0.2)', () => {
    const mistral = { ...llama, model_type: 'mistral', rope_scaling: null, rope_theta: 10000, sliding_window: 4096 };
    const c = parseDecoderConfig(mistral);
    expect([c.family, c.slidingWindow, c.windowLayers.every(Boolean), c.qkvBias, c.qkNorm]).toEqual(['mistral', 4096, true, false, false]);
    expect(parseDecoderConfig({ ...mistral, sliding_window: null }).slidingWindow).toBeNull();
    const { sliding_window: _w, ...noKey } = mistral;
    expect(parseDecoderConfig(noKey).slidingWindow).toBe(4096); // MistralConfig's default
    // max_window_layers is Qwen2's, not Mistral's
    expect(parseDecoderConfig({ ...mistral, max_window_layers: 5 }).windowLayers.every(Boolean)).toBe(true);
  });

  it("gemma-3-4b-it's config.json: its text_config and Gemma3TextConfig's defaults", () => {
    // the released file's text_config lists only what differs from the defaults
    const released = {
      architectures: ['Gemma3ForConditionalGeneration'],
      boi_token_index: 255999,
      eoi_token_index: 256000,
      eos_token_id: [1, 106],
      image_token_index: 262144,
      initializer_range: 0.02,
      mm_tokens_per_image: 256,
      model_type: 'gemma3',
      text_config: {
        hidden_size: 2560,
        intermediate_size: 10240,
        model_type: 'gemma3_text',
        num_hidden_layers: 34,
        rope_scaling: { factor: 8.0, rope_type: 'linear' },
        sliding_window: 1024,
      },
      torch_dtype: 'bfloat16',
      transformers_version: '4.50.0.dev0',
      vision_config: {
        hidden_size: 1152,
        image_size: 896,
        intermediate_size: 4304,
        model_type: 'siglip_vision_model',
        num_attention_heads: 16,
        num_hidden_layers: 27,
        patch_size: 14,
      },
    };
    const c = parseDecoderConfig(released);
    expect(c).toMatchObject({
      family: 'gemma3', vocabSize: 262208, hidden: 2560, layers: 34, heads: 8, kvHeads: 4, headDim: 256, intermediate: 10240, rmsEps: 1e-6,
      tieEmbeddings: true, qkvBias: false, oBias: false, qkNorm: true, normOffset: 1, sandwichNorms: true, mlpAct: 'gelu_tanh',
      embedScale: Math.sqrt(2560), attnScale: 1 / 16, finalSoftcap: null, slidingWindow: 1024, maxPositions: 131072,
      bosTokenId: 2, eosTokenIds: [1, 106], savedDtype: 'bfloat16',
    });
    // every sixth layer is global: 5, 11, 17, 23, 29
    expect(c.windowLayers.map((w, i) => (w ? -1 : i)).filter((i) => i >= 0)).toEqual([5, 11, 17, 23, 29]);
    expect([c.rope.theta, c.rope.scaling, c.ropeLocal!.theta, c.ropeLocal!.scaling]).toEqual([
      1e6,
      { factor: 8, rope_type: 'linear' },
      10000,
      null,
    ]);
    // transformers 5 spells the rope per layer type, and may list layer_types
    const t5 = parseDecoderConfig({
      ...released,
      text_config: {
        ...released.text_config,
        rope_scaling: undefined,
        rope_parameters: {
          full_attention: { rope_type: 'linear', factor: 8, rope_theta: 1e6 },
          sliding_attention: { rope_type: 'default', rope_theta: 10000 },
        },
        layer_types: Array.from({ length: 34 }, (_, i) => ((i + 1) % 6 ? 'sliding_attention' : 'full_attention')),
      },
    });
    expect([t5.rope, t5.ropeLocal, t5.windowLayers]).toEqual([
      { ...c.rope, scaling: { rope_type: 'linear', factor: 8, rope_theta: 1e6 } },
      c.ropeLocal,
      c.windowLayers,
    ]);
    expect([...ropeInvFreq(t5.rope)]).toEqual([...ropeInvFreq(c.rope)]);
    // as in transformers: attention soft-capping is never applied by Gemma 3, the final one only by the text-only model
    expect(
      parseDecoderConfig({ ...released, text_config: { ...released.text_config, attn_logit_softcapping: 50, final_logit_softcapping: 30 } })
        .finalSoftcap,
    ).toBeNull();
    expect(parseDecoderConfig({ ...released.text_config, final_logit_softcapping: 30 }).finalSoftcap).toBe(30);
    expect(() => parseDecoderConfig({ ...released, text_config: { ...released.text_config, layer_types: ['full_attention'] } })).toThrow(
      /layer_types must list 34/,
    );
  });

  it('bounds every size before anything is sized by it: num_hidden_layers 1e9 is refused at once, naming value and limit', () => {
    const t0 = performance.now();
    const err = (() => { try { parseDecoderConfig({ ...qwen3, num_hidden_layers: 1e9 }, 'm/config.json'); } catch (e) { return e; } })();
    expect(performance.now() - t0).toBeLessThan(50);
    expect(err).toBeInstanceOf(InvalidModelConfig);
    expect((err as Error).message).toBe(
      "m/config.json: 'num_hidden_layers' is 1000000000, above the limit of 1024 this engine accepts (released models stay far below it); " +
        'fix config.json',
    );
    // at the limit a config still parses (1024 layers), one above it does not, for every size field
    expect(parseDecoderConfig({ ...qwen3, num_hidden_layers: 1024 }).windowLayers).toHaveLength(1024);
    const qwen35 = { ...TINY_QWEN35, model_type: 'qwen3_5_text' };
    expect(Object.keys(CONFIG_LIMITS).sort()).toEqual([
      'head_dim', 'hidden_size', 'intermediate_size', 'linear_conv_kernel_dim', 'linear_key_head_dim', 'linear_num_key_heads',
      'linear_num_value_heads', 'linear_value_head_dim', 'max_position_embeddings', 'num_attention_heads', 'num_hidden_layers',
      'num_key_value_heads', 'sliding_window', 'vocab_size',
    ]);
    for (const [key, limit] of Object.entries(CONFIG_LIMITS)) {
      const base = key.startsWith('linear_') ? qwen35 : key === 'sliding_window' ? { ...qwen2, use_sliding_window: true } : qwen3;
      expect(() => parseDecoderConfig({ ...base, [key]: limit + 1 }, 'c.json'), key).toThrow(
        `c.json: '${key}' is ${limit + 1}, above the limit of ${limit} this engine accepts`,
      );
    }
    expect(() => parseDecoderConfig({ ...qwen3, num_hidden_layers: -3 })).toThrow("'num_hidden_layers' must be a positive integer, got -3");
  });

  it('refuses an rms_norm_eps that is not a positive number below 1 (-1 made every state NaN), and other scales of the wrong sign', () => {
    for (const eps of [-1, 0, 1, 'x']) {
      expect(() => parseDecoderConfig({ ...qwen3, rms_norm_eps: eps }, 'm/config.json'), String(eps)).toThrow(InvalidModelConfig);
    }
    expect(() => parseDecoderConfig({ ...qwen3, rms_norm_eps: -1 }, 'm/config.json')).toThrow(
      "m/config.json: 'rms_norm_eps' must be a positive number below 1, got -1; fix config.json",
    );
    expect(parseDecoderConfig({ ...qwen3, rms_norm_eps: 1e-5 }).rmsEps).toBe(1e-5);
    const gemma = { model_type: 'gemma3_text', num_hidden_layers: 2 };
    expect(() => parseDecoderConfig({ ...gemma, query_pre_attn_scalar: -256 })).toThrow(
      "'query_pre_attn_scalar' must be a positive number, got -256",
    );
    expect(() => parseDecoderConfig({ ...gemma, final_logit_softcapping: 0 })).toThrow(
      "'final_logit_softcapping' must be a positive number, got 0",
    );
    expect(() => parseDecoderConfig({ ...qwen3, partial_rotary_factor: 1.5 })).toThrow(
      'partial_rotary_factor must be a number in (0, 1], got 1.5');
    expect(() => parseDecoderConfig({ ...qwen3, partial_rotary_factor: '0.25' })).toThrow(
      'partial_rotary_factor must be a number in (0, 1], got "0.25"');
  });

  it('the benches\' tiny model (model.bench.ts) is models/tiny/qwen3-tiny/config.json', () => {
    expect(TINY_QWEN3_CONFIG).toEqual(qwen3TinyJson);
  });
});
