/**
 * Sharded safetensors checkpoints: `model.safetensors.index.json` holds `weight_map` (tensor name → shard
 * file name, relative to the index) and optional `metadata` (e.g. total_size). Every shard header is read and
 * checked against the map when the checkpoint is opened, so a missing shard or tensor fails early, naming
 * the file, before any weight is uploaded.
 */
import { CorruptCheckpoint } from '../errors';
import { showValue } from '../util/show';
import { SafetensorsFile, type StTensor, type StTensorInfo, type TensorStore } from './safetensors';
import { type ByteSource, type UrlSourceOptions, isNotFound, readAll, resolveSource } from './sources';

export const INDEX_FILE = 'model.safetensors.index.json';
export const SINGLE_FILE = 'model.safetensors';

export interface CheckpointOptions extends UrlSourceOptions {
  /** How a file name relative to `base` becomes a source (default: resolveSource, a path or URL). */
  open?: (file: string) => ByteSource;
}

const REDO = 're-download the checkpoint (all shards and the index) or re-export it';

/** Parses an index JSON into tensor → shard file, rejecting shard names that escape the checkpoint folder. */
export function parseIndex(file: string, bytes: Uint8Array): { weightMap: Map<string, string>; metadata: Record<string, string> } {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (e) {
    throw new CorruptCheckpoint(`${file} is not valid JSON (${(e as Error).message}); ${REDO}`);
  }
  const wm = (json as { weight_map?: unknown } | null)?.weight_map;
  if (typeof wm !== 'object' || wm === null || Array.isArray(wm)) {
    throw new CorruptCheckpoint(`${file} has no "weight_map" object (tensor name → shard file); ${REDO}`);
  }
  const weightMap = new Map<string, string>();
  for (const [name, shard] of Object.entries(wm)) {
    // a file name under the folder: no scheme, absolute path, backslash, '.' or '..' part, empty part or trailing '/'
    if (typeof shard !== 'string' || !shard || /^[a-z]+:|^\/|\\|(^|\/)\.{1,2}(\/|$)|\/\/|\/$/i.test(shard)) {
      throw new CorruptCheckpoint(`${file}: tensor "${name}" maps to ${showValue(shard)}, expected a shard file name ` +
        `inside the checkpoint folder; ${REDO}`);
    }
    weightMap.set(name, shard);
  }
  const meta = (json as { metadata?: unknown }).metadata;
  const metadata: Record<string, string> = {};
  // scalars only (total_size, total_parameters): String() of a deeply nested array would recurse until the stack runs out
  if (typeof meta === 'object' && meta !== null) {
    for (const [k, v] of Object.entries(meta)) if (['string', 'number', 'boolean'].includes(typeof v)) metadata[k] = String(v);
  }
  return { weightMap, metadata };
}

export class ShardedSafetensors implements TensorStore {
  private constructor(
    readonly name: string,
    readonly weightMap: ReadonlyMap<string, string>,
    readonly shards: ReadonlyMap<string, SafetensorsFile>,
    readonly metadata: Readonly<Record<string, string>>,
  ) {}

  /** Opens `base/indexFile` and the headers of all shards it names. `base` is a folder path or a URL. */
  static async open(base: string, opts: CheckpointOptions = {}, indexFile = INDEX_FILE): Promise<ShardedSafetensors> {
    const open = opts.open ?? ((f: string) => resolveSource(base, f, opts));
    const indexSrc = open(indexFile);
    const { weightMap, metadata } = parseIndex(indexSrc.name, await readAll(indexSrc));
    const shards = new Map<string, SafetensorsFile>();
    await Promise.all([...new Set(weightMap.values())].map(async (f) => {
      const src = open(f);
      try {
        shards.set(f, await SafetensorsFile.open(src));
      } catch (e) {
        if (!isNotFound(e)) throw e;
        throw new CorruptCheckpoint(`${src.name} is missing, but ${indexSrc.name} maps tensors to it; ${REDO}`);
      }
    }));
    for (const [name, f] of weightMap) {
      if (!shards.get(f)!.has(name)) {
        throw new CorruptCheckpoint(`${shards.get(f)!.name} has no tensor "${name}", which ${indexSrc.name} places there; ${REDO}`);
      }
    }
    return new ShardedSafetensors(indexSrc.name, weightMap, shards, metadata);
  }

  names(): string[] {
    return [...this.weightMap.keys()];
  }

  has(name: string): boolean {
    return this.weightMap.has(name);
  }

  private shard(name: string): SafetensorsFile {
    const f = this.weightMap.get(name);
    if (f === undefined) {
      throw new CorruptCheckpoint(`${this.name} has no tensor "${name}" in its weight_map; the checkpoint does not match ` +
        `the model (wrong files, or an incomplete download): ${REDO}`);
    }
    return this.shards.get(f)!;
  }

  info(name: string): StTensorInfo {
    return this.shard(name).info(name);
  }

  read(name: string): Promise<StTensor> {
    return this.shard(name).read(name);
  }

  async close(): Promise<void> {
    await Promise.all([...this.shards.values()].map((s) => s.close()));
  }
}

/**
 * Opens the checkpoint of a Hugging Face model folder or URL: the sharded index when there is one, else
 * `model.safetensors`.
 */
export async function openCheckpoint(base: string, opts: CheckpointOptions = {}): Promise<TensorStore & { close(): Promise<void> }> {
  try {
    return await ShardedSafetensors.open(base, opts);
  } catch (e) {
    if (!isNotFound(e)) throw e;
  }
  const open = opts.open ?? ((f: string) => resolveSource(base, f, opts));
  const src = open(SINGLE_FILE);
  try {
    return await SafetensorsFile.open(src);
  } catch (e) {
    if (!isNotFound(e)) throw e;
    throw new CorruptCheckpoint(`${base} has neither ${INDEX_FILE} nor ${SINGLE_FILE}; point at a Hugging Face model folder ` +
      'or URL that holds the safetensors weights, or download them there');
  }
}
