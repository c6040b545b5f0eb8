/**
 * Training checkpoints (docs/method.md §3.1): upstream's files so that its loaders read our
 * folders (`adapter.pt` + `adapter_config.json` for the inner loop; `outer_12.pt` …,
 * `outer_adapter_config.json`, `outerlink_config.json` for the outer loop; `train_args.json`), plus what
 * an exact resume needs and upstream does not keep: f32 weights (`<key>.safetensors`), the AdamW moments
 * (`optimizer.safetensors`: `<key>.m`, `<key>.v`, each the link's parameters packed in FlatParams entry
 * order without alignment padding; AdamW's t in the metadata) and `trainer_state.json`.
 *
 * Saving is one journaled commit (file-store.ts protocol): every file is staged in `<dir>/.ckpt-staging/`,
 * the journal is the commit point, then the files are renamed into place and files of the previous
 * checkpoint that the new one lacks (trainer_state.json `files`) are removed. `dir` may be the store
 * root or a folder with other contents (upstream's `--save_dir` holds the final checkpoint at its top
 * and `checkpoint-<step>/` folders inside); nothing else in it is touched. A crash at any point leaves
 * the previous checkpoint or the new one after recoverCheckpoint (which load and save run first).
 */
import { CorruptCheckpoint, InvalidArgument, MissingCheckpoint, RmasError, ShapeMismatch } from '../errors';
import { parseHeader, writeSafetensors } from '../formats/safetensors';
import type { InnerLink, LinkStateDict, OuterLink } from '../mas/links';
import { linkFileBytes, parseLinkBytes } from '../mas/upstream';
import {
  type FileStore,
  JOURNAL_FILE,
  STAGING_DIR,
  beginCommit,
  folderPath,
  inFolder,
  pendingCommit,
  recoverCheckpoint,
} from './file-store';

export interface TrainerState {
  step: number;
  epoch: number;
  sampleCursor: number;
  /** Data order of the current epoch. */
  order: number[];
  /** Rng state (Rng.state()). */
  rng: unknown;
  skipped: Record<string, number>;
  tokensSeen: number;
}

type AnyLink = InnerLink | OuterLink;

export interface CheckpointContent {
  kind: 'inner' | 'outer';
  /** link key → link ('adapter' for the inner loop; 'outer_12' … for outer). */
  links: ReadonlyMap<string, AnyLink>;
  /** AdamW.t */
  optimizerT: number;
  state: TrainerState;
  /** Written as train_args.json. */
  args: Record<string, unknown>;
  /** Extra JSON manifests to write verbatim, by file name (adapter_config.json, outerlink_config.json, …). */
  manifests: Record<string, unknown>;
}

export const OPTIMIZER_FILE = 'optimizer.safetensors';
export const TRAINER_STATE_FILE = 'trainer_state.json';
export const TRAIN_ARGS_FILE = 'train_args.json';
const FORMAT_VERSION = 1;

const utf8 = new TextEncoder();
const json = (v: unknown) => utf8.encode(`${JSON.stringify(v, null, 2)}\n`);
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown) => Number.isSafeInteger(v) && (v as number) >= 0;
const KEY_RE = /^[A-Za-z0-9_()-]+$/;

/** The link's parameters packed in entry order (no padding), from a per-name export. */
function pack(link: AnyLink, parts: Map<string, Float32Array>): Float32Array {
  const out = new Float32Array(link.numParams);
  let at = 0;
  for (const e of link.params.entries) {
    out.set(parts.get(e.name)!, at);
    at += e.numel;
  }
  return out;
}

function unpack(link: AnyLink, flat: Float32Array): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  let at = 0;
  for (const e of link.params.entries) {
    out.set(e.name, flat.subarray(at, at + e.numel));
    at += e.numel;
  }
  return out;
}

function checkContent(c: CheckpointContent) {
  const bad = (what: string) => new CorruptCheckpoint(`saveCheckpoint: ${what}; fix the trainer before saving`);
  if (!c.links.size) throw bad('no links to save');
  for (const k of c.links.keys()) if (!KEY_RE.test(k)) throw bad(`link key '${k}' is not a plain file stem`);
  if (!isCount(c.optimizerT)) throw bad(`optimizer t ${c.optimizerT} is not a non-negative integer`);
  const ours = new Set([
    JOURNAL_FILE,
    OPTIMIZER_FILE,
    TRAINER_STATE_FILE,
    TRAIN_ARGS_FILE,
    ...[...c.links.keys()].flatMap((k) => [`${k}.pt`, `${k}.safetensors`]),
  ]);
  for (const name of Object.keys(c.manifests)) {
    if (!/^[^/\\]+\.json$/.test(name) || ours.has(name))
      throw bad(`manifest name '${name}' must be a .json file name not used by the checkpoint itself`);
  }
  checkState(c.state, 'saveCheckpoint');
}

