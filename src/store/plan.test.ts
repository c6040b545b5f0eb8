// planSystemDownload against hand-computed figures for a Qwen3-1.7B-shaped agent (hidden 2048, 28 layers,
// 16 q / 8 kv heads of 128, intermediate 6144, vocab 151936, tied embeddings, bf16 checkpoint).
import { describe, expect, it } from 'vitest';
import { parseDecoderConfig } from '../model/config';
import { describePlan, hfFileUrl, planSystemDownload } from './plan';

const qwen3 = parseDecoderConfig({
  model_type: 'qwen3', hidden_size: 2048, intermediate_size: 6144, num_hidden_layers: 28, num_attention_heads: 16,
  num_key_value_heads: 8, head_dim: 128, max_position_embeddings: 40960, rms_norm_eps: 1e-6, rope_theta: 1000000,
  tie_word_embeddings: true, vocab_size: 151936, attention_bias: false, torch_dtype: 'bfloat16', eos_token_id: 151645,
});
// an adapter without shader-f16: f32 KV caches (see the KV-cache dtype case for one with it)
const big = { maxStorageBufferBindingSize: 2 ** 30, maxBufferSize: 2 ** 32, features: [] as string[] };
const repo = 'Qwen/Qwen3-1.7B';
const files = [
  { url: hfFileUrl(repo, 'config.json'), bytes: 726 },
  { url: hfFileUrl(repo, 'model-00001-of-00002.safetensors'), bytes: 3_400_000_000 },
  { url: hfFileUrl(repo, 'model-00002-of-00002.safetensors'), bytes: 600_000_000 },
];
// Projection elements: 28 · (2·2048² + 2·1024·2048 + 3·6144·2048) = 1 409 286 144.
// Embedding 151936·2048 bf16 = 622 329 856 B; norms (2·2048 + 2·128)·28 + 2048 = 123 904 bf16 = 247 808 B.
const EMBED = 622_329_856;
const NORMS = 247_808;
// KV at 4096 positions: 2·28·4096·8·128·4 = 939 524 096 B. Activations (T = 512):
// 4·512·(6·2048 + 3·6144 + 32·128) + 4·16·512·4096 + 4·151936 = 206 128 640 B. Inner link: 4·(2·2048² + 6·2048).
const KV = 939_524_096;
const ACT = 206_128_640;
const LINK = 33_603_584;

