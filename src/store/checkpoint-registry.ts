/**
 * The tab's checkpoint registry (browser; any FileStore works, tests use memoryStore too): each
 * checkpoint is a folder `<id>/` of plain checkpoint files plus `<id>/.rmas-meta.json` (display name,
 * kind, style, role, step, created, file sizes). A save writes everything under `.incoming-<id>/` and
 * renames it to `<id>` in one store.rename, so a checkpoint is listed whole or not at all. This is what
 * the Checkpoints view uses, and where training runs' checkpoints are kept (saveFromFiles with the
 * worker's checkpointFiles(runId)).
 */
import { InvalidArgument, MissingCheckpoint } from '../errors';
import type { FileStore } from '../train/file-store';
import { type BundleInfo, type CheckpointFiles, type CheckpointKind, exportBundle as bundleOf, importBundle } from './bundle';
import { announceCheckpointsChanged } from './checkpoint-events';
import { idbFileStore } from './idb-store';
import { sha256Hex } from '../util/sha256';

export interface CheckpointInfo {
  id: string;
  name: string;
  kind: CheckpointKind;
  style?: string;
  role?: string;
  step?: number;
  /** ISO 8601. */
  created: string;
  /** Total size of its files. */
  bytes: number;
  files: string[];
}

export interface CheckpointMeta extends BundleInfo {
  /** Display name (default: '<kind> <style> <role> step <step>'). */
  name?: string;
}

const META = '.rmas-meta.json';
const INCOMING = '.incoming-';
/** A staging folder this old was left by a save that died (a closed tab, a crash): no save takes an hour. */
const STALE_STAGE_MS = 3600_000;
/** Whether `name` is a staging folder older than STALE_STAGE_MS, by the time its id was made (`ckpt-<ms base 36>-…`). */
const staleStage = (name: string, now: number) => {
  const made = parseInt(name.slice(INCOMING.length).split('-')[1] ?? '', 36);
  return name.startsWith(INCOMING) && Number.isFinite(made) && now - made > STALE_STAGE_MS;
};
const utf8 = new TextEncoder();
let idCounter = 0;

interface StoredMeta extends Omit<CheckpointInfo, 'id' | 'files' | 'bytes'> {
  sizes: Record<string, number>;
  /** contentDigest of its files (absent in checkpoints saved before it was kept: computed when needed). */
  digest?: string;
}

/** One SHA-256 over a checkpoint's file names and contents: equal for the same files, whatever their order. */
async function contentDigest(files: CheckpointFiles): Promise<string> {
  const lines: string[] = [];
  for (const n of Object.keys(files).sort()) lines.push(`${n}\t${await sha256Hex(files[n]!)}`);
  return sha256Hex(utf8.encode(lines.join('\n')));
}

const checkId = (id: string) => {
  if (!/^[\w-]+$/.test(id) || id.startsWith('.'))
    throw new InvalidArgument(`checkpoint id '${id}' is not one this registry made; pick one from listCheckpoints()`);
  return id;
};
const cleanName = (name: string) => {
  const n = String(name ?? '').trim();
  if (!n || n.length > 200) throw new InvalidArgument('a checkpoint name must be 1 to 200 characters');
  return n;
};
/** `s` trimmed and cut to 200 UTF-16 units (without splitting a surrogate pair), as a display name. */
const short = (s: string) => {
  const t = s.trim().slice(0, 200);
  return (/[\ud800-\udbff]$/.test(t) ? t.slice(0, -1) : t).trim();
};
const defaultName = (m: CheckpointMeta) =>
  [m.kind, m.style, m.role, m.step !== undefined ? `step ${m.step}` : null].filter(Boolean).join(' ');

export interface CheckpointRegistry {
  listCheckpoints(): Promise<CheckpointInfo[]>;
  /** Stores a checkpoint folder's files (name → bytes) as a new checkpoint. */
  saveFromFiles(files: CheckpointFiles, meta: CheckpointMeta): Promise<CheckpointInfo>;
  rename(id: string, name: string): Promise<CheckpointInfo>;
  remove(id: string): Promise<void>;
  /** The checkpoint's files (name → bytes), as saved. */
  files(id: string): Promise<CheckpointFiles>;
  /** The checkpoint as a bundle file (src/store/bundle.ts) that the runner takes. */
  exportBundle(id: string): Promise<Uint8Array>;
  /**
   * A bundle, a zip of a checkpoint folder, or a bare upstream .pt link, as a new checkpoint named after the file; a file
   * whose checkpoint is in the list already (the same files) is not stored twice: that one comes back, `existing` set.
   */
  importFile(bytes: Uint8Array, fileName: string): Promise<CheckpointInfo & { existing?: true }>;
}

