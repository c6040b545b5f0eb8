/**
 * Upstream checkpoint layouts (docs/method.md §3): which file in a role folder is the inner
 * link for a task, which files in an outer folder are the outer links, reading and writing link files
 * (.pt as upstream ships them, .safetensors as we may export them), the local Hugging Face hub cache and
 * the manifests our exports write so that upstream's resolvers read them back.
 *
 * The choice of files does no I/O of its own (a listing or a RoleFolder and parsed manifests in, names out), so
 * that the URL loader and the download planner share it with the disk loader; the Node wrappers only list
 * folders and read JSON.
 */
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint } from '../errors';
import { decode, encode } from '../formats/encode';
import { parseHeader, type StDType, writeSafetensors } from '../formats/safetensors';
import { type PtTensor, readTorchStateDict, writeTorchStateDict } from '../formats/torch';
import type { LinkStateDict, LinkTensor } from './links';
import { nodeImport } from '../util/node-import';
import { readModelFile } from '../formats/model-file';

export type AdapterTask = 'math' | 'code';

const CODE_TASKS = new Set(['code', 'mbppplus', 'evalplus/mbppplus', 'livecodebench', 'lcb']);

/** Upstream's rule: 'code' for code tasks/benchmarks (task 'code', datasets mbppplus, livecodebench, lcb), else 'math'. */
export function adapterTaskFor(taskOrDataset: string): AdapterTask {
  return CODE_TASKS.has(String(taskOrDataset ?? '').trim().toLowerCase()) ? 'code' : 'math';
}

const DEFAULT_INNER_TYPE = 'ln_res_adapter';
const DEFAULT_OUTER_TYPE = 'outer_ln_res_adapter';
const LINK_EXTS = ['.pt', '.safetensors'] as const;

type Json = Record<string, unknown>;
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parses a JSON manifest; malformed text or a non-object → CorruptCheckpoint naming the file. */
export function parseManifest(text: string, file: string): Json {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new CorruptCheckpoint(`${file} is not valid JSON (${(e as Error).message}); re-download it or rewrite it by hand`);
  }
  if (!isObj(v)) throw new CorruptCheckpoint(`${file} does not hold a JSON object; re-download it or rewrite it by hand`);
  return v;
}

/** `name` and, when it ends in .pt or .safetensors, its twin with the other extension. */
function withTwin(name: string): string[] {
  for (const ext of LINK_EXTS) {
    if (name.endsWith(ext)) return [name, ...LINK_EXTS.filter((e) => e !== ext).map((e) => name.slice(0, -ext.length) + e)];
  }
  return [name];
}

// ------------------------------------------------------------------------------------ inner

/**
 * A role folder as resolveRoleFiles reads it: on disk (listed), over HTTP (probed, as a URL folder cannot be
 * listed) or for a download plan (sizes only).
 */
export interface RoleFolder {
  /** A JSON manifest of the folder, parsed; null where the folder has none. */
  manifest(name: string): Promise<Record<string, unknown> | null>;
  /** Whether the folder holds the file; asked in the rule's order, up to the first yes. */
  has(name: string): Promise<boolean>;
  /** Every file name, where the folder can be listed; only then can task null fall back to the one adapter(*) file. */
  files?: readonly string[];
}

export interface RoleFiles {
  /** The inner link's file name in the folder, or null where none of the names tried is there. */
  inner: string | null;
  /** adapter_config.json's adapter_type, default ln_res_adapter. */
  innerType: string;
  /** Every name looked for, in order, for the message when `inner` is null. */
  tried: string[];
}

/**
 * A role folder's inner link by upstream's rule (docs/method.md §3.2), the one rule for the disk loader, the URL loader
 * and the download planner: innerlink_config.json's `tasks[task]["adapter.pt"]` wins when it has the task
 * (as upstream, it is then the only candidate); else `adapter(task).pt`, else `adapter.pt`; with task null
 * `adapter.pt`, else, in a listed folder, the only `adapter(*)` file. Each name also as .safetensors. The type
 * comes from adapter_config.json. Manifests are read in that order (innerlink, then adapter config).
 */