describe('planSystemDownload', () => {
  it('hfFileUrl follows the hub resolve scheme', () => {
    expect(hfFileUrl(repo, 'config.json')).toBe('https://huggingface.co/Qwen/Qwen3-1.7B/resolve/main/config.json');
    expect(hfFileUrl(repo, 'a/b.json', 'v1')).toBe('https://huggingface.co/Qwen/Qwen3-1.7B/resolve/v1/a/b.json');
  });

  it('sums the bytes to fetch, less the cached files', () => {
    const p = planSystemDownload(files, [{ config: qwen3, weightsBytes: 4_063_000_000 }], big, 'q4_0', { cached: [files[1].url] });
    expect(p.fetchBytes).toBe(600_000_726);
    expect(p.cachedBytes).toBe(3_400_000_000);
    expect(p.totalBytes).toBe(4_000_000_726);
  });

  it('GPU memory of Qwen3-1.7B in q4_0 (1152 B per 2048-wide row) vs f16', () => {
    const q4 = planSystemDownload(files, [{ config: qwen3, weightsBytes: 0 }], big, 'q4_0');
    // 1 409 286 144 · 1152/2048 = 792 723 456 B of q4_0 projections.
    expect(q4.models[0]).toEqual({ weights: 792_723_456 + EMBED + NORMS, kvCache: KV, activations: ACT, links: LINK,
      total: 2_594_557_440 });
    expect(q4.gpuBytes).toBe(2_594_557_440);
    expect(q4.refusal).toBeNull();
    const f16 = planSystemDownload(files, [{ config: qwen3, weightsBytes: 0 }], big, 'f16');
    expect(f16.models[0].weights).toBe(2 * 1_409_286_144 + EMBED + NORMS); // 3 441 149 952
    expect(f16.gpuBytes).toBe(3_441_149_952 + KV + ACT + LINK);
    const q8 = planSystemDownload(files, [{ config: qwen3, weightsBytes: 0 }], big, 'q8_0');
    expect(q8.models[0].weights).toBe((1_409_286_144 / 2048) * 2176 + EMBED + NORMS); // 2048 quants + 64 scales·2
    // As stored: the checkpoint's own payload; training quadruples the link bytes.
    const raw = planSystemDownload(files, [{ config: qwen3, weightsBytes: 4_063_000_000 }], big, null, { training: true, context: 1024 });
    expect(raw.models[0].weights).toBe(4_063_000_000);
    expect(raw.models[0].kvCache).toBe(KV / 4);
    expect(raw.models[0].links).toBe(4 * LINK);
    expect(describePlan(q4)).toBe('fetch 3814.7 MiB, GPU memory ≈ 2474.4 MiB');
  });

  it('the KV cache: f16 where the adapter has shader-f16 (the decoder default there), f32 without, or as asked', () => {
    const withF16 = { ...big, features: ['shader-f16'] };
    const at = (limits: typeof big, kvDtype?: 'f16' | 'f32') =>
      planSystemDownload(files, [{ config: qwen3, weightsBytes: 0 }], limits, 'q4_0', kvDtype ? { kvDtype } : {});
    expect(at(withF16).models[0].kvCache).toBe(KV / 2); // 2·28·4096·8·128·2 = 469 762 048 B
    expect(at(withF16).gpuBytes).toBe(2_594_557_440 - KV / 2);
    expect(at(withF16, 'f32').models[0].kvCache).toBe(KV);
    expect(at(big).models[0].kvCache).toBe(KV);
    expect(at(big, 'f16').models[0].kvCache).toBe(KV / 2);
  });

  it('two agents add outer links in a ring', () => {
    const p = planSystemDownload([], [{ config: qwen3, weightsBytes: 0 }, { config: qwen3, weightsBytes: 0 }], big, 'q4_0');
    // outer_ln_res_adapter 2048→2048: 3·2048² + 2·2048² + 2·2048 + 6·2048 = 20 987 904 params.
    expect(p.models[0].links).toBe(LINK + 4 * 20_987_904);
    expect(p.gpuBytes).toBe(2 * (2_594_557_440 + 4 * 20_987_904));
  });

  it('refuses a row wider than the binding limit; f16 works without shader-f16 (packed reads)', () => {
    const tiny = { maxStorageBufferBindingSize: 4096, maxBufferSize: 1 << 20, features: ['shader-f16'] };
    const p = planSystemDownload([], [{ config: qwen3, weightsBytes: 0 }], tiny, 'f16');
    // The embedding row is 2048 · 2 = 4096 B (fits); down_proj's row is 6144 · 2 = 12288 B.
    expect(p.refusal).toMatch(
      /^model 1: one row of "model\.layers\.0\.mlp\.down_proj\.weight" \(f16, 12288 bytes\) is larger than this adapter's 4096-byte/,
    );
    expect(p.refusalName).toBe('BindingLimitExceeded');
    // In q4_0 the same row is 3456 B and fits.
    expect(planSystemDownload([], [{ config: qwen3, weightsBytes: 0 }], tiny, 'q4_0').refusal).toBeNull();
    const noF16 = planSystemDownload([], [{ config: qwen3, weightsBytes: 0 }], { ...big, features: [] }, 'f16');
    expect(noF16.refusal).toBeNull();
    expect(planSystemDownload([], [{ config: qwen3, weightsBytes: 0 }], { ...big, features: [] }, 'q8_0').refusal).toBeNull();
  });
});
