// The checkpoint registry (checkpoint-registry.ts) over a memory store: an import of files already in the list returns
// that checkpoint instead of a second copy (also for a checkpoint saved before digests were kept); the tab's registry
// announces each change it makes to the views of every tab (checkpoint-events.ts).
import { afterEach, describe, expect, it } from 'vitest';
import { memoryStore } from '../train/file-store';
import { exportBundle } from './bundle';
import { onCheckpointsChanged } from './checkpoint-events';
import { announcing, checkpointRegistry } from './checkpoint-registry';

const enc = (s: string) => new TextEncoder().encode(s);
const FILES = { 'adapter.safetensors': Uint8Array.from({ length: 96 }, (_, i) => (i * 13) & 0xff), 'adapter_config.json': enc('{}\n') };
const INFO = { kind: 'inner' as const, style: 'tiny_distillation', role: 'learner', step: 4, created: '2026-01-02T03:04:05.000Z' };

describe('importing a checkpoint the list holds', () => {
  it('returns the one in the list, marked existing, for the same files under another name, step or order', async () => {
    const reg = checkpointRegistry(memoryStore());
    const first = await reg.importFile(await exportBundle(FILES, INFO), 'learner.zip');
    expect(first.existing).toBeUndefined();
    const reordered = { 'adapter_config.json': FILES['adapter_config.json'], 'adapter.safetensors': FILES['adapter.safetensors'] };
    const again = await reg.importFile(await exportBundle(reordered, { ...INFO, step: 9 }), 'copy of learner.zip');
    expect(again).toEqual({ ...first, existing: true });
    expect((await reg.listCheckpoints()).map((c) => c.name)).toEqual(['learner']);
    // one byte different: a checkpoint of its own
    const other = { ...FILES, 'adapter_config.json': enc('{ }\n') };
    const second = await reg.importFile(await exportBundle(other, INFO), 'other.zip');
    expect(second.existing).toBeUndefined();
    expect((await reg.listCheckpoints()).map((c) => c.name).sort()).toEqual(['learner', 'other']);
  });

  it('finds a checkpoint saved without a digest by its files', async () => {
    const store = memoryStore();
    const reg = checkpointRegistry(store);
    const old = await reg.saveFromFiles(FILES, { ...INFO, name: 'old' });
    const metaPath = `${old.id}/.rmas-meta.json`;
    const { digest, ...meta } = JSON.parse(new TextDecoder().decode(await store.read(metaPath))) as { digest: string };
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    await store.write(metaPath, enc(JSON.stringify(meta)));
    const again = await reg.importFile(await exportBundle(FILES, INFO), 'learner.zip');
    expect(again.id).toBe(old.id);
    expect(again.existing).toBe(true);
  });
});

describe('announcing changes', () => {
  let off: (() => void) | null = null;
  afterEach(() => off?.());

  it('tells a listener of each save, rename, removal and import, and nothing of reads', async () => {
    let heard = 0;
    off = onCheckpointsChanged(() => heard++);
    const next = async (n: number) => {
      for (let i = 0; i < 50 && heard < n; i++) await new Promise((r) => setTimeout(r, 10));
      return heard;
    };
    const reg = announcing(checkpointRegistry(memoryStore()));
    const a = await reg.saveFromFiles(FILES, INFO);
    expect(await next(1)).toBe(1);
    await reg.rename(a.id, 'renamed');
    expect(await next(2)).toBe(2);
    await reg.listCheckpoints();
    await reg.files(a.id);
    await reg.exportBundle(a.id);
    const b = await reg.importFile(await exportBundle({ ...FILES, 'adapter_config.json': enc('[]\n') }, INFO), 'b.zip');
    expect(await next(3)).toBe(3);
    await reg.remove(b.id);
    expect(await next(4)).toBe(4);
    await new Promise((r) => setTimeout(r, 50));
    expect(heard).toBe(4); // the reads announced nothing
    expect((await reg.listCheckpoints()).map((c) => c.name)).toEqual(['renamed']);
  });
});