export async function resolveRoleFiles(folder: RoleFolder, task: AdapterTask | null): Promise<RoleFiles> {
  const innerlinkConfig = await folder.manifest('innerlink_config.json');
  const adapterConfig = await folder.manifest('adapter_config.json');
  const t = adapterConfig?.adapter_type;
  const innerType = typeof t === 'string' ? t : DEFAULT_INNER_TYPE;
  const tried: string[] = [];
  const first = async (names: string[]) => {
    tried.push(...names);
    for (const n of names) if (await folder.has(n)) return n;
    return null;
  };
  const found = (inner: string | null): RoleFiles => ({ inner, innerType, tried });
  const tasks = innerlinkConfig?.tasks;
  if (task !== null && isObj(tasks) && isObj(tasks[task])) {
    const named = tasks[task]['adapter.pt'] ?? 'adapter.pt';
    if (typeof named !== 'string') throw new CorruptCheckpoint(`innerlink_config.json: tasks.${task}["adapter.pt"] is not a file name`);
    return found(await first(withTwin(named)));
  }
  if (task !== null) {
    const n = await first(withTwin(`adapter(${task}).pt`));
    if (n) return found(n);
  }
  const n = await first(withTwin('adapter.pt'));
  if (n || task !== null || !folder.files) return found(n);
  const scoped = folder.files.filter((f) => /^adapter\(.+\)\.(pt|safetensors)$/.test(f));
  tried.push('adapter(*).pt (exactly one)');
  return found(scoped.length === 1 ? scoped[0] : null);
}

// ------------------------------------------------------------------------------------ outer (pure)

export interface OuterLinkFile {
  key: string;
  path: string;
  type: string;
  inDim?: number;
  outDim?: number;
}

const optDim = (v: unknown): number | undefined => (Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : undefined);

/**
 * Outer link files (names relative to the folder) from a listing and the parsed manifests.
 * `outerlinkConfig` (outerlink_config.json) wins: `tasks[task].adapters` if it has `tasks`, else
 * `adapters`. Without it, `legacyConfig` (outer_adapter_config(task).json or outer_adapter_config.json,
 * may be null) gives types and sizes, and the files are `${key}.pt` / `${key}.safetensors`.
 * `manifestName` names the manifest in messages.
 */
export function pickOuterFiles(
  files: readonly string[],
  task: AdapterTask | null,
  keys: readonly string[],
  outerlinkConfig: Json | null,
  legacyConfig: Json | null,
  where = 'outer folder',
): Map<string, OuterLinkFile> {
  const have = new Set(files);
  const out = new Map<string, OuterLinkFile>();
  if (outerlinkConfig) {
    let adapters: unknown = outerlinkConfig.adapters;
    if ('tasks' in outerlinkConfig) {
      const tasks = outerlinkConfig.tasks;
      if (!isObj(tasks)) throw new CorruptCheckpoint(`${where}/outerlink_config.json: "tasks" is not an object`);
      if (task === null) {
        throw new InvalidArgument(
          `${where}/outerlink_config.json is task-scoped (${Object.keys(tasks).join(', ')}); pass a task (math or code)`,
        );
      }
      if (!isObj(tasks[task])) {
        throw new MissingCheckpoint(
          `${where}/outerlink_config.json has no links for task '${task}' (it has ${Object.keys(tasks).join(', ') || 'none'}); use another task or another outer folder`,
        );
      }
      adapters = tasks[task].adapters;
    }
    if (!Array.isArray(adapters)) throw new CorruptCheckpoint(`${where}/outerlink_config.json: "adapters" is not a list`);
    const entries = new Map<string, Json>();
    for (const a of adapters) {
      if (!isObj(a) || typeof a.legacy_key !== 'string' || typeof a.filename !== 'string') {
        throw new CorruptCheckpoint(`${where}/outerlink_config.json: an adapters entry lacks legacy_key or filename: ${JSON.stringify(a)}`);
      }
      entries.set(a.legacy_key, a);
    }
    for (const key of keys) {
      const e = entries.get(key);
      if (!e) {
        throw new MissingCheckpoint(
          `${where}: outerlink_config.json lists no link '${key}' (it lists ${[...entries.keys()].join(', ') || 'none'}${task ? ` for task ${task}` : ''}); use the outer folder of this style`,
        );
      }
      const names = withTwin(e.filename as string);
      const name = names.find((n) => have.has(n));
      if (!name)
        throw new MissingCheckpoint(
          `${where}: link '${key}' file is missing (looked for ${names.join(', ')}); re-download the outer folder`,
        );
      out.set(key, {
        key,
        path: name,
        type: typeof e.adapter_type === 'string' ? e.adapter_type : DEFAULT_OUTER_TYPE,
        inDim: optDim(e.in_dim),
        outDim: optDim(e.out_dim),
      });
    }
    return out;
  }
  for (const key of keys) {
    const names = withTwin(`${key}.pt`);
    const name = names.find((n) => have.has(n));
    if (!name) {
      throw new MissingCheckpoint(
        `${where}: no outerlink_config.json and no file for link '${key}' (looked for ${names.join(', ')}); re-download the outer folder`,
      );
    }
    const type = legacyConfig?.[`${key}_type`];
    out.set(key, {
      key, path: name, type: typeof type === 'string' ? type : DEFAULT_OUTER_TYPE,
      inDim: optDim(legacyConfig?.[`${key}_in_dim`]), outDim: optDim(legacyConfig?.[`${key}_out_dim`]),
    });
  }
  return out;
}

