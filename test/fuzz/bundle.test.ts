/**
 * Fuzzing checkpoint bundles (zip): importBundle, the runner's extraction to disk (materialize: nothing may land
 * outside its folder) and the page's import into the checkpoint registry; test/fuzz/harness.ts has the property.
 * Below, the regression cases.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { writeZip } from '../../src/formats/zip';
import { importBundle } from '../../src/store/bundle';
import { checkpointRegistry } from '../../src/store/checkpoint-registry';
import { memoryStore } from '../../src/train/file-store';
import { fuzzReader, fuzzTimeout } from './harness';
import { deepJson } from './mutate';

describe('fuzz: checkpoint bundles', () => {
  it('importBundle: each case imports plain relative files or throws a named error naming the file', async () => {
    expect(await fuzzReader('bundle.ts', 'bundle', 1500)).toEqual([]);
  }, fuzzTimeout());

  it('materialize: extraction writes nothing outside its folder', async () => {
    expect(await fuzzReader('bundle.ts', 'bundleExtract', 800)).toEqual([]);
  }, fuzzTimeout());

  it("the page's import (CheckpointsView → registry.importFile) stores the checkpoint under its own id or refuses it by name",
    async () => {
    expect(await fuzzReader('bundle.ts', 'pageImport', 800)).toEqual([]);
  }, fuzzTimeout());
});

describe('bundles: regressions', () => {
  it("the page imports a file whose name is over 200 characters, named after its first 200 (found by the fuzzer: it was an " +
    'InvalidArgument that did not name the file)', async () => {
    const reg = checkpointRegistry(memoryStore());
    const long = `${'x'.repeat(259)}é`;
    const info = await reg.importFile(new Uint8Array(readFileSync(new URL('../../src/formats/fixtures/torch_small.pt', import.meta.url))),
      `${long}.pt`);
    expect(info.name).toBe('x'.repeat(200));
    expect(info.files).toEqual([`${long}.pt`]);
    // a name of spaces falls back to the checkpoint's kind
    const blank = await reg.importFile(new Uint8Array(readFileSync(new URL('../../src/formats/fixtures/torch_small.pt', import.meta.url))),
      '   .pt');
    expect(blank.name).toBe('inner');
  });
});

// Found by the 20x fuzz run: bundle.json's version was shown with String(), which overflowed the stack on a deep array
// and threw on an object whose toString is not a function.
describe('bundles: what the long run found', () => {
  for (const [what, version] of [['nested 100 000 deep', deepJson(100_000)], ['{"toString": 1}', '{"toString": 1}']] as const) {
    it(`a bundle.json version ${what} is refused naming the bundle`, async () => {
      const meta = `{"format": "rmas-checkpoint-bundle", "version": ${version}, "kind": "inner", "files": {}}`;
      const zip = writeZip([['bundle.json', new TextEncoder().encode(meta)]]);
      await expect(importBundle(zip, 'b.zip')).rejects.toThrow(/^b\.zip: /);
    });
  }
});
