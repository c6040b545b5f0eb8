/**
 * Training checkpoints (spec: docs/recursivemas.md §3.1): upstream's files so that its loaders read our
 * folders (`adapter.pt` + `adapter_config.json` for the inner loop; `outer_12.pt` …,
 * `outer_adapter_config.json`, `outerlink_config.json` for the outer loop; `train_args.json`), plus what
 * an exact resume needs and upstream does not keep: f32 weights (`<key>.safetensors`), the AdamW moments
 * (`optimizer.safetensors`: `<key>.m`, `<key>.v`, each the link's parameters packed in FlatParams entry
 * order without alignment padding; AdamW's t in the metadata) and `trainer_state.json`.
 *
 * Saving writes everything into `<dir>.tmp`, trainer_state.json last, then swaps the folder in
 * (store.ts protocol), so a crash leaves the previous checkpoint or the new one, never a mix.
 */
import { CorruptCheckpoint, MissingCheckpoint, RmasError, ShapeMismatch } from '../errors';
import { parseHeader, writeSafetensors } from '../formats/safetensors';
import type { InnerLink, LinkStateDict, OuterLink } from '../mas/links';
import { linkFileBytes, parseLinkBytes } from '../mas/upstream';
import { type CheckpointStore, recoverCheckpoint } from './store';

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
  const ours = new Set([OPTIMIZER_FILE, TRAINER_STATE_FILE, TRAIN_ARGS_FILE, ...[...c.links.keys()].flatMap((k) => [`${k}.pt`, `${k}.safetensors`])]);
  for (const name of Object.keys(c.manifests)) {
    if (!/^[^/\\]+\.json$/.test(name) || ours.has(name)) throw bad(`manifest name '${name}' must be a .json file name not used by the checkpoint itself`);
  }
  checkState(c.state, 'saveCheckpoint');
}

function checkState(s: unknown, where: string): asserts s is TrainerState {
  const fail = (what: string) => new CorruptCheckpoint(`${where}: trainer state ${what}; the checkpoint was not written by this trainer or is damaged`);
  if (!isObj(s)) throw fail('is not an object');
  for (const k of ['step', 'epoch', 'sampleCursor', 'tokensSeen'] as const) if (!isCount(s[k])) throw fail(`field ${k} = ${JSON.stringify(s[k])} is not a non-negative integer`);
  if (!Array.isArray(s.order) || !s.order.every(isCount)) throw fail('field order is not a list of sample indices');
  if (!isObj(s.skipped) || !Object.values(s.skipped).every(isCount)) throw fail('field skipped is not a map of counts');
  if (!('rng' in s)) throw fail('has no rng field');
}

/** Saves a checkpoint folder atomically; .pt in f32 unless `ptDtype` is 'bf16' (upstream's release dtype). */
export async function saveCheckpoint(store: CheckpointStore, dir: string, c: CheckpointContent, opts: { ptDtype?: 'bf16' | 'f32' } = {}): Promise<void> {
  checkContent(c);
  const ptDtype = opts.ptDtype ?? 'f32';
  await recoverCheckpoint(store, dir);
  const tmp = `${dir.replace(/\/+$/, '')}.tmp`;
  await store.remove(tmp);

  const moments: [string, { dtype: 'F32'; shape: number[]; bytes: Uint8Array }][] = [];
  for (const [key, link] of c.links) {
    const sd = await link.stateDict();
    await store.write(`${tmp}/${key}.safetensors`, linkFileBytes(sd, 'safetensors', 'f32'));
    await store.write(`${tmp}/${key}.pt`, linkFileBytes(sd, 'pt', ptDtype));
    for (const part of ['m', 'v'] as const) {
      const flat = pack(link, await link.params.export(part));
      moments.push([`${key}.${part}`, { dtype: 'F32', shape: [flat.length], bytes: new Uint8Array(flat.buffer, flat.byteOffset, flat.byteLength) }]);
    }
  }
  const meta = { format_version: String(FORMAT_VERSION), t: String(c.optimizerT), links: [...c.links.keys()].join(',') };
  await store.write(`${tmp}/${OPTIMIZER_FILE}`, writeSafetensors(moments, meta));
  for (const [name, body] of Object.entries(c.manifests)) await store.write(`${tmp}/${name}`, json(body));
  await store.write(`${tmp}/${TRAIN_ARGS_FILE}`, json(c.args));
  // last: its presence marks a complete folder
  await store.write(`${tmp}/${TRAINER_STATE_FILE}`, json({ format_version: FORMAT_VERSION, kind: c.kind, links: [...c.links.keys()], state: c.state }));
  await store.rename(tmp, dir);
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
    throw new CorruptCheckpoint(`${file}: ${missing.length ? `lacks ${missing.join(', ')}` : ''}${missing.length && extra.length ? ' and ' : ''}${extra.length ? `has unexpected ${extra.join(', ')}` : ''}; it is not a checkpoint of this ${link.type} link`);
  }
  for (const e of want) {
    const t = sd.get(e.name)!;
    if (t.shape.join() !== e.shape.join() || t.data.length !== e.numel) {
      throw new ShapeMismatch(`${file}: '${e.name}' has shape [${t.shape}] but link ${link.name} needs [${e.shape}]; resume with the same model sizes`);
    }
  }
}