// ------------------------------------------------------------------------------------ Node file access

type FsPromises = typeof import('node:fs/promises');
const fsp = () => nodeImport('node:fs/promises');
const join = (dir: string, name: string) => `${dir.replace(/\/+$/, '')}/${name}`;
const errCode = (e: unknown) => (e as NodeJS.ErrnoException).code;

async function listDir(fs: FsPromises, dir: string, what: string): Promise<string[]> {
  try {
    return (await fs.readdir(dir, { withFileTypes: true })).filter((d) => !d.isDirectory()).map((d) => d.name);
  } catch (e) {
    if (errCode(e) === 'ENOENT' || errCode(e) === 'ENOTDIR')
      throw new MissingCheckpoint(`${what}: ${dir} is not a folder; download it or fix the path`);
    throw e;
  }
}

async function readManifest(dir: string, files: readonly string[], name: string): Promise<Json | null> {
  if (!files.includes(name)) return null;
  return parseManifest(await readModelFile(join(dir, name)), join(dir, name));
}

/** A listed folder on disk as a RoleFolder. */
function listedRoleFolder(dir: string, files: readonly string[]): RoleFolder {
  return { files, has: async (name) => files.includes(name), manifest: (name) => readManifest(dir, files, name) };
}

export interface RoleCheckpoint {
  role: string;
  dir: string;
  innerPath: string | null;
  innerType: string;
}

/**
 * Role folder: HF model files + inner link (see resolveRoleFiles). No config.json → MissingCheckpoint; no
 * inner file → innerPath null, or MissingCheckpoint listing the names tried when `requireInner`.
 */
export async function resolveRoleFolder(
  role: string,
  dir: string,
  task: AdapterTask | null,
  opts: { requireInner?: boolean; linksOnly?: boolean } = {},
): Promise<RoleCheckpoint> {
  const fs = await fsp();
  const files = await listDir(fs, dir, `role ${role}`);
  if (!files.includes('config.json') && !opts.linksOnly) {
    throw new MissingCheckpoint(
      `role ${role}: ${dir} has no config.json; point to the role's model folder (the repo with model.safetensors and its inner links)`,
    );
  }
  const { inner, innerType, tried } = await resolveRoleFiles(listedRoleFolder(dir, files), task);
  if (!inner && opts.requireInner) {
    throw new MissingCheckpoint(
      `role ${role}: ${dir} has no inner link for task ${task ?? '(none)'}; looked for ${tried.join(', ')}. Download the role repo with its adapter files`,
    );
  }
  return { role, dir, innerPath: inner ? join(dir, inner) : null, innerType };
}