function checkState(s: unknown, where: string): asserts s is TrainerState {
  const fail = (what: string) =>
    new CorruptCheckpoint(`${where}: trainer state ${what}; the checkpoint was not written by this trainer or is damaged`);
  if (!isObj(s)) throw fail('is not an object');
  for (const k of ['step', 'epoch', 'sampleCursor', 'tokensSeen'] as const)
    if (!isCount(s[k])) throw fail(`field ${k} = ${JSON.stringify(s[k])} is not a non-negative integer`);
  if (!Array.isArray(s.order) || !s.order.every(isCount)) throw fail('field order is not a list of sample indices');
  if (!isObj(s.skipped) || !Object.values(s.skipped).every(isCount)) throw fail('field skipped is not a map of counts');
  if (!('rng' in s)) throw fail('has no rng field');
}

/** The file names a checkpoint's trainer_state.json says it consists of (older ones: derived from its links). */
function filesOf(top: unknown): string[] {
  if (!isObj(top)) return [];
  if (Array.isArray(top.files) && top.files.every((f) => typeof f === 'string')) return top.files as string[];
  const links = Array.isArray(top.links) ? top.links.map(String).filter((k) => KEY_RE.test(k)) : [];
  return [...links.flatMap((k) => [`${k}.safetensors`, `${k}.pt`]), OPTIMIZER_FILE, TRAIN_ARGS_FILE, TRAINER_STATE_FILE];
}

/**
 * Saves a checkpoint into `dir` (a checkpoint-N folder or the save_dir root, other contents kept) as one
 * atomic commit; .pt in f32 unless `ptDtype` is 'bf16' (upstream's release dtype).
 */
export async function saveCheckpoint(
  store: FileStore,
  dir: string,
  c: CheckpointContent,
  opts: { ptDtype?: 'bf16' | 'f32' } = {},
): Promise<void> {
  checkContent(c);
  const ptDtype = opts.ptDtype ?? 'f32';
  const d = folderPath(dir);
  const tx = await beginCommit(store, d); // recovers an interrupted save first
  const stPath = inFolder(d, TRAINER_STATE_FILE);
  const previous = (await store.exists(stPath))
    ? filesOf(
        await store
          .read(stPath)
          .then((b) => parseJson(b, stPath))
          .catch(() => null),
      )
    : [];

  const files: string[] = [];
  const put = async (name: string, bytes: Uint8Array) => {
    files.push(name);
    await tx.put(name, bytes);
  };
  const moments: [string, { dtype: 'F32'; shape: number[]; bytes: Uint8Array }][] = [];
  for (const [key, link] of c.links) {
    const sd = await link.stateDict();
    await put(`${key}.safetensors`, linkFileBytes(sd, 'safetensors', 'f32'));
    await put(`${key}.pt`, linkFileBytes(sd, 'pt', ptDtype));
    for (const part of ['m', 'v'] as const) {
      const flat = pack(link, await link.params.export(part));
      moments.push([
        `${key}.${part}`,
        { dtype: 'F32', shape: [flat.length], bytes: new Uint8Array(flat.buffer, flat.byteOffset, flat.byteLength) },
      ]);
    }
  }
  const meta = { format_version: String(FORMAT_VERSION), t: String(c.optimizerT), links: [...c.links.keys()].join(',') };
  await put(OPTIMIZER_FILE, writeSafetensors(moments, meta));
  for (const [name, body] of Object.entries(c.manifests)) await put(name, json(body));
  await put(TRAIN_ARGS_FILE, json(c.args));
  files.push(TRAINER_STATE_FILE); // renamed in last
  await tx.put(
    TRAINER_STATE_FILE,
    json({ format_version: FORMAT_VERSION, kind: c.kind, links: [...c.links.keys()], files, state: c.state }),
  );
  const plain = (f: string) => /^[^/\\]+$/.test(f) && !['.', '..', STAGING_DIR, JOURNAL_FILE].includes(f);
  await tx.commit(previous.filter((f) => plain(f) && !files.includes(f)));
}

/** Re-raises a named error with the file in front, so the user knows which file to replace. */
function inFile<T>(file: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof RmasError) {
      const Cls = e.constructor as new (m: string) => RmasError;
      throw new Cls(`${file}: ${e.message}`);
    }
    throw e;
  }
}

function parseJson(bytes: Uint8Array, file: string): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new CorruptCheckpoint(`${file} is not valid JSON (${(e as Error).message}); the checkpoint is damaged, resume from another one`);
  }
}

