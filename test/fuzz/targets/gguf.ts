/**
 * Fuzz targets: GGUF files (readGgufHeader, then every tensor through readGgufTensor) and the decoder config a
 * GGUF model's metadata gives (decoderConfigFromGguf, as loadDecoderFromGguf starts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { byteSize, f32ToBf16Bits, f32ToF16Bits } from '../../../src/formats/dtype';
import { GGML_TYPE, readGgufHeader, readGgufTensor } from '../../../src/formats/gguf';
import { type GgufKv, type GgufWriterTensor, writeGguf } from '../../../src/testing/gguf-writer';
import { memorySource } from '../../../src/formats/sources';
import { parseDecoderConfig } from '../../../src/model/config';
import { decoderConfigFromGguf } from '../../../src/model/gguf-config';
import { ggufMetadata } from '../../../src/testing/model';
import type { FuzzTarget } from '../harness';
import { ggufBoundaries, mutateGguf } from '../mutate';
import { ROOT, bytesKey, cutsAt, expectThat, fnv } from './common';

const u16le = (v: number[]) => new Uint8Array(new Uint16Array(v).buffer);
const pattern = (n: number, k: number) => Uint8Array.from({ length: n }, (_, i) => (i * k + 3) & 0xff);
const f32 = (v: number[]) => new Uint8Array(new Float32Array(v).buffer);

/** The reader's own test file (every type it decodes), a v2 file, and a file of k-quants with real scales. */
function seeds(): Uint8Array[] {
  const tensors: GgufWriterTensor[] = [
    { name: 'token_embd.weight', ne: [5, 3], type: GGML_TYPE.F32, data: f32(Array.from({ length: 15 }, (_, i) => i - 7)) },
    { name: 'norm.weight', ne: [3, 2], type: GGML_TYPE.F16, data: u16le([0.5, -1.25, 3, 65504, 0, 1].map(f32ToF16Bits)) },
    { name: 'bf.weight', ne: [4], type: GGML_TYPE.BF16, data: u16le([1.5, -2, 3, 0].map(f32ToBf16Bits)) },
    { name: 'blk.0.attn_q.weight', ne: [64, 2], type: GGML_TYPE.Q8_0, data: pattern(4 * 34, 7) },
    { name: 'blk.0.ffn_up.weight', ne: [32, 3], type: GGML_TYPE.Q4_0, data: pattern(3 * 18, 37) },
  ];
  const kv: GgufKv[] = [
    { key: 'general.architecture', type: 'str', value: 'llama' },
    { key: 'llama.block_count', type: 'u32', value: 2 },
    { key: 'llama.attention.layer_norm_rms_epsilon', type: 'f32', value: 1e-6 },
    { key: 'tokenizer.ggml.tokens', type: 'arr_str', value: ['<s>', 'a', 'bc'] },
    { key: 'tokenizer.ggml.token_type', type: 'arr_i32', value: [3, 1, -1] },
  ];
  const kq = writeGguf([{ key: 'general.alignment', type: 'u32', value: 64 }], [
    { name: 'k4', ne: [256, 2], type: GGML_TYPE.Q4_K, data: pattern(2 * 144, 13) },
    { name: 'k6', ne: [256], type: GGML_TYPE.Q6_K, data: pattern(210, 29) },
    { name: 'q5', ne: [32], type: GGML_TYPE.Q5_0, data: pattern(22, 3) }, // a type it lists but does not decode
  ], { alignment: 64 });
  return [writeGguf(kv, tensors), writeGguf(kv.slice(0, 2), tensors.slice(0, 3), { version: 2 }), kq];
}

export const gguf: FuzzTarget<Uint8Array> = {
  name: 'gguf',
  seeds,
  truncations: (b) => cutsAt(b, ggufBoundaries(b)),
  mutate: mutateGguf,
  labels: () => ['fuzz.gguf'],
  size: (b) => b.length,
  key: bytesKey,
  // k-quants become f32: 256 values from 144 bytes, 7 times the input
  allocFactor: 64,
  run: async (b) => {
    const f = await readGgufHeader(memorySource(b, 'fuzz.gguf'));
    const parts = [JSON.stringify(f.metadata, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))];
    for (const t of f.tensors) {
      if (!t.dtype) {
        parts.push(`${t.name}:${t.typeName}`);
        continue;
      }
      const x = await readGgufTensor(f, t);
      expectThat(x.bytes.length === byteSize(x.dtype, x.shape), `tensor ${t.name}: ${x.bytes.length} bytes for ${x.dtype} [${x.shape}]`);
      parts.push(`${t.name}:${x.dtype}[${x.shape}]:${fnv(x.bytes)}`);
    }
    return parts.join('|');
  },
  files: (b) => ({ 'fuzz.gguf': b }),
};

/** GGUF models as llama.cpp's converter writes their metadata (from the tiny models' config.json), embedding included. */
function modelSeeds(): Uint8Array[] {
  return ['qwen3-tiny', 'llama-tiny', 'gemma3-tiny', 'qwen3_5-tiny'].map((name) => {
    const c = parseDecoderConfig(readFileSync(join(ROOT, 'models/tiny', name, 'config.json'), 'utf8'), name);
    const tensors: GgufWriterTensor[] = [{ name: 'token_embd.weight', ne: [c.hidden, c.vocabSize], type: GGML_TYPE.F16,
      data: new Uint8Array(2 * c.hidden * c.vocabSize) }];
    const half = c.headDim / 2;
    if (c.rope.scaling) tensors.push({ name: 'rope_freqs.weight', ne: [half], type: GGML_TYPE.F32, data: f32(Array(half).fill(1)) });
    return writeGguf(ggufMetadata(c), tensors);
  });
}

export const ggufConfig: FuzzTarget<Uint8Array> = {
  name: 'gguf-config',
  seeds: modelSeeds,
  truncations: (b) => cutsAt(b, ggufBoundaries(b).filter((_x, i, all) => i % Math.ceil(all.length / 40) === 0)),
  mutate: mutateGguf,
  labels: () => ['model.gguf'],
  size: (b) => b.length,
  key: bytesKey,
  run: async (b) => {
    const c = await decoderConfigFromGguf(await readGgufHeader(memorySource(b, 'model.gguf')));
    expectThat(c.windowLayers.length === c.layers && c.layers <= 1024, `a config of ${c.layers} layers`);
    const partial = c.rope.partialRotaryFactor;
    const fits = partial === undefined || (partial > 0 && partial <= 1);
    expectThat(fits, `partial rotary factor ${partial}: more dimensions rotate than a head has`);
    return JSON.stringify(c);
  },
  files: (b) => ({ 'model.gguf': b }),
};
