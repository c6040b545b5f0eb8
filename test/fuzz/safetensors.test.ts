/**
 * Fuzzing the safetensors readers (test/fuzz/harness.ts has the property and the knobs): single files from
 * memory, sharded checkpoints from a folder; and the regression cases the fuzzer found, minimised.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CorruptCheckpoint } from '../../src/errors';
import { SafetensorsFile, writeSafetensors } from '../../src/formats/safetensors';
import { INDEX_FILE, openCheckpoint } from '../../src/formats/safetensors-sharded';
import { fileSource } from '../../src/formats/sources';
import { fuzzReader, fuzzTimeout } from './harness';
import { deepJson, joinSafetensors } from './mutate';

describe('fuzz: safetensors', () => {
  it('single files: each case reads to a consistent result or a named error naming the file', async () => {
    expect(await fuzzReader('safetensors.ts', 'safetensors', 3000)).toEqual([]);
  }, fuzzTimeout());

  it('sharded checkpoints (index + shards in a folder)', async () => {
    expect(await fuzzReader('safetensors.ts', 'shardedSafetensors', 500)).toEqual([]);
  }, fuzzTimeout());
});

describe('safetensors: regressions found by the fuzzer', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'rmas-fuzz-st-'));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const shard = writeSafetensors({ w: { dtype: 'F32', shape: [1], bytes: new Uint8Array(4) } });
  /** A checkpoint folder of one shard and this index text. */
  const folder = (name: string, index: string) => {
    const dir = join(tmp, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'model-00001-of-00001.safetensors'), shard);
    writeFileSync(join(dir, INDEX_FILE), index);
    return dir;
  };
  const rejects = async (p: Promise<unknown>) => {
    const e = await p.then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(CorruptCheckpoint);
    return (e as Error).message;
  };

  it('an index whose metadata nests 100 000 deep opens (it was a RangeError: String() of the value); only scalars are kept', async () => {
    const dir = folder('deep-meta', `{"metadata":{"total_size":4,"note":${deepJson(100_000)}},` +
      '"weight_map":{"w":"model-00001-of-00001.safetensors"}}');
    const st = await openCheckpoint(dir);
    expect(st.metadata).toEqual({ total_size: '4' });
    expect(st.names()).toEqual(['w']);
    await st.close();
  });

  it('a weight_map value nested 100 000 deep is refused naming the index (it was a RangeError: JSON.stringify in the message)',
    async () => {
    const dir = folder('deep-map', `{"weight_map":{"w":${deepJson(100_000)}}}`);
    expect(await rejects(openCheckpoint(dir))).toContain(`${INDEX_FILE}: tensor "w" maps to [an array too deep or cyclic to show]`);
  });

  it('a shard named "." (the folder itself) is refused by the index check (it was a raw EISDIR from the first read)', async () => {
    const dir = folder('dot', '{"weight_map":{"w":"."}}');
    expect(await rejects(openCheckpoint(dir))).toMatch(/tensor "w" maps to ".", expected a shard file name inside the checkpoint folder/);
    for (const bad of ['a/', 'a//b', './a', 'a/./b']) {
      writeFileSync(join(dir, INDEX_FILE), JSON.stringify({ weight_map: { w: bad } }));
      expect(await rejects(openCheckpoint(dir))).toMatch(/expected a shard file name/);
    }
    // and a file source over a folder says so, whatever reads it
    expect(await rejects(fileSource(dir).read(0, 1))).toBe(`${dir} is a folder or a device, not a file; check the path`);
  });

  it('a header whose shape nests 100 000 deep is refused naming the file (a JSON.stringify in the message overflowed the stack)',
    async () => {
    const b = joinSafetensors(`{"a":{"dtype":"F32","shape":${deepJson(100_000)},"data_offsets":[0,0]}}`, new Uint8Array(0));
    expect(await rejects(SafetensorsFile.fromBytes(b, 'deep.safetensors'))).toMatch(/^deep\.safetensors: tensor "a" has shape \[an array/);
  });
});