/** The state dict of `file`, checked against the link's own names and shapes (nothing is loaded yet). */
function checkAgainst(link: AnyLink, sd: LinkStateDict, file: string) {
  const want = link.params.entries;
  const names = new Set(want.map((e) => e.name));
  const missing = want.filter((e) => !sd.has(e.name)).map((e) => e.name);
  const extra = [...sd.keys()].filter((k) => !names.has(k));
  if (missing.length || extra.length) {
    throw new CorruptCheckpoint(
      `${file}: ${missing.length ? `lacks ${missing.join(', ')}` : ''}${missing.length && extra.length ? ' and ' : ''}${extra.length ? `has unexpected ${extra.join(', ')}` : ''}; it is not a checkpoint of this ${link.type} link`,
    );
  }
  for (const e of want) {
    const t = sd.get(e.name)!;
    if (t.shape.join() !== e.shape.join() || t.data.length !== e.numel) {
      throw new ShapeMismatch(
        `${file}: '${e.name}' has shape [${t.shape}] but link ${link.name} needs [${e.shape}]; resume with the same model sizes`,
      );
    }
  }
}

/**
 * Loads weights, AdamW moments and t into the given links (same keys and sizes) and returns the trainer
 * state and args. Everything is read and checked before any link changes. Finishes or undoes an interrupted save first.
 */
export async function loadCheckpoint(
  store: FileStore,
  dir: string,
  links: ReadonlyMap<string, AnyLink>,
): Promise<{ optimizerT: number; state: TrainerState; args: Record<string, unknown> }> {
  const d = folderPath(dir);
  await recoverCheckpoint(store, d);
  const stFile = inFolder(d, TRAINER_STATE_FILE);
  if (!(await store.exists(stFile))) {
    throw new MissingCheckpoint(
      `no checkpoint at ${d || 'the store root'} (no ${TRAINER_STATE_FILE}); start without --resume or point to a checkpoint folder`,
    );
  }
  const top = parseJson(await store.read(stFile), stFile);
  if (!isObj(top) || top.format_version !== FORMAT_VERSION || !Array.isArray(top.links)) {
    throw new CorruptCheckpoint(
      `${stFile}: not a format_version ${FORMAT_VERSION} trainer state with a links list; resume from a checkpoint this trainer wrote`,
    );
  }
  const saved = (top.links as unknown[]).map(String);
  const have = [...links.keys()];
  if (saved.length !== have.length || saved.some((k) => !links.has(k))) {
    throw new CorruptCheckpoint(
      `${d || 'the store root'} holds links ${saved.join(', ')} but this run trains ${have.join(', ')}; resume with the same style and stage`,
    );
  }
  inFile(stFile, () => checkState(top.state, 'loadCheckpoint'));

  const argsFile = inFolder(d, TRAIN_ARGS_FILE);
  const args = parseJson(await store.read(argsFile), argsFile);
  if (!isObj(args)) throw new CorruptCheckpoint(`${argsFile} does not hold a JSON object; the checkpoint is damaged`);

  const optFile = inFolder(d, OPTIMIZER_FILE);
  const optBytes = await store.read(optFile);
  const moments = inFile(optFile, () => parseLinkBytes(optBytes, optFile));
  const t = Number(readMetadataT(optBytes, optFile));
  if (!isCount(t)) throw new CorruptCheckpoint(`${optFile}: metadata t is missing or not a step count; the checkpoint is damaged`);

  const plan: { link: AnyLink; sd: LinkStateDict; m: Map<string, Float32Array>; v: Map<string, Float32Array> }[] = [];
  for (const [key, link] of links) {
    const file = inFolder(d, `${key}.safetensors`);
    const bytes = await store.read(file);
    const sd = inFile(file, () => parseLinkBytes(bytes, file));
    checkAgainst(link, sd, file);
    const mv = (['m', 'v'] as const).map((part) => {
      const tensor = moments.get(`${key}.${part}`);
      if (!tensor)
        throw new CorruptCheckpoint(`${optFile}: lacks tensor '${key}.${part}'; the checkpoint is damaged, resume from another one`);
      if (tensor.shape.length !== 1 || tensor.data.length !== link.numParams) {
        throw new ShapeMismatch(
          `${optFile}: '${key}.${part}' has shape [${tensor.shape}] but link ${key} has ${link.numParams} parameters; resume with the same model sizes`,
        );
      }
      return unpack(link, Float32Array.from(tensor.data));
    });
    plan.push({ link, sd, m: mv[0], v: mv[1] });
  }
  for (const { link, sd, m, v } of plan) {
    link.load(sd);
    link.params.import(m, { part: 'm' });
    link.params.import(v, { part: 'v' });
  }
  return { optimizerT: t, state: top.state as TrainerState, args };
}

/** The `t` entry of the optimizer file's __metadata__ (parseLinkBytes has validated the header already). */
function readMetadataT(bytes: Uint8Array, file: string): string | undefined {
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true));
  return parseHeader(file, bytes.subarray(8, 8 + n), bytes.length - 8 - n).metadata.t;
}

