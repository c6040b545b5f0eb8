/**
 * Fuzzing the GGUF reader (header and every tensor) and the decoder config read from a GGUF model's metadata;
 * test/fuzz/harness.ts has the property. Below them, the regression cases (the one here was found reading the reader
 * while writing its fuzz target).
 */
import { describe, expect, it } from 'vitest';
import { GGML_TYPE, readGgufHeader } from '../../src/formats/gguf';
import { writeGguf } from '../../src/formats/gguf-writer';
import { memorySource } from '../../src/formats/sources';
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
