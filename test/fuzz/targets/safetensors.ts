/**
 * Fuzz targets: one safetensors file (SafetensorsFile over memory, every tensor read and converted to storage)
 * and a sharded checkpoint folder (index + shards on disk, opened by openCheckpoint as model loading does).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ST_DTYPE_BYTES, SafetensorsFile, type StTensor, toStorage, writeSafetensors } from '../../../src/formats/safetensors';
import { INDEX_FILE, openCheckpoint } from '../../../src/formats/safetensors-sharded';
import type { FuzzTarget } from '../harness';
import { HOSTILE_NAMES, mutateBytes, mutateSafetensors, pick, safetensorsBoundaries } from '../mutate';
import { type Files, bytesKey, cutsAt, enc, expectThat, filesKey, filesSize, fileCuts, fnv, mutateOneFile, repoFile } from './common';

const t = (dtype: StTensor['dtype'], shape: number[], fill = 1): StTensor => {
  let n = ST_DTYPE_BYTES[dtype];
  for (const s of shape) n *= s;
  return { dtype, shape, bytes: Uint8Array.from({ length: n }, (_, i) => (i * 31 + fill) & 0xff) };
};

const i64 = (...v: bigint[]): StTensor => ({ dtype: 'I64', shape: [v.length], bytes: new Uint8Array(BigInt64Array.from(v).buffer) });

/** A small file of every dtype, a scalar, an empty tensor and metadata; the tiny Qwen3's weights. */
function singleSeeds(): Uint8Array[] {
  const mixed = writeSafetensors({
    'a.f32': t('F32', [3, 4]), 'b.f16': t('F16', [5]), 'c.bf16': t('BF16', [2, 2]), 'd.i64': i64(1n, -2n, 2147483647n),
    'e.u8': t('U8', [7]),
    'f.f64': t('F64', [2]), 'g.bool': t('BOOL', [4]), 'h.i32': t('I32', [1, 1, 2]), scalar: t('F32', []), empty: t('F16', [0, 3]),
  }, { format: 'pt', note: 'fuzz seed' });
  return [mixed, writeSafetensors({ only: t('F32', [2]) }), repoFile('models/tiny/qwen3-tiny/model.safetensors')];
}

/** Every tensor read, checked against its header entry and converted to a storage dtype; a digest of all of it. */
async function readAll(f: SafetensorsFile, where: string): Promise<string> {
  const parts: string[] = [];
  for (const name of f.names()) {
    const info = f.info(name);
    const x = await f.read(name);
    const numel = x.shape.reduce((a, b) => a * b, 1);
    expectThat(x.bytes.length === numel * ST_DTYPE_BYTES[x.dtype] && x.bytes.length === info.end - info.begin,
      `tensor ${name} read ${x.bytes.length} bytes for ${x.dtype} [${x.shape}]`);
    const s = toStorage(x, name, where);
    parts.push(`${name}:${x.dtype}[${x.shape}]@${info.begin}:${fnv(s.bytes)}`);
  }
  return `${JSON.stringify(f.metadata)}|${parts.join(',')}`;
}

export const safetensors: FuzzTarget<Uint8Array> = {
  name: 'safetensors',
  seeds: singleSeeds,
  truncations: (b) => cutsAt(b, safetensorsBoundaries(b)),
  mutate: (rng, b) => (rng.int(4) ? mutateSafetensors(rng, b) : mutateBytes(rng, b)),
  labels: () => ['fuzz.safetensors'],
  size: (b) => b.length,
  key: bytesKey,
  run: async (b) => readAll(await SafetensorsFile.fromBytes(b, 'fuzz.safetensors'), 'fuzz.safetensors'),
  files: (b) => ({ 'fuzz.safetensors': b }),
};

// ---- sharded

const SHARD = (i: number) => `model-0000${i}-of-00003.safetensors`;

function shardedSeeds(): Files[] {
  const shards: Record<string, StTensor>[] = [
    { 'model.embed_tokens.weight': t('BF16', [6, 4]), 'model.norm.weight': t('F32', [4]) },
    { 'model.layers.0.mlp.up_proj.weight': t('F16', [3, 4]), 'model.layers.0.input_layernorm.weight': t('F32', [4], 9) },
    { 'lm_head.weight': t('BF16', [6, 4], 5) },
  ];
  const files: Files = {};
  const weightMap: Record<string, string> = {};
  shards.forEach((s, i) => {
    files[SHARD(i + 1)] = writeSafetensors(s, { format: 'pt' });
    for (const n of Object.keys(s)) weightMap[n] = SHARD(i + 1);
  });
  files[INDEX_FILE] = enc(JSON.stringify({ metadata: { total_size: 200 }, weight_map: weightMap }, null, 2));
  // the same checkpoint with one shard mapped twice and a tensor of shard 1 left out of the map
  const partial = { ...files,
    [INDEX_FILE]: enc(JSON.stringify({ weight_map: { 'lm_head.weight': SHARD(3), 'model.norm.weight': SHARD(1) } })) };
  return [files, partial];
}

/** Index mutations that aim at the map: hostile shard names, a tensor mapped to the wrong shard or a missing one. */
function mutateIndex(rng: Parameters<FuzzTarget<Files>['mutate']>[0], files: Files): Files {
  let idx: { weight_map?: Record<string, unknown> };
  try {
    idx = JSON.parse(new TextDecoder().decode(files[INDEX_FILE])) as typeof idx;
  } catch {
    return mutateOneFile(rng, files, (r, b) => mutateSafetensors(r, b));
  }
  const wm = idx.weight_map ?? {};
  const names = Object.keys(wm);
  if (!names.length) return mutateOneFile(rng, files, (r, b) => mutateSafetensors(r, b));
  const n = pick(rng, names);
  wm[n] = pick(rng, [...HOSTILE_NAMES, SHARD(1), SHARD(2), SHARD(3), 'model-00009-of-00003.safetensors', INDEX_FILE, 1, null, ['x']]);
  if (rng.int(3) === 0) wm[`${n}.extra`] = wm[n];
  return { ...files, [INDEX_FILE]: enc(JSON.stringify(idx)) };
}

export const shardedSafetensors: FuzzTarget<Files> = {
  name: 'safetensors-sharded',
  seeds: shardedSeeds,
  truncations: (f) => fileCuts(f, (b) => safetensorsBoundaries(b)),
  mutate: (rng, f) => (rng.int(3) ? mutateOneFile(rng, f, (r, b) => (r.int(4) ? mutateSafetensors(r, b) : mutateBytes(r, b)))
    : mutateIndex(rng, f)),
  labels: (_f, ctx) => [ctx.dir],
  size: filesSize,
  key: filesKey,
  run: async (files, ctx) => {
    for (const [n, b] of Object.entries(files)) writeFileSync(join(ctx.dir, n), b);
    const store = await openCheckpoint(ctx.dir);
    try {
      const parts: string[] = [];
      for (const name of store.names().sort()) {
        const x = await store.read(name);
        const info = store.info(name);
        expectThat(x.bytes.length === info.end - info.begin, `tensor ${name}: ${x.bytes.length} bytes for [${info.begin}, ${info.end})`);
        parts.push(`${name}:${x.dtype}[${x.shape}]:${fnv(x.bytes)}`);
      }
      return parts.join(',');
    } finally {
      await store.close();
    }
  },
  files: (f) => f,
};