// ------------------------------------------------------------------------------------ listing

const STEP_DIR = /^checkpoint-(\d+)$/;

/**
 * The step of the checkpoint in `d` if it is complete — after an interrupted commit is finished, so
 * the answer matches what load will see — else null. Reads only; changes nothing.
 */
async function completeStep(store: FileStore, d: string): Promise<number | null> {
  try {
    const j = await pendingCommit(store, d);
    const where = async (name: string): Promise<string | null> => {
      if (j?.remove.includes(name)) return null;
      const staged = inFolder(d, `${STAGING_DIR}/${name}`);
      if (j?.write.includes(name) && (await store.exists(staged))) return staged;
      return (await store.exists(inFolder(d, name))) ? inFolder(d, name) : null;
    };
    const st = await where(TRAINER_STATE_FILE);
    if (!st) return null;
    const top = parseJson(await store.read(st), st);
    if (!isObj(top) || top.format_version !== FORMAT_VERSION || !isObj(top.state) || !isCount(top.state.step)) return null;
    for (const f of filesOf(top)) if (!(await where(f))) return null;
    return top.state.step as number;
  } catch (e) {
    if (e instanceof RmasError) return null;
    throw e;
  }
}

/**
 * The complete checkpoints under a save_dir: its `checkpoint-<step>` folders (step from the name) and,
 * if it holds one at its top, the folder itself (step from its trainer state), oldest first; on a tie
 * the top comes last. Reads only: an interrupted save counts as load will see it after recovery.
 */
export async function listCheckpoints(store: FileStore, dir: string): Promise<{ step: number; dir: string }[]> {
  const d = folderPath(dir);
  const out: { step: number; dir: string; top: boolean }[] = [];
  for (const name of await store.list(d)) {
    const m = STEP_DIR.exec(name);
    if (!m || !Number.isSafeInteger(Number(m[1]))) continue;
    if ((await completeStep(store, inFolder(d, name))) !== null) out.push({ step: Number(m[1]), dir: inFolder(d, name), top: false });
  }
  const top = await completeStep(store, d);
  if (top !== null) out.push({ step: top, dir: d, top: true });
  out.sort((a, b) => a.step - b.step || Number(a.top) - Number(b.top));
  return out.map(({ step, dir: at }) => ({ step, dir: at }));
}

/** Where a pruned checkpoint folder goes before it is deleted: no longer a checkpoint-<step> name. */
const PRUNED = '.pruned-';

/**
 * --save_total_limit: keeps the newest `limit` complete checkpoint-<step> folders of `dir` and deletes every other one:
 * older checkpoints, and the remains of a save that was interrupted (a folder that never became a checkpoint must not
 * count among the newest, or the last complete one would go). To be called after a save committed (one writer), so
 * the newest is never touched mid-write. Each goes aside first (renamed out of the checkpoint-<step> names, one atomic
 * step), then is deleted: a crash in between leaves a folder that is never taken for a checkpoint, and the next call
 * finishes deleting it. Returns the folders removed, oldest first.
 */
export async function pruneCheckpoints(store: FileStore, dir: string, limit: number): Promise<string[]> {
  if (!Number.isInteger(limit) || limit < 1) throw new InvalidArgument(`save_total_limit must be a positive integer, got ${limit}`);
  const d = folderPath(dir);
  const names = await store.list(d);
  for (const n of names.filter((x) => x.startsWith(PRUNED))) await store.remove(inFolder(d, n));
  const complete = new Set((await listCheckpoints(store, d)).map((c) => c.dir));
  const steps = names.flatMap((n) => {
    const m = STEP_DIR.exec(n);
    return m && Number.isSafeInteger(Number(m[1])) ? [{ name: n, step: Number(m[1]) }] : [];
  }).sort((a, b) => a.step - b.step);
  const keep = new Set(steps.filter((s) => complete.has(inFolder(d, s.name))).slice(-limit).map((s) => s.name));
  const old = steps.filter((s) => !keep.has(s.name));
  for (const { name } of old) {
    await store.rename(inFolder(d, name), inFolder(d, `${PRUNED}${name}`));
    await store.remove(inFolder(d, `${PRUNED}${name}`));
  }
  return old.map(({ name }) => inFolder(d, name));
}

/** The checkpoint `--resume DIR` continues from: the newest complete one (listCheckpoints' last). */
export async function latestCheckpoint(store: FileStore, dir: string): Promise<{ step: number; dir: string }> {
  const all = await listCheckpoints(store, dir);
  if (!all.length) {
    throw new MissingCheckpoint(
      `no complete checkpoint in ${folderPath(dir) || 'the store root'} or its checkpoint-<step> folders; start without --resume or point to a save_dir`,
    );
  }
  return all[all.length - 1];
}
