/**
 * The IndexedDB checkpoint store and the tab's checkpoint registry, in headless Chromium: the shared
 * FileStore contract, a training checkpoint saved and loaded through it bit for bit, 8 MiB chunking
 * (a 20 MiB file is 3 chunks), a damaged chunk → CorruptCheckpoint, a full disk (QuotaExceededError from
 * the object store) → QuotaExceeded with the old contents intact and no chunks left behind, and the
 * registry: save, list, rename, export/import as a bundle (equal bytes), bare .pt import, remove.
 */
import { createStore, get, keys, set, type UseStore } from 'idb-keyval';
import { describe, expect, it } from 'vitest';
import { CorruptCheckpoint, MissingCheckpoint, QuotaExceeded } from '../errors';
import { writeTorchStateDict } from '../formats/torch';
import { InnerLink } from '../mas/links';
import { CpuBackend } from '../tensor/cpu';
import { loadCheckpoint, saveCheckpoint } from '../train/checkpoint';
import { importBundle } from './bundle';
import { checkpointRegistry } from './checkpoint-registry';
import { CHUNK_BYTES, idbFileStore } from './idb-store';
import { checkpointStoreContract } from '../testing/store-contract';

let n = 0;
const fresh = (opts: { store?: UseStore } = {}) => idbFileStore(`test-${Date.now()}-${++n}`, opts);
const enc = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array) => new TextDecoder().decode(b);
const pattern = (len: number, seed: number) => {
  const b = new Uint8Array(len);
  let x = seed >>> 0;
  for (let i = 0; i < len; i++) { x = (Math.imul(x, 1664525) + 1013904223) >>> 0; b[i] = x >>> 24; }
  return b;
};
const same = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((v, i) => v === b[i]);
async function caught(p: Promise<unknown>): Promise<Error> {
  const e = await p.then(() => null, (x: unknown) => x);
  if (!(e instanceof Error)) throw new Error('expected a rejection');
  return e;
}

checkpointStoreContract('idbFileStore', async () => fresh());

describe('idbFileStore', () => {
  it('keeps a training checkpoint: saveCheckpoint → loadCheckpoint restores weights and AdamW state exactly', async () => {
    const cpu = new CpuBackend('f32');
    const store = fresh();
    const link = InnerLink.create(cpu, 8, { seed: 5, name: 'planner inner' });
    const m = new Map(
      link.params.entries.map((e, i) => [e.name, Float32Array.from({ length: e.numel }, (_, j) => (i + 1) * 0.01 * (j - 3))]),
    );
    link.params.import(m, { part: 'm' });
    const state = { step: 3, epoch: 0, sampleCursor: 6, order: [2, 0, 1], rng: [1, 2], skipped: {}, tokensSeen: 99 };
    await saveCheckpoint(store, 'run/checkpoint-3', {
      kind: 'inner',
      links: new Map([['adapter', link]]),
      optimizerT: 3,
      state,
      args: { lr: 1 },
      manifests: { 'adapter_config.json': { adapter_type: link.type } },
    });
    expect(await store.list('run/checkpoint-3')).toEqual([
      'adapter.pt',
      'adapter.safetensors',
      'adapter_config.json',
      'optimizer.safetensors',
      'train_args.json',
      'trainer_state.json',
    ]);
    const other = InnerLink.create(cpu, 8, { seed: 6, name: 'fresh' });
    const loaded = await loadCheckpoint(store, 'run/checkpoint-3', new Map([['adapter', other]]));
    expect([loaded.optimizerT, loaded.state, loaded.args]).toEqual([3, state, { lr: 1 }]);
    for (const part of ['data', 'm'] as const) {
      const [a, b] = [await link.params.export(part), await other.params.export(part)];
      for (const [k, v] of a) expect(Array.from(b.get(k)!), `${part} ${k}`).toEqual(Array.from(v));
    }
    link.dispose(); other.dispose();
  });

  it('splits a 20 MiB file into 3 chunks of at most 8 MiB and reads it back equal; overwriting drops the old chunks', async () => {
    const store = fresh();
    const big = pattern(20 * 2 ** 20, 7);
    await store.write('model/weights.bin', big);
    const e = (await store.entry('model/weights.bin'))!;
    expect([e.size, e.chunks.length]).toEqual([big.length, 3]);
    const sizes = await Promise.all(e.chunks.map(async (k) => ((await get(k, store.idb)) as Uint8Array).length));
    expect(sizes).toEqual([CHUNK_BYTES, CHUNK_BYTES, 4 * 2 ** 20]);
    expect(same(await store.read('model/weights.bin'), big)).toBe(true);
    await store.write('model/weights.bin', enc('small'));
    expect((await keys(store.idb)).filter((k) => String(k).startsWith('c:')).length).toBe(1);
    expect(text(await store.read('model/weights.bin'))).toBe('small');
  });

  it('a damaged or missing chunk is CorruptCheckpoint naming the file', async () => {
    const store = fresh();
    await store.write('ck/adapter.pt', pattern(CHUNK_BYTES + 10, 3));
    const [c0, c1] = (await store.entry('ck/adapter.pt'))!.chunks;
    const bad = ((await get(c1!, store.idb)) as Uint8Array).slice();
    bad[4] ^= 1;
    await set(c1!, bad, store.idb);
    let e = await caught(store.read('ck/adapter.pt'));
    expect(e).toBeInstanceOf(CorruptCheckpoint);
    expect(e.message).toMatch(/^ck\/adapter\.pt in browser storage fails its SHA-256 check.*cache manager/);
    await set(c0!, undefined, store.idb);
    e = await caught(store.read('ck/adapter.pt'));
    expect(e.message).toContain('lacks chunk 1 of 2');
    expect(await caught(store.read('ck/none.pt'))).toBeInstanceOf(MissingCheckpoint);
  });

  it('a full disk is QuotaExceeded with the size; the stored file stays whole and no new chunk is left', async () => {
    const base = createStore(`quota-${Date.now()}`, 'files');
    let full = false;
    // The object store, except that put() of a chunk throws QuotaExceededError once `full` is set (after 1 chunk).
    let chunksPut = 0;
    const wrapped: UseStore = (mode, cb) => base(mode, (os) => cb(new Proxy(os, {
      get(t, prop) {
        if (prop === 'put') {
          return (v: unknown, k?: IDBValidKey) => {
            if (full && v instanceof Uint8Array && ++chunksPut > 1)
              throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
            return t.put(v, k);
          };
        }
        const v = Reflect.get(t, prop, t) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
      },
    })));
    const store = fresh({ store: wrapped });
    const old = pattern(1000, 1);
    await store.write('ck/adapter.safetensors', old);
    const before = (await keys(base)).map(String).sort();
    full = true;
    const e = await caught(store.write('ck/adapter.safetensors', pattern(CHUNK_BYTES * 2 + 5, 2)));
    expect(e).toBeInstanceOf(QuotaExceeded);
    expect(e.message).toMatch(
      /saving ck\/adapter\.safetensors needed 16\.0 MiB\. Delete models or checkpoints you no longer need .*nothing stored was changed/,
    );
    expect(chunksPut).toBe(2); // the first new chunk went in, the second hit the quota
    expect((await keys(base)).map(String).sort()).toEqual(before); // and the first was removed again
    expect(same(await store.read('ck/adapter.safetensors'), old)).toBe(true);
  });
});