/** A registry over `store` (its root holds only the registry's folders). */
export function checkpointRegistry(store: FileStore): CheckpointRegistry {
  const readMeta = async (id: string): Promise<StoredMeta> => {
    const path = `${checkId(id)}/${META}`;
    if (!(await store.exists(path)))
      throw new MissingCheckpoint(`checkpoint ${id} does not exist (it may have been deleted); pick one from the list`);
    return JSON.parse(new TextDecoder().decode(await store.read(path))) as StoredMeta;
  };
  const info = (id: string, m: StoredMeta): CheckpointInfo => {
    const { sizes, ...rest } = m;
    return { id, ...rest, bytes: Object.values(sizes).reduce((a, b) => a + b, 0), files: Object.keys(sizes).sort() };
  };
  const writeMeta = (dir: string, m: StoredMeta) => store.write(`${dir}/${META}`, utf8.encode(`${JSON.stringify(m, null, 2)}\n`));

  const reg: CheckpointRegistry = {
    async listCheckpoints() {
      const out: CheckpointInfo[] = [];
      for (const id of await store.list('')) {
        // what a dead save left is never listed, and is removed once it is old enough not to be a save in progress
        if (staleStage(id, Date.now())) await store.remove(id).catch(() => {});
        if (id.startsWith('.') || !(await store.exists(`${id}/${META}`))) continue;
        out.push(info(id, await readMeta(id)));
      }
      return out.sort((a, b) => (a.created < b.created ? 1 : a.created > b.created ? -1 : a.id < b.id ? 1 : -1));
    },
    async saveFromFiles(files, meta) {
      const names = Object.keys(files).sort();
      if (!names.length) throw new InvalidArgument('saveFromFiles: no files; a checkpoint needs at least its link file');
      if (meta.kind !== 'inner' && meta.kind !== 'outer')
        throw new InvalidArgument(`checkpoint kind '${String(meta.kind)}' must be inner or outer`);
      for (const n of names) {
        if (n === META || n.split('/').some((p) => !p || p === '.' || p === '..'))
          throw new InvalidArgument(`checkpoint file name '${n}' is not a plain relative path`);
      }
      const id = `ckpt-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}${(++idCounter).toString(36)}`;
      const stage = `${INCOMING}${id}`;
      const m: StoredMeta = {
        name: cleanName(meta.name ?? defaultName(meta)), kind: meta.kind,
        ...(meta.style !== undefined ? { style: meta.style } : {}), ...(meta.role !== undefined ? { role: meta.role } : {}),
        ...(meta.step !== undefined ? { step: meta.step } : {}),
        created: meta.created ?? new Date().toISOString(), sizes: Object.fromEntries(names.map((n) => [n, files[n]!.length])),
        digest: await contentDigest(files),
      };
      try {
        for (const n of names) await store.write(`${stage}/${n}`, files[n]!);
        await writeMeta(stage, m);
        await store.rename(stage, id); // the commit point: listed whole or not at all
      } catch (e) {
        await store.remove(stage).catch(() => {});
        throw e;
      }
      return info(id, m);
    },
    async rename(id, name) {
      const m = { ...(await readMeta(id)), name: cleanName(name) };
      await writeMeta(id, m);
      return info(id, m);
    },
    async remove(id) {
      await store.remove(checkId(id));
    },
    async files(id) {
      const m = await readMeta(id);
      const out: CheckpointFiles = {};
      for (const n of Object.keys(m.sizes).sort()) out[n] = await store.read(`${id}/${n}`);
      return out;
    },
    async exportBundle(id) {
      const m = await readMeta(id);
      return bundleOf(await reg.files(id), {
        kind: m.kind, created: m.created, ...(m.style !== undefined ? { style: m.style } : {}),
        ...(m.role !== undefined ? { role: m.role } : {}), ...(m.step !== undefined ? { step: m.step } : {}),
      });
    },
    async importFile(bytes, fileName) {
      const { meta, files } = await importBundle(bytes, fileName);
      const digest = await contentDigest(files);
      for (const c of await reg.listCheckpoints()) {
        const m = await readMeta(c.id);
        if ((m.digest ?? (await contentDigest(await reg.files(c.id)))) === digest) return { ...c, existing: true };
      }
      const base = fileName.slice(fileName.replace(/\\/g, '/').lastIndexOf('/') + 1);
      // the display name comes from the file's name (or the bundle's style and role), cut to what cleanName takes
      const name = short(base.replace(/\.(zip|pt|safetensors)$/i, '')) || short(defaultName(meta));
      return reg.saveFromFiles(files, {
        name, kind: meta.kind, created: meta.created,
        ...(meta.style !== undefined ? { style: meta.style } : {}), ...(meta.role !== undefined ? { role: meta.role } : {}),
        ...(meta.step !== undefined ? { step: meta.step } : {}),
      });
    },
  };
  return reg;
}

/** `reg`, announcing each change it makes (checkpoint-events.ts) to the views of every tab. */
export function announcing(reg: CheckpointRegistry): CheckpointRegistry {
  const told = <A extends unknown[], R>(f: (...a: A) => Promise<R>) => async (...a: A) => {
    const r = await f(...a);
    announceCheckpointsChanged();
    return r;
  };
  return {
    ...reg,
    saveFromFiles: told(reg.saveFromFiles), rename: told(reg.rename), remove: told(reg.remove), importFile: told(reg.importFile),
  };
}

let tabRegistry: CheckpointRegistry | null = null;
/** The tab's registry, in IndexedDB database rmas-ckpt-checkpoints; its changes are announced. */
export function checkpoints(): CheckpointRegistry {
  return (tabRegistry ??= announcing(checkpointRegistry(idbFileStore('checkpoints'))));
}

export const listCheckpoints = () => checkpoints().listCheckpoints();
export const saveFromFiles = (files: CheckpointFiles, meta: CheckpointMeta) => checkpoints().saveFromFiles(files, meta);
export const rename = (id: string, name: string) => checkpoints().rename(id, name);
export const remove = (id: string) => checkpoints().remove(id);
export const files = (id: string) => checkpoints().files(id);
export const exportBundle = (id: string) => checkpoints().exportBundle(id);
export const importFile = (bytes: Uint8Array, fileName: string) => checkpoints().importFile(bytes, fileName);
