/**
 * Fuzz targets for checkpoint bundles (zip): importBundle (what the page and the runner read), materialize (the
 * runner's extraction to disk: no file may land outside its extraction folder), and the page's import of a file
 * into the checkpoint registry (CheckpointsView's upload path, over the memory store).
 */
import { readdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { linkFileBytes } from '../../../src/mas/upstream';
import { exportBundle, importBundle } from '../../../src/store/bundle';
import { sha256Hex } from '../../../src/util/sha256';
import { materialize, removeExtracted } from '../../../src/store/bundle-node';
import { checkpointRegistry } from '../../../src/store/checkpoint-registry';
import { memoryStore } from '../../../src/train/file-store';
import { readZip, writeZip } from '../../../src/formats/zip';
import type { Rng } from '../../../src/util/rng';
import type { FuzzTarget } from '../harness';
import { HOSTILE_NAMES, mutateBytes, mutateJsonText, mutateZipBytes, mutateZipEntries, pick, zipBoundaries } from '../mutate';
import { bytesKey, cutsAt, enc, expectThat, fnv, repoFile } from './common';
import { mutateTorch } from './torch';

/** A file as the user gives it: its name (which the reader sees) and its bytes. */
export interface NamedFile { name: string; bytes: Uint8Array }

const INFO = { kind: 'inner' as const, style: 'sequential_light', role: 'planner', step: 4, created: '2026-01-02T03:04:05.000Z' };

/** An exported bundle, a plain zip of a folder, a bare .pt and a bare .safetensors link, as the bundle tests make them. */
export async function bundleSeeds(): Promise<NamedFile[]> {
  const pt = repoFile('src/formats/fixtures/torch_small.pt');
  const st = linkFileBytes(new Map([['adapter.layer_norm.weight', { shape: [4], data: [1, 2, 3, 4] }]]), 'safetensors', 'f32');
  const files = {
    'adapter.pt': pt, 'adapter.safetensors': st, 'adapter_config.json': enc('{"adapter_type":"ln_res_adapter"}\n'),
    'trainer_state.json': enc('{"kind":"inner","state":{"step":4}}\n'), 'sub/notes.txt': enc('a file in a folder\n'),
  };
  const plain = writeZip([['ckpt/', new Uint8Array(0)], ['ckpt/outer_12.pt', pt], ['ckpt/trainer_state.json',
    enc('{"kind":"outer","state":{"step":7}}')]]);
  return [{ name: 'b.zip', bytes: await exportBundle(files, INFO) }, { name: 'dl/ckpt.zip', bytes: plain },
    { name: 'adapter(math).pt', bytes: pt }, { name: 'link.safetensors', bytes: st }];
}

const entriesOf = (b: Uint8Array): [string, Uint8Array][] | null => {
  try {
    return [...readZip(b, 'seed')].map(([n, d]) => [n, d.slice()]);
  } catch {
    return null;
  }
};

/** An entry renamed in the zip and in bundle.json alike, so that the names themselves are what the reader meets. */
async function renameListed(rng: Rng, e: [string, Uint8Array][]): Promise<[string, Uint8Array][]> {
  const m = e.find(([n]) => n === 'bundle.json');
  const files = e.filter(([n]) => n !== 'bundle.json');
  if (!m || !files.length) return e;
  const meta = JSON.parse(new TextDecoder().decode(m[1])) as { files: Record<string, unknown> };
  const f = pick(rng, files);
  const to = pick(rng, [...HOSTILE_NAMES, 'sub', 'sub/notes.txt/x', 'adapter.pt', 'sub/../adapter.pt', 'nested/deeper/x.pt']);
  delete meta.files[f[0]];
  meta.files[to] = { bytes: f[1].length, sha256: await sha256Hex(f[1]) };
  f[0] = to;
  m[1] = enc(JSON.stringify(meta));
  return e;
}

/** Mutations of a bundle: of its entries (names, duplicates, bundle.json, a link inside), its zip fields, its bytes, its name. */
export async function mutateBundle(rng: Rng, f: NamedFile): Promise<NamedFile> {
  const e = entriesOf(f.bytes);
  const k = rng.int(12);
  if (k === 0) return { ...f, name: pick(rng, [...HOSTILE_NAMES, 'x'.repeat(260) + '.zip', 'a\\b.zip', 'C:\\dl\\x.pt', '.zip']) };
  if (e && k < 3) return { ...f, bytes: writeZip(await renameListed(rng, e)) };
  if (e && k < 5) return { ...f, bytes: writeZip(mutateZipEntries(rng, e)) };
  if (e && k < 7) { // bundle.json or another entry mutated inside an intact zip
    const x = pick(rng, e);
    x[1] = x[0].endsWith('.json') ? mutateJsonText(rng, x[1]) : x[0].endsWith('.pt') ? mutateTorch(rng, x[1]) : mutateBytes(rng, x[1]);
    return { ...f, bytes: writeZip(e) };
  }
  if (!e && f.name.endsWith('.pt') && k < 8) return { ...f, bytes: mutateTorch(rng, f.bytes) };
  return { ...f, bytes: k < 10 ? mutateZipBytes(rng, f.bytes) : mutateBytes(rng, f.bytes) };
}

const base = (name: string) => name.slice(name.replace(/\\/g, '/').lastIndexOf('/') + 1) || 'checkpoint.zip';
const safeName = (n: string) => !!n && n.split('/').every((p) => p && p !== '.' && p !== '..' && !p.includes('\\')) && !n.includes('\0');

/** The checks of an imported checkpoint: plain relative names, sizes as the manifest lists them. */
function checkImported(r: Awaited<ReturnType<typeof importBundle>>): string {
  const parts: string[] = [r.meta.kind, String(r.meta.step)];
  for (const [n, b] of Object.entries(r.files).sort()) {
    expectThat(safeName(n), `a file named ${JSON.stringify(n)} was accepted`);
    expectThat(r.meta.files[n]?.bytes === b.length, `file ${n}: ${b.length} bytes, the manifest says ${r.meta.files[n]?.bytes}`);
    parts.push(`${n}:${fnv(b)}`);
  }
  return parts.join(',');
}

const common = {
  seeds: bundleSeeds,
  truncations: (f: NamedFile) => cutsAt(f.bytes, zipBoundaries(f.bytes)).map((bytes) => ({ ...f, bytes })),
  size: (f: NamedFile) => f.bytes.length,
  key: (f: NamedFile) => `${f.name}:${bytesKey(f.bytes)}`,
  files: (f: NamedFile) => ({ [f.name]: f.bytes }),
};

export const bundle: FuzzTarget<NamedFile> = {
  ...common,
  name: 'bundle-import',
  mutate: mutateBundle,
  labels: (f) => [base(f.name)],
  run: async (f) => checkImported(await importBundle(f.bytes, f.name)),
};

/** Every file under `dir`, relative to it. */
const walk = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true })
    .flatMap((d) => (d.isDirectory() ? walk(join(dir, d.name)).map((x) => `${d.name}/${x}`) : [d.name]));