/**
 * Loads weights, AdamW moments and t into the given links (same keys and sizes) and returns the trainer
 * state and args. Everything is read and checked before any link changes. Finishes an interrupted swap first.
 */
export async function loadCheckpoint(
  store: CheckpointStore,
  dir: string,
  links: ReadonlyMap<string, AnyLink>,
): Promise<{ optimizerT: number; state: TrainerState; args: Record<string, unknown> }> {
  await recoverCheckpoint(store, dir);
  const d = dir.replace(/\/+$/, '');
  if (!(await store.exists(`${d}/${TRAINER_STATE_FILE}`))) {
    throw new MissingCheckpoint(`no checkpoint at ${d} (no ${TRAINER_STATE_FILE}); start without --resume or point to a checkpoint folder`);
  }
  const stFile = `${d}/${TRAINER_STATE_FILE}`;
  const top = parseJson(await store.read(stFile), stFile);
  if (!isObj(top) || top.format_version !== FORMAT_VERSION || !Array.isArray(top.links)) {
    throw new CorruptCheckpoint(`${stFile}: not a format_version ${FORMAT_VERSION} trainer state with a links list; resume from a checkpoint this trainer wrote`);
  }
  const saved = (top.links as unknown[]).map(String);
  const have = [...links.keys()];
  if (saved.length !== have.length || saved.some((k) => !links.has(k))) {
    throw new CorruptCheckpoint(`${d} holds links ${saved.join(', ')} but this run trains ${have.join(', ')}; resume with the same style and stage`);
  }
  inFile(stFile, () => checkState(top.state, 'loadCheckpoint'));

  const argsFile = `${d}/${TRAIN_ARGS_FILE}`;
  const args = parseJson(await store.read(argsFile), argsFile);
  if (!isObj(args)) throw new CorruptCheckpoint(`${argsFile} does not hold a JSON object; the checkpoint is damaged`);

  const optFile = `${d}/${OPTIMIZER_FILE}`;
  const optBytes = await store.read(optFile);
  const moments = inFile(optFile, () => parseLinkBytes(optBytes, optFile));
  const t = Number(readMetadataT(optBytes, optFile));
  if (!isCount(t)) throw new CorruptCheckpoint(`${optFile}: metadata t is missing or not a step count; the checkpoint is damaged`);

  const plan: { link: AnyLink; sd: LinkStateDict; m: Map<string, Float32Array>; v: Map<string, Float32Array> }[] = [];
  for (const [key, link] of links) {
    const file = `${d}/${key}.safetensors`;
    const bytes = await store.read(file);
    const sd = inFile(file, () => parseLinkBytes(bytes, file));
    checkAgainst(link, sd, file);
    const mv = (['m', 'v'] as const).map((part) => {
      const tensor = moments.get(`${key}.${part}`);
      if (!tensor) throw new CorruptCheckpoint(`${optFile}: lacks tensor '${key}.${part}'; the checkpoint is damaged, resume from another one`);
      if (tensor.shape.length !== 1 || tensor.data.length !== link.numParams) {
        throw new ShapeMismatch(`${optFile}: '${key}.${part}' has shape [${tensor.shape}] but link ${key} has ${link.numParams} parameters; resume with the same model sizes`);
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
