/**
 * What upstream's train_inner.py leaves beside the inner link through save_pretrained (docs/method.md §3.1): the
 * base model's config, generation config, tokenizer files and weights, so that a save_dir is a whole role
 * repository that `rmas ask --ckpt_override ROLE=DIR` and `train-outer --agentN_model_name_or_path DIR`
 * read as a model folder. The base model is frozen, so its files are placed as they are, never rewritten:
 * hard-linked when the save_dir is on the source's filesystem, copied otherwise. Node only.
 */
import { copyFileSync, existsSync, linkSync, readFileSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CorruptCheckpoint, MissingCheckpoint, UnsafeModelFile } from '../errors';
import { MODEL_FILE_DEFAULT_MAX_BYTES, modelFileRoot } from '../formats/model-file';

/** The model and tokenizer files of a Hugging Face folder that a role repository carries (weights apart). */
export const MODEL_CONFIG_FILES: readonly string[] = [
  'config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', 'special_tokens_map.json',
  'added_tokens.json', 'vocab.json', 'merges.txt', 'tokenizer.model',
];
const INDEX = 'model.safetensors.index.json';

/**
 * The file `name` of the model folder `dir` resolves to; UnsafeModelFile where a symlink leads out of the folder (a hub
 * snapshot's links into its blobs stay inside the repo's cache folder, as readModelFile takes them).
 */
function resolveInside(dir: string, name: string): string {
  const real = realpathSync(join(dir, name));
  const root = modelFileRoot(realpathSync(dir));
  if (real !== root && !real.startsWith(`${root === '/' ? '' : root}/`)) {
    throw new UnsafeModelFile(
      `${join(dir, name)} is a symlink that leads out of ${dir}; it was refused and nothing of it was read. Use the file as the model ships it`,
    );
  }
  return real;
}

/** The files of `dir` to place: config.json (required), the tokenizer files present, and the weights (one file, or the index and its shards). */
export function modelFileNames(dir: string): string[] {
  const has = (n: string) => existsSync(join(dir, n));
  if (!has('config.json'))
    throw new MissingCheckpoint(`${dir} has no config.json; the model folder of the inner link is needed to make a full role folder`);
  const names = MODEL_CONFIG_FILES.filter(has);
  if (has(INDEX)) {
    let map: unknown;
    try {
      const index = resolveInside(dir, INDEX);
      if (statSync(index).size > MODEL_FILE_DEFAULT_MAX_BYTES) {
        throw new UnsafeModelFile(`${join(dir, INDEX)} is larger than ${MODEL_FILE_DEFAULT_MAX_BYTES / 2 ** 20} MiB; it was refused unread`);
      }
      map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map?: unknown }).weight_map;
    } catch (e) {
      if (e instanceof UnsafeModelFile) throw e;
      throw new CorruptCheckpoint(`${join(dir, INDEX)} is not valid JSON (${(e as Error).message}); download the model again`);
    }
    if (typeof map !== 'object' || map === null)
      throw new CorruptCheckpoint(`${join(dir, INDEX)} has no weight_map; download the model again`);
    const shards = [...new Set(Object.values(map as Record<string, unknown>).map(String))].sort();
    const missing = shards.filter((s) => !has(s));
    if (missing.length)
      throw new MissingCheckpoint(`${dir} lacks the shards ${missing.join(', ')} named by ${INDEX}; download the model again`);
    return [...names, INDEX, ...shards];
  }
  if (!has('model.safetensors')) throw new MissingCheckpoint(`${dir} has neither model.safetensors nor ${INDEX}`);
  return [...names, 'model.safetensors'];
}

export type PlacedHow = 'linked' | 'copied';

export interface PlacedModel {
  /** The source folder, absolute. */
  source: string;
  /** 'linked' or 'copied' when every file went the same way, else 'mixed'. */
  method: PlacedHow | 'mixed';
  files: Record<string, PlacedHow>;
}

/** link errors after which a copy is made: another filesystem, or one without hard links (or out of them). */
const NO_LINK = new Set(['EXDEV', 'EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'EMLINK', 'EACCES']);

/**
 * Places the model files of `source` into `dest` (an existing folder): each hard-linked to the file it
 * resolves to (a Hugging Face cache snapshot holds symlinks into its blobs) or, where the filesystem
 * refuses, copied byte for byte. A name already in `dest` that is the same file (same inode) stays; any
 * other is replaced by a rename, never written into, so a previous save's file keeps its bytes until the
 * new one is complete. `link` is fs.linkSync (replaceable in tests).
 */
export function placeModelFiles(source: string, dest: string, link: (from: string, to: string) => void = linkSync): PlacedModel {
  const files: Record<string, PlacedHow> = {};
  // every file resolved first: a link out of the folder refuses the whole placement before anything is placed
  const resolved = modelFileNames(source).map((name) => [name, resolveInside(source, name)] as const);
  for (const [name, from] of resolved) {
    const to = join(dest, name);
    const s = statSync(from);
    const d = existsSync(to) ? statSync(to) : null;
    if (d && d.ino === s.ino && d.dev === s.dev) {
      files[name] = 'linked';
      continue;
    }
    const tmp = join(dest, `.${name}.rmas-partial`);
    rmSync(tmp, { force: true });
    try {
      try {
        link(from, tmp);
        files[name] = 'linked';
      } catch (e) {
        if (!NO_LINK.has((e as NodeJS.ErrnoException).code ?? '')) throw e;
        copyFileSync(from, tmp);
        files[name] = 'copied';
      }
      renameSync(tmp, to);
    } catch (e) {
      rmSync(tmp, { force: true }); // a half copy (a full disk) is not left behind
      throw e;
    }
  }
  const kinds = new Set(Object.values(files));
  return { source: resolve(source), method: kinds.size === 1 ? [...kinds][0]! : 'mixed', files };
}