export const bundleExtract: FuzzTarget<NamedFile> = {
  ...common,
  name: 'bundle-extract',
  mutate: mutateBundle,
  labels: () => ['in.zip'],
  run: async (f, ctx) => {
    const path = join(ctx.dir, 'in.zip');
    writeFileSync(path, f.bytes);
    try {
      const dir = await materialize(path);
      const files = walk(dir).sort();
      // nothing else appeared in the case's folder: the input, and the extraction folder's own files
      const stray = walk(ctx.dir).filter((p) => p !== 'in.zip' && !join(ctx.dir, p).startsWith(`${dir}/`));
      expectThat(stray.length === 0, `files outside the extraction folder: ${stray.join(', ')}`);
      expectThat(files.every(safeName), `extracted ${files.join(', ')}`);
      return files.map((n) => relative(dir, join(dir, n))).join(',');
    } finally {
      removeExtracted();
    }
  },
};

export const pageImport: FuzzTarget<NamedFile> = {
  ...common,
  name: 'page-checkpoint-import',
  mutate: mutateBundle,
  labels: (f) => [base(f.name)],
  run: async (f) => {
    const store = memoryStore();
    const reg = checkpointRegistry(store);
    const info = await reg.importFile(f.bytes, f.name);
    const paths = [...store.files.keys()];
    expectThat(paths.every((p) => p.startsWith(`${info.id}/`)), `the store holds ${paths.join(', ')} after importing ${info.id}`);
    const files = await reg.files(info.id);
    expectThat(Object.keys(files).sort().join() === info.files.join(), `listed ${info.files.join()}, stored ${Object.keys(files).join()}`);
    return `${info.kind}:${info.files.join(',')}:${info.bytes}`;
  },
};
