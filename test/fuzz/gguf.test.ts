/**
 * Fuzzing the GGUF reader (header and every tensor) and the decoder config read from a GGUF model's metadata;
 * test/fuzz/harness.ts has the property. Below them, the regression cases (the one here was found reading the reader
 * while writing its fuzz target).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GGML_TYPE, readGgufHeader } from '../../src/formats/gguf';
import { type GgufKv, writeGguf } from '../../src/testing/gguf-writer';
import { memorySource } from '../../src/formats/sources';
import { parseDecoderConfig } from '../../src/model/config';
import { decoderConfigFromGguf } from '../../src/model/gguf-config';
import { ggufMetadata } from '../../src/testing/model';
import { fuzzReader, fuzzTimeout } from './harness';

describe('fuzz: GGUF', () => {
  it('files: each case reads to a consistent result or a named error naming the file', async () => {
    expect(await fuzzReader('gguf.ts', 'gguf', 1000)).toEqual([]);
  }, fuzzTimeout());

  it('model metadata: decoderConfigFromGguf', async () => {
    expect(await fuzzReader('gguf.ts', 'ggufConfig', 400)).toEqual([]);
  }, fuzzTimeout());
});

describe('GGUF: regressions', () => {
  it('a Q8_0 tensor of 96 elements in rows of 3 is refused at the header, naming the file (ggufToStorage threw without one)',
    async () => {
    const b = writeGguf([], [{ name: 'q', ne: [3, 32], type: GGML_TYPE.Q8_0, data: new Uint8Array(3 * 34) }]);
    await expect(readGgufHeader(memorySource(b, 'rows.gguf'))).rejects.toThrow(
      /^rows\.gguf: tensor "q" \[32,3\] has rows of 3 elements, not a whole number of Q8_0 blocks of 32/,
    );
  });
});

// Found by the 20x fuzz run: qwen35's rope.dimension_count was not bounded by the head: 2^31 made checkTextRope walk
// 2^30 rotary pairs (16 s), and a count above head_dim was taken as a partial rotary factor above 1.
describe('GGUF model metadata: what the long run found', () => {
  const qwen35 = (dims: number) => {
    const c = parseDecoderConfig(readFileSync(new URL('../../models/tiny/qwen3_5-tiny/config.json', import.meta.url), 'utf8'));
    const kv = ggufMetadata(c).map((x) => (x.key === 'qwen35.rope.dimension_count' ? { ...x, value: dims } : x));
    const data = new Uint8Array(2 * c.hidden * c.vocabSize);
    return writeGguf(kv as GgufKv[], [{ name: 'token_embd.weight', ne: [c.hidden, c.vocabSize], type: GGML_TYPE.F16, data }]);
  };
  it('a rope.dimension_count above the head dimension is refused naming the file', async () => {
    const f = await readGgufHeader(memorySource(qwen35(96), 'q.gguf'));
    await expect(decoderConfigFromGguf(f)).rejects.toThrow(/^q\.gguf: metadata "qwen35\.rope\.dimension_count" .* got 96;/);
  });
  it('a rope.dimension_count of 2^28 is refused at once (it walked 2^27 pairs for about a second; 2^31 took 16 s)', async () => {
    const f = await readGgufHeader(memorySource(qwen35(2 ** 28), 'q.gguf'));
    const t0 = performance.now();
    await expect(decoderConfigFromGguf(f)).rejects.toThrow(
      /^q\.gguf: metadata "qwen35\.rope\.dimension_count" must be an even number of rotated dimensions from 2 to the head dimension \d+, got 268435456/);
    expect(performance.now() - t0).toBeLessThan(250);
  }, 60_000);
});