/**
 * Whether a role override holds links only: no config.json but an inner link file (a `rmas train-inner` save_dir,
 * or a checkpoint bundle of one). Such a folder gives the role's inner link; its model stays the style's own.
 */
export async function holdsLinksOnly(dir: string): Promise<boolean> {
  const fs = await fsp();
  let files: string[];
  try {
    files = await listDir(fs, dir, 'the folder');
  } catch {
    return false; // not a folder: resolveRoleFolder says so
  }
  return (
    !files.includes('config.json') && files.some((f) => /^adapter(\(.+\))?\.(pt|safetensors)$/.test(f) || f === 'innerlink_config.json')
  );
}

/** Outer folder: the files of exactly `keys` (see pickOuterFiles), with absolute-as-given paths. */
export async function resolveOuterFolder(
  dir: string,
  task: AdapterTask | null,
  keys: readonly string[],
): Promise<Map<string, OuterLinkFile>> {
  const fs = await fsp();
  const files = await listDir(fs, dir, 'outer links');
  const outerlinkConfig = await readManifest(dir, files, 'outerlink_config.json');
  let legacy: Json | null = null;
  if (!outerlinkConfig) {
    const scoped = task ? await readManifest(dir, files, `outer_adapter_config(${task}).json`) : null;
    legacy = scoped ?? (await readManifest(dir, files, 'outer_adapter_config.json'));
  }
  const picked = pickOuterFiles(files, task, keys, outerlinkConfig, legacy, dir);
  for (const f of picked.values()) f.path = join(dir, f.path);
  return picked;
}

// ------------------------------------------------------------------------------------ link files

const FLOAT_DTYPES: Partial<Record<StDType, 'f32' | 'f16' | 'bf16'>> = { F32: 'f32', F16: 'f16', BF16: 'bf16' };

/** A link state dict from .pt (zip) or .safetensors bytes, told apart by content; values widened to f32 exactly. */
export function parseLinkBytes(bytes: Uint8Array, name: string): LinkStateDict {
  return requireFinite(linkValues(bytes, name), name);
}

/**
 * Refuses a state dict holding NaN or infinite values (saved by a run that diverged): loaded, such a link turns
 * every latent into NaN and the failure shows up far away (a token id of -1).
 */
function requireFinite(sd: ReadonlyMap<string, LinkTensor & { data: Float32Array }>, name: string): LinkStateDict {
  for (const [k, t] of sd) {
    const at = t.data.findIndex((x) => !Number.isFinite(x));
    if (at < 0) continue;
    const count = t.data.reduce((n, x) => n + (Number.isFinite(x) ? 0 : 1), 0);
    throw new CorruptCheckpoint(
      `${name}: tensor "${k}" holds ${count} non-finite value(s) (the first, ${t.data[at]}, at index ${at}): it was saved by a run ` +
        'that diverged; use an earlier checkpoint, or train again with a lower learning rate',
    );
  }
  return sd;
}

function linkValues(bytes: Uint8Array, name: string): Map<string, LinkTensor & { data: Float32Array }> {
  const out = new Map<string, LinkTensor & { data: Float32Array }>();
  if (bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b) {
    for (const [k, t] of readTorchStateDict(bytes, name)) out.set(k, { shape: t.shape, data: decode(t.dtype, t.bytes, t.shape) });
    return out;
  }
  if (bytes.length < 8)
    throw new CorruptCheckpoint(`${name}: ${bytes.length} bytes is neither a torch.save zip nor a safetensors file; re-download it`);
  const n = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(bytes.length - 8)) {
    throw new CorruptCheckpoint(
      `${name}: neither a torch.save zip (no PK signature) nor a whole safetensors file (header length ${n} past the end); re-download it`,
    );
  }
  const start = 8 + Number(n);
  const { tensors } = parseHeader(name, bytes.subarray(8, start), bytes.length - start);
  for (const t of tensors.values()) {
    const dt = FLOAT_DTYPES[t.dtype];
    if (!dt)
      throw new CorruptCheckpoint(`${name}: link tensor "${t.name}" is ${t.dtype}; links hold F32, F16 or BF16 values. Re-export it`);
    out.set(t.name, { shape: [...t.shape], data: decode(dt, bytes.slice(start + t.begin, start + t.end), t.shape) });
  }
  return out;
}

