/**
 * Checkpoint bundles: one file that carries a checkpoint folder between the tab, the runner and PyTorch.
 * A bundle is a zip of STORED entries (src/formats/zip.ts): `bundle.json` first, then the folder's files
 * under their own names (link .safetensors and .pt files, manifests, train_args.json, trainer_state.json,
 * optimizer.safetensors). `bundle.json` = {format: 'rmas-checkpoint-bundle', version: 1, kind, style?,
 * role?, step?, created, files: {name: {bytes, sha256}}}; every file is checked against it on import.
 * Import also takes a bare upstream link file (.pt, or .safetensors) and a plain zip of a folder.
 * Platform-neutral: WebCrypto for SHA-256, no Node modules.
 */
import { CorruptCheckpoint, InvalidArgument } from '../errors';
import { parseLinkBytes } from '../mas/upstream';
import { readZip, writeZip } from '../formats/zip';
import { showValue } from '../util/show';
import { sha256Hex } from '../util/sha256';

export const BUNDLE_FORMAT = 'rmas-checkpoint-bundle';
export const BUNDLE_VERSION = 1;
export const BUNDLE_MANIFEST = 'bundle.json';

export type CheckpointKind = 'inner' | 'outer';

export interface BundleMeta {
  format: typeof BUNDLE_FORMAT;
  version: typeof BUNDLE_VERSION;
  kind: CheckpointKind;
  style?: string;
  role?: string;
  step?: number;
  /** ISO 8601 time of export. */
  created: string;
  files: Record<string, { bytes: number; sha256: string }>;
}

/** What the caller says about a checkpoint; format, version and files are filled in by exportBundle. */
export interface BundleInfo {
  kind: CheckpointKind;
  style?: string;
  role?: string;
  step?: number;
  created?: string;
}

export type CheckpointFiles = Record<string, Uint8Array>;

const utf8 = new TextEncoder();
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);


/** Longest file name part and whole name, in UTF-8 bytes: what every file system takes (NAME_MAX 255), well within PATH_MAX. */
export const NAME_PART_MAX = 255;
export const NAME_MAX = 1024;

/** A name for messages: control characters escaped, a long one cut. */
const shown = (name: string) => {
  const s = name.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return s.length > 120 ? `${s.slice(0, 120)}…` : s;
};

/**
 * A relative '/'-separated file name without '.', '..', '\\', control characters or empty segments, each part at most
 * NAME_PART_MAX bytes and the whole at most NAME_MAX (and not bundle.json). `Err`: InvalidArgument for names a caller
 * gives, CorruptCheckpoint for names read from a bundle.
 */
export function checkFileName(name: string, where: string, Err: new (m: string) => Error = InvalidArgument): string {
  const parts = name.split('/');
  if (!name || parts.some((p) => !p || p === '.' || p === '..' || p.includes('\\') || /[\u0000-\u001f\u007f]/.test(p)) ||
    name === BUNDLE_MANIFEST) {
    throw new Err(`${where}: file name '${shown(name)}' must be a relative '/'-separated path without '.', '..', empty parts or ` +
      `control characters, other than ${BUNDLE_MANIFEST}; rename the file and export the bundle again`);
  }
  const long = parts.find((p) => utf8.encode(p).length > NAME_PART_MAX);
  if (long !== undefined || utf8.encode(name).length > NAME_MAX) {
    throw new Err(`${where}: file name '${shown(name)}' is too long: ${long !== undefined
      ? `a part of ${utf8.encode(long).length} bytes, over ${NAME_PART_MAX}` : `${utf8.encode(name).length} bytes, over ${NAME_MAX}`}; ` +
      'give the file a shorter name and export the bundle again');
  }
  return name;
}

/** Refuses names of which one is another's folder ('a' and 'a/b'): a folder cannot also be a file. */
function checkNoFileFolder(names: readonly string[], where: string, Err: new (m: string) => Error = CorruptCheckpoint): void {
  const files = new Set(names);
  for (const n of names) {
    for (let i = n.indexOf('/'); i > 0; i = n.indexOf('/', i + 1)) {
      if (files.has(n.slice(0, i))) {
        throw new Err(`${where}: '${shown(n.slice(0, i))}' is both a file and the folder of '${shown(n)}'; ` +
          'export the checkpoint again');
      }
    }
  }
}

/** Kind of a folder of files that does not say: outer if it holds outer manifests or outer_*.pt links. */
export function guessKind(names: readonly string[]): CheckpointKind {
  const base = names.map((n) => n.slice(n.lastIndexOf('/') + 1));
  const outer = base.some(
    (n) =>
      n === 'outerlink_config.json' ||
      /^outer_adapter_config.*\.json$/.test(n) ||
      /^outer_\w+\.(pt|safetensors)$/.test(n) ||
      /Outerlink/i.test(n),
  );
  return outer ? 'outer' : 'inner';
}

