import { describe, expect, it } from 'vitest';
import { InvalidModelConfig, UnknownModelType } from '../errors';
import { ropeInvFreq } from '../kernels/rope';
import { parseDecoderConfig } from './config';

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
    expect(c).toMatchObject({ family: 'llama', headDim: 64, kvHeads: 8, qkvBias: false, qkNorm: false, eosTokenIds: [128001, 128008, 128009] });
    expect(c.rope.scaling?.rope_type).toBe('llama3');
    // the scaled frequencies: the top (high-frequency) band untouched, the lowest divided by the factor
    const inv = ropeInvFreq(c.rope);
    expect(inv[0]).toBe(1);
    expect(inv[31]).toBeCloseTo(500000 ** (-62 / 64) / 32, 12);
  });

  it('reads Qwen2.5-Math-1.5B: q/k/v biases, head_dim derived, window off', () => {
    const c = parseDecoderConfig(qwen2);
    expect(c).toMatchObject({ family: 'qwen2', hidden: 1536, heads: 12, kvHeads: 2, headDim: 128, qkvBias: true, oBias: false, slidingWindow: null });
    expect(parseDecoderConfig(qwen2).windowLayers).toEqual(Array(28).fill(false));
    expect(parseDecoderConfig({ ...qwen2, use_sliding_window: true })).toMatchObject({ slidingWindow: 4096, windowLayers: [...Array(21).fill(false), ...Array(7).fill(true)] });
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
    expect(() => parseDecoderConfig({ ...qwen3, model_type: 'gemma3' }, 'm/config.json')).toThrow(/m\/config.json: a gemma3 config holds its decoder under text_config/);
    expect(() => parseDecoderConfig('{ not json')).toThrow(InvalidModelConfig);
    expect(() => parseDecoderConfig({ ...qwen3, hidden_size: '2048' })).toThrow(/hidden_size/);
    expect(() => parseDecoderConfig({ ...qwen3, num_key_value_heads: 5 })).toThrow(/multiple/);
    expect(() => parseDecoderConfig({ ...llama, rope_scaling: { rope_type: 'yarn', factor: 4 } })).toThrow(/yarn/);
    expect(() => parseDecoderConfig({ ...qwen2, head_dim: undefined, hidden_size: 1537 })).toThrow(/divisible/);
  });

  it("reads an image-text checkpoint's text_config, with the wrapper's tie_word_embeddings and dtype where it has none", () => {
    const { tie_word_embeddings: _t, torch_dtype: _d, ...inner } = { ...qwen3, torch_dtype: 'bfloat16' } as Record<string, unknown>;
    const wrapped = { model_type: 'llava_like', tie_word_embeddings: false, torch_dtype: 'float16', vision_config: { hidden_size: 7 }, text_config: inner };
    const c = parseDecoderConfig(wrapped);
    expect([c.family, c.hidden, c.tieEmbeddings, c.savedDtype]).toEqual(['qwen3', parseDecoderConfig(qwen3).hidden, false, 'float16']);
    // the text config's own value wins
    expect(parseDecoderConfig({ ...wrapped, text_config: { ...inner, tie_word_embeddings: true } }).tieEmbeddings).toBe(true);
    // gemma3_text and qwen3_5_text name their families
    expect(() => parseDecoderConfig({ ...wrapped, model_type: 'gemma3', text_config: { ...inner, model_type: 'gemma3_text' } }, 'g/config.json'))
      .toThrow(/g\/config.json: model_type "gemma3"/);
    expect(() => parseDecoderConfig({ ...wrapped, text_config: 3 })).toThrow(/text_config must be a JSON object/);
  });

  it('mistral: the sliding window on every layer when set (v0.1, BioMistral), none when null (v0.2)', () => {
    const mistral = { ...llama, model_type: 'mistral', rope_scaling: null, rope_theta: 10000, sliding_window: 4096 };
    const c = parseDecoderConfig(mistral);
    expect([c.family, c.slidingWindow, c.windowLayers.every(Boolean), c.qkvBias, c.qkNorm]).toEqual(['mistral', 4096, true, false, false]);
    expect(parseDecoderConfig({ ...mistral, sliding_window: null }).slidingWindow).toBeNull();
    // max_window_layers is Qwen2's, not Mistral's
    expect(parseDecoderConfig({ ...mistral, max_window_layers: 5 }).windowLayers.every(Boolean)).toBe(true);
  });
});