/** A link state dict from a file; a missing file → MissingCheckpoint, bad bytes → the readers' errors. */
export async function readLinkFile(path: string): Promise<LinkStateDict> {
  const fs = await fsp();
  let bytes: Uint8Array;
  try {
    bytes = await fs.readFile(path);
  } catch (e) {
    if (errCode(e) === 'ENOENT') throw new MissingCheckpoint(`link file ${path} does not exist; download it or fix the path`);
    throw e;
  }
  return parseLinkBytes(bytes, path);
}

type F32State = ReadonlyMap<string, { readonly shape: readonly number[]; readonly data: ArrayLike<number> }>;

/** A state dict as .pt or .safetensors bytes in `dtype` (bf16 rounds to nearest even), keys in map order. */
export function linkFileBytes(state: F32State, format: 'pt' | 'safetensors', dtype: 'bf16' | 'f32'): Uint8Array {
  if (format === 'pt') {
    const t = new Map<string, PtTensor>();
    for (const [k, v] of state) t.set(k, { dtype, shape: [...v.shape], bytes: encode(dtype, v.data, v.shape) });
    return writeTorchStateDict(t);
  }
  const st = dtype === 'bf16' ? 'BF16' : 'F32';
  return writeSafetensors(
    [...state].map(([k, v]) => [k, { dtype: st, shape: [...v.shape], bytes: encode(dtype, v.data, v.shape) }] as const),
  );
}

let tmpCounter = 0;

/** Writes a link under upstream key names, .pt or .safetensors by extension, bf16 by default; atomic (temp + rename). */
export async function writeLinkFile(
  link: { stateDict(): Promise<F32State> },
  path: string,
  opts: { dtype?: 'bf16' | 'f32' } = {},
): Promise<void> {
  const format = path.endsWith('.pt') ? 'pt' : path.endsWith('.safetensors') ? 'safetensors' : null;
  if (!format) throw new InvalidArgument(`link file ${path} must end in .pt or .safetensors`);
  const dtype = opts.dtype ?? 'bf16';
  if (dtype !== 'bf16' && dtype !== 'f32') throw new InvalidArgument(`link dtype must be bf16 or f32, got ${String(dtype)}`);
  const bytes = linkFileBytes(await link.stateDict(), format, dtype);
  const fs = await fsp();
  const tmp = `${path}.tmp-${process.pid}-${++tmpCounter}`;
  try {
    await fs.writeFile(tmp, bytes);
    await fs.rename(tmp, path);
  } catch (e) {
    await fs.rm(tmp, { force: true });
    throw e;
  }
}

// ------------------------------------------------------------------------------------ manifests

/** outerlink_config.json and outer_adapter_config.json bodies for links we export. */
export function outerManifests(
  paradigm: string,
  links: { key: string; filename: string; type: string; inDim: number; outDim: number }[],
): { outerlinkConfig: Record<string, unknown>; outerAdapterConfig: Record<string, unknown> } {
  const outerAdapterConfig: Record<string, unknown> = {};
  for (const l of links) {
    outerAdapterConfig[`${l.key}_type`] = l.type;
    outerAdapterConfig[`${l.key}_in_dim`] = l.inDim;
    outerAdapterConfig[`${l.key}_out_dim`] = l.outDim;
  }
  return {
    outerlinkConfig: {
      format_version: 1,
      paradigm,
      legacy_config_filename: 'outer_adapter_config.json',
      adapters: links.map((l) => ({ legacy_key: l.key, filename: l.filename, adapter_type: l.type, in_dim: l.inDim, out_dim: l.outDim })),
    },
    outerAdapterConfig,
  };
}