/** A bundle of `files` (sorted by name) with bundle.json first. */
export async function exportBundle(files: CheckpointFiles, info: BundleInfo): Promise<Uint8Array> {
  if (info.kind !== 'inner' && info.kind !== 'outer')
    throw new InvalidArgument(`bundle kind '${String(info.kind)}' must be inner or outer`);
  if (info.step !== undefined && !(Number.isSafeInteger(info.step) && info.step >= 0))
    throw new InvalidArgument(`bundle step ${info.step} must be a non-negative integer`);
  const names = Object.keys(files).sort();
  if (!names.length) throw new InvalidArgument('a checkpoint bundle needs at least one file; save the checkpoint first');
  const meta: BundleMeta = {
    format: BUNDLE_FORMAT, version: BUNDLE_VERSION, kind: info.kind,
    ...(info.style !== undefined ? { style: info.style } : {}),
    ...(info.role !== undefined ? { role: info.role } : {}),
    ...(info.step !== undefined ? { step: info.step } : {}),
    created: info.created ?? new Date().toISOString(), files: {},
  };
  checkNoFileFolder(names, 'exportBundle', InvalidArgument);
  for (const n of names) {
    checkFileName(n, 'exportBundle');
    meta.files[n] = { bytes: files[n]!.length, sha256: await sha256Hex(files[n]!) };
  }
  const entries: [string, Uint8Array][] = [
    [BUNDLE_MANIFEST, utf8.encode(`${JSON.stringify(meta, null, 2)}\n`)],
    ...names.map((n): [string, Uint8Array] => [n, files[n]!]),
  ];
  return writeZip(entries, { what: 'checkpoint bundle', tooLargeHint: 'export the links alone (without optimizer.safetensors)' });
}

function parseMeta(bytes: Uint8Array, where: string): BundleMeta {
  const bad = (what: string) => new CorruptCheckpoint(`${where}: ${BUNDLE_MANIFEST} ${what}; export the bundle again`);
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw bad(`is not valid JSON (${(e as Error).message})`);
  }
  if (!isObj(v) || v.format !== BUNDLE_FORMAT) throw bad(`is not an ${BUNDLE_FORMAT} manifest`);
  if (v.version !== BUNDLE_VERSION)
    throw new CorruptCheckpoint(
      `${where}: bundle version ${showValue(v.version)} is not supported (this build reads version ${BUNDLE_VERSION}); update the playground or the runner`,
    );
  if (v.kind !== 'inner' && v.kind !== 'outer') throw bad('has no kind inner or outer');
  if (!isObj(v.files)) throw bad('has no files table');
  for (const [n, f] of Object.entries(v.files)) {
    if (!isObj(f) || !Number.isSafeInteger(f.bytes) || typeof f.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(f.sha256))
      throw bad(`entry '${n}' lacks bytes or sha256`);
  }
  if (v.step !== undefined && !(Number.isSafeInteger(v.step) && (v.step as number) >= 0))
    throw bad('has a step that is not a non-negative integer');
  for (const k of ['style', 'role', 'created'] as const)
    if (v[k] !== undefined && typeof v[k] !== 'string') throw bad(`field ${k} is not a string`);
  return v as unknown as BundleMeta;
}

/** The meta a bundle would have for files that came without one (a bare link or a plain zip). */
async function metaFor(files: CheckpointFiles): Promise<BundleMeta> {
  const meta: BundleMeta = {
    format: BUNDLE_FORMAT,
    version: BUNDLE_VERSION,
    kind: guessKind(Object.keys(files)),
    created: new Date().toISOString(),
    files: {},
  };
  const st = files['trainer_state.json'];
  if (st) {
    try {
      const j = JSON.parse(new TextDecoder().decode(st)) as Record<string, unknown>;
      if (j.kind === 'inner' || j.kind === 'outer') meta.kind = j.kind;
      const step = isObj(j.state) ? j.state.step : undefined;
      if (Number.isSafeInteger(step) && (step as number) >= 0) meta.step = step as number;
    } catch { /* a damaged trainer state is reported when the checkpoint is loaded */ }
  }
  for (const [n, b] of Object.entries(files)) meta.files[n] = { bytes: b.length, sha256: await sha256Hex(b) };
  return meta;
}

const isTorchZip = (names: readonly string[]) => names.some((k) => /^[^/]+\/data\.pkl$/.test(k));

/** What a file that is no zip looks like, by its first bytes (for the message that says it is no checkpoint). */
function looksLike(b: Uint8Array): string | null {
  const at = (sig: number[]) => sig.every((x, i) => b[i] === x);
  if (at([0x89, 0x50, 0x4e, 0x47])) return 'a PNG image';
  if (at([0xff, 0xd8, 0xff])) return 'a JPEG image';
  if (at([0x47, 0x49, 0x46, 0x38])) return 'a GIF image';
  if (at([0x25, 0x50, 0x44, 0x46])) return 'a PDF document';
  if (at([0x1f, 0x8b])) return 'a gzip file';
  const head = b.subarray(0, 256);
  if (head.length && head.every((x) => x === 9 || x === 10 || x === 13 || (x >= 32 && x < 127))) return 'text';
  return null;
}