describe('checkpoint registry over IndexedDB', () => {
  it('saves, lists, renames, exports and re-imports with equal bytes, imports a bare .pt, removes', async () => {
    const reg = checkpointRegistry(fresh());
    const pt = writeTorchStateDict(
      new Map([['proj.weight', { dtype: 'f32' as const, shape: [2, 2], bytes: new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer) }]]),
    );
    const files = {
      'outer_12.pt': pt,
      'outerlink_config.json': enc('{"format_version":1}\n'),
      'trainer_state.json': enc('{"state":{"step":5}}\n'),
    };
    const a = await reg.saveFromFiles(files, { kind: 'outer', style: 'sequential_light', step: 5, created: '2026-01-01T00:00:00.000Z' });
    expect(a).toMatchObject({
      name: 'outer sequential_light step 5',
      kind: 'outer',
      step: 5,
      bytes: pt.length + 21 + 21,
      files: ['outer_12.pt', 'outerlink_config.json', 'trainer_state.json'],
    });
    expect((await reg.rename(a.id, 'my links')).name).toBe('my links');

    const zip = await reg.exportBundle(a.id);
    const opened = await importBundle(zip, 'my links.zip');
    expect([opened.meta.kind, opened.meta.style, opened.meta.step]).toEqual(['outer', 'sequential_light', 5]);
    // the same files again: the one in the list, not a copy
    expect(await reg.importFile(zip, 'my links (1).zip')).toEqual({ ...(await reg.listCheckpoints())[0], existing: true });
    const other = checkpointRegistry(fresh());
    const b = await other.importFile(zip, 'my links.zip');
    const [fa, fb] = [await reg.files(a.id), await other.files(b.id)];
    expect(Object.keys(fb)).toEqual(Object.keys(fa));
    for (const k of Object.keys(fa)) expect(same(fb[k]!, fa[k]!), k).toBe(true);
    expect(same(await other.exportBundle(b.id), zip)).toBe(true); // same files and created → the same bundle bytes

    const c = await reg.importFile(pt, 'C:\\dl\\adapter(math).pt');
    expect([c.name, c.kind, c.files]).toEqual(['adapter(math)', 'inner', ['adapter(math).pt']]);
    expect((await reg.listCheckpoints()).map((x) => x.name).sort()).toEqual(['adapter(math)', 'my links']);
    await reg.remove(a.id);
    expect((await reg.listCheckpoints()).map((x) => x.id)).toEqual([c.id]);
    expect(await caught(reg.files(a.id))).toBeInstanceOf(MissingCheckpoint);
  });
});