/**
 * Refuses a file that is no zip and no safetensors file under a name that is neither a link's (.pt, .safetensors) nor a
 * bundle's: it is some other file picked by mistake, not a damaged download, so the message says what to pick instead.
 */
function notACheckpoint(bytes: Uint8Array, base: string) {
  const n = bytes.length >= 8 ? Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true)) : -1;
  const safetensors = n > 1 && n + 8 <= bytes.length && bytes[8] === 0x7b; // an 8-byte header length, then '{'
  const kind = looksLike(bytes);
  if (safetensors || (/\.(pt|safetensors)$/i.test(base) && !kind)) return;
  const what = /\.zip$/i.test(base) ? 'is not a zip file' : 'is not a checkpoint';
  throw new InvalidArgument(
    `${base} ${what}${kind ? ` (it looks like ${kind})` : ''}: import a bundle (.zip) exported by the playground or ` +
      '`rmas convert`, or an upstream link file (.pt, .safetensors)',
  );
}

/**
 * The files of a bundle, checked against bundle.json (size and SHA-256 of each: CorruptCheckpoint naming
 * the first file that differs, is missing or is not listed). Also takes a bare `.pt` / `.safetensors` link
 * (one file named `fileName`, checked by parsing it) and a zip without bundle.json (its files, the common
 * top folder stripped), with a meta derived from the files.
 */
export async function importBundle(bytes: Uint8Array, fileName = 'checkpoint.zip'): Promise<{ meta: BundleMeta; files: CheckpointFiles }> {
  const base = fileName.slice(fileName.replace(/\\/g, '/').lastIndexOf('/') + 1) || 'checkpoint.zip';
  const isZip = bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04;
  const entries = isZip
    ? readZip(bytes, base, { kind: 'a checkpoint bundle or torch.save file', fix: 'export or download it again', verifyCrc: true })
    : null;
  if (!entries) notACheckpoint(bytes, base);
  if (!entries || isTorchZip([...entries.keys()])) {
    const name = /\.(pt|safetensors)$/i.test(base) ? base : entries ? 'adapter.pt' : 'adapter.safetensors';
    parseLinkBytes(bytes, base); // a link file must parse (UnsafeCheckpoint / CorruptCheckpoint otherwise)
    const files = { [name]: bytes.slice() };
    return { meta: await metaFor(files), files };
  }
  const files: CheckpointFiles = {};
  const manifest = entries.get(BUNDLE_MANIFEST);
  if (!manifest) {
    const names = [...entries.keys()].filter((n) => !n.endsWith('/'));
    const tops = new Set(names.map((n) => (n.includes('/') ? n.slice(0, n.indexOf('/')) : '')));
    const strip = tops.size === 1 && !tops.has('') ? [...tops][0]!.length + 1 : 0;
    for (const n of names) files[checkFileName(n.slice(strip), base, CorruptCheckpoint)] = entries.get(n)!.slice();
    if (!Object.keys(files).length) throw new CorruptCheckpoint(`${base}: the zip holds no files; export the checkpoint again`);
    checkNoFileFolder(Object.keys(files), base);
    return { meta: await metaFor(files), files };
  }
  const meta = parseMeta(manifest, base);
  for (const n of entries.keys()) {
    if (n === BUNDLE_MANIFEST || n.endsWith('/')) continue;
    if (!Object.hasOwn(meta.files, n))
      throw new CorruptCheckpoint(`${base}: file '${shown(n)}' is not listed in ${BUNDLE_MANIFEST}; the bundle was altered, export it again`);
  }
  for (const n of Object.keys(meta.files)) checkFileName(n, base, CorruptCheckpoint);
  checkNoFileFolder(Object.keys(meta.files), base);
  for (const [n, f] of Object.entries(meta.files)) {
    const b = entries.get(n);
    if (!b) throw new CorruptCheckpoint(`${base}: '${n}' is listed in ${BUNDLE_MANIFEST} but missing; export the bundle again`);
    const sha256 = await sha256Hex(b);
    if (b.length !== f.bytes || sha256 !== f.sha256) {
      throw new CorruptCheckpoint(`${base}: '${n}' does not match its SHA-256 in ${BUNDLE_MANIFEST} (sha256 ${sha256}, expected ` +
        `${f.sha256}; ${b.length} bytes, expected ${f.bytes}); the file is damaged, export or download the bundle again`);
    }
    files[n] = b.slice();
  }
  return { meta, files };
}
