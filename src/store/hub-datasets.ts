/**
 * A Hugging Face dataset's split as data files in the Hugging Face cache (datasets--Org--Name, shared with Python's
 * `datasets` and huggingface_hub), fetched through the hub client: loadRows's `datasetFiles` hook for the runner. The
 * datasets-server rows API it replaces there ignores HF_ENDPOINT, so a mirror or the stand-in hub could not serve it.
 *
 * Which files make a split follows `datasets` (data_files.py, load.py) for a repository without a loading script: the
 * README's YAML `configs:` (config_name, data_files as a glob, a list, or {split, path} entries; data_dir), else its
 * default patterns (data/{split}-NNNNN-of-NNNNN.*, then folders named by a split, then file names holding one, else every
 * file is train); the format is the extension most of the split's files have. Only README.md and the asked split's files
 * are fetched; a second run asks the hub for the file list alone, and HF_HUB_OFFLINE=1 asks nothing.
 */
import { parse as parseYaml } from 'yaml';
import { DownloadFailed, HubOffline, InvalidArgument } from '../errors';
import type { DataFileFormat, DatasetFiles } from '../train/data/rows';
import { nodeImport } from '../util/node-import';
import { type HubFetchOptions, type HubSettings, checkRepoId, listRepo } from './hub';
import { type DownloadEvent, downloadRepo } from './hub-cache';

/** One config of a README's `configs:` list. */
export interface DatasetConfig {
  name: string;
  /** Split → globs, relative to dataDir; absent: the default patterns. */
  dataFiles?: Map<string, string[]>;
  dataDir?: string;
  /** `default: true`: what a load without a config name reads. */
  isDefault: boolean;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One path segment of a glob as a regular expression (fnmatch's `*`, `?`, `[…]`, `[!…]`, never crossing '/'). */
function segmentRe(seg: string): string {
  let re = '';
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === '*') {
      while (seg[i + 1] === '*') i++;
      re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      let j = i + 1;
      if (seg[j] === '!') j++;
      if (seg[j] === ']') j++;
      j = seg.indexOf(']', j);
      if (j < 0) { re += '\\['; continue; }
      const body = seg.slice(i + 1, j).replace(/\\/g, '\\\\');
      re += body.startsWith('!') ? `[^/${body.slice(1)}]` : `[${body.startsWith('^') ? `\\${body}` : body}]`;
      i = j;
    } else re += c.replace(/[.+^${}()|\\\]]/g, '\\$&');
  }
  return re;
}

/**
 * A data_files glob as `datasets` resolves it (fsspec's glob, as Python's glob.glob): `*`, `?` and sets stay within one
 * path segment; a whole segment `**` spans any number of segments, none included.
 */
export function globRegExp(pattern: string): RegExp {
  const segs = pattern.replace(/^(\.\/)+/, '').split('/');
  const last = segs.length - 1;
  const re = segs.map((s, k) => (s === '**' ? (k === last ? '.*' : '(?:[^/]+/)*') : segmentRe(s) + (k === last ? '' : '/')));
  return new RegExp(`^${re.join('')}$`, 's');
}

/** Files `datasets` never takes as data unless a pattern names them. */
const IGNORED = ['README.md', 'config.json', 'dataset_info.json', 'dataset_infos.json', 'dummy_data.zip', 'dataset_dict.json'];
const hidden = (part: string) => part.startsWith('.') && !/^\.+$/.test(part);
const special = (part: string) => part.startsWith('__');
const count = (parts: readonly string[], f: (p: string) => boolean) => parts.filter(f).length;

/** The files a glob matches, sorted, leaving hidden and `__special__` parts and the card's own files unless asked for by name. */
export function resolvePattern(files: readonly string[], pattern: string): string[] {
  const re = globRegExp(pattern);
  const pat = pattern.split('/');
  return files
    .filter((f) => {
      if (!re.test(f)) return false;
      const parts = f.split('/');
      if (IGNORED.includes(parts[parts.length - 1]!) && parts[parts.length - 1] !== pat[pat.length - 1]) return false;
      return count(parts.slice(0, -1), special) === count(pat.slice(0, -1), special) && count(parts, hidden) === count(pat, hidden);
    })
    .sort();
}

const SPLIT_KEYWORDS: Record<string, string[]> = {
  train: ['train', 'training'],
  validation: ['validation', 'valid', 'dev', 'val'],
  test: ['test', 'testing', 'eval', 'evaluation'],
};
const SEP = '[-._ 0-9]';
const keywordPatterns = (bases: string[]) =>
  Object.fromEntries(Object.entries(SPLIT_KEYWORDS).map(([s, kws]) => [s, kws.flatMap((k) => bases.map((b) => b.replaceAll('{k}', k)))]));
/** `datasets`'s default split patterns after the sharded one, in the order tried: split in a folder name, in a file name, none. */
const DEFAULT_GROUPS: Record<string, string[]>[] = [
  keywordPatterns(['**/{k}/**', `**/{k}${SEP}*/**`, `**/*${SEP}{k}/**`, `**/*${SEP}{k}${SEP}*/**`]),
  keywordPatterns([`**/{k}${SEP}*`, `**/*${SEP}{k}${SEP}*`]),
  { train: ['**'] },
];
const SHARDED = 'data/{split}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*';
const SPLIT_ORDER = ['train', 'validation', 'test'];
const splitOrder = (names: Iterable<string>) => {
  const all = [...new Set(names)];
  return [...SPLIT_ORDER.filter((s) => all.includes(s)), ...all.filter((s) => !SPLIT_ORDER.includes(s)).sort()];
};

/** The splits and their globs that `datasets` infers from a repo's file names (get_data_patterns). */
export function defaultSplits(files: readonly string[], where: string): Map<string, string[]> {
  const sharded = resolvePattern(files, SHARDED.replace('{split}', '*'));
  if (sharded.length) {
    const names = sharded.map((f) => /^(.+)-[0-9]{5}-of-[0-9]{5}/.exec(f.slice(f.lastIndexOf('/') + 1))![1]!);
    const bad = names.find((s) => !/^\w+(\.\w+)*$/.test(s));
    if (bad !== undefined) throw new InvalidArgument(`${where}: the data file name gives the split '${bad}', which is not a split name`);
    return new Map(splitOrder(names).map((s) => [s, [SHARDED.replace('{split}', s)]]));
  }
  for (const group of DEFAULT_GROUPS) {
    const found = Object.entries(group).filter(([, pats]) => pats.some((p) => resolvePattern(files, p).length > 0));
    if (found.length) return new Map(found);
  }
  return new Map();
}

/** A config's data_files as split → globs (datasets's sanitize_patterns: a string, a list, {split, path} entries or a mapping). */
function dataFilesOf(v: unknown, where: string): Map<string, string[]> {
  const globs = (p: unknown) => (Array.isArray(p) ? p : [p]).map((x) => {
    if (typeof x !== 'string') throw new InvalidArgument(`${where}: data_files holds ${JSON.stringify(x)}, not a path or glob`);
    return x;
  });
  if (typeof v === 'string') return new Map([['train', [v]]]);
  if (Array.isArray(v) && v.some(isRecord)) {
    const out = new Map<string, string[]>();
    for (const e of v) {
      if (!isRecord(e) || e.split === undefined || e.path === undefined)
        throw new InvalidArgument(`${where}: each data_files entry must be {split: NAME, path: GLOB or list}; got ${JSON.stringify(e)}`);
      if (out.has(String(e.split))) throw new InvalidArgument(`${where}: data_files names the split '${String(e.split)}' twice`);
      out.set(String(e.split), globs(e.path));
    }
    return out;
  }
  if (Array.isArray(v)) return new Map([['train', globs(v)]]);
  if (isRecord(v)) return new Map(Object.entries(v).map(([k, p]) => [k, globs(p)]));
  throw new InvalidArgument(`${where}: data_files must be a glob, a list or split entries; got ${JSON.stringify(v)}`);
}

/** The `configs:` of a dataset card's YAML header ([] when it has none). */
export function readmeConfigs(readme: string, repo: string): DatasetConfig[] {
  // huggingface_hub's REGEX_YAML_BLOCK
  const m = /^(\s*---[\r\n]+)([\S\s]*?)([\r\n]+---(\r\n|\n|$))/.exec(readme);
  if (!m) return [];
  const where = `${repo}'s README.md`;
  let meta: unknown;
  try {
    meta = parseYaml(m[2]!);
  } catch (e) {
    throw new InvalidArgument(`${where} has a YAML header that cannot be read (${(e as Error).message}); tell the dataset's authors, ` +
      'or download its data files and pass one as a local file');
  }
  const configs = isRecord(meta) ? meta.configs : undefined;
  if (configs === undefined || configs === null) return [];
  if (!Array.isArray(configs)) throw new InvalidArgument(`${where}: configs must be a list of {config_name, data_files}`);
  return configs.map((c, k) => {
    if (!isRecord(c) || typeof c.config_name !== 'string' || !c.config_name)
      throw new InvalidArgument(`${where}: configs entry ${k} has no config_name`);
    const at = `${where}, config ${c.config_name}`;
    const dir = typeof c.data_dir === 'string' ? c.data_dir.replace(/^(\.\/)+|\/+$/g, '') : '';
    return {
      name: c.config_name, isDefault: c.default === true, ...(dir ? { dataDir: dir } : {}),
      ...(c.data_files !== undefined && c.data_files !== null ? { dataFiles: dataFilesOf(c.data_files, at) } : {}),
    };
  });
}

/** Extensions `datasets` has a reader for (its _EXTENSION_TO_MODULE), by the reader: the majority picks the split's format. */
const MODULE_EXTS: Record<string, string[]> = {
  parquet: ['parquet', 'geoparquet', 'gpq'], json: ['json', 'jsonl', 'ndjson'], csv: ['csv', 'tsv'], arrow: ['arrow'], text: ['txt'],
  xml: ['xml'], hdf5: ['hdf5', 'h5'], webdataset: ['tar'], lance: ['lance'], pdf: ['pdf'],
  imagefolder: ['png', 'jpg', 'jpeg', 'gif', 'bmp', 'tif', 'tiff', 'webp'], audiofolder: ['wav', 'mp3', 'flac', 'ogg', 'opus'],
  videofolder: ['mp4', 'mov', 'avi', 'mkv', 'webm'],
};
const MODULE_OF = new Map(Object.entries(MODULE_EXTS).flatMap(([m, exts]) => exts.map((e) => [e, m] as const)));
const FORMAT_OF: Record<string, DataFileFormat> = { parquet: 'parquet', jsonl: 'jsonl', ndjson: 'jsonl', json: 'json', csv: 'csv' };
const baseName = (p: string) => p.slice(p.lastIndexOf('/') + 1);

/** A list of paths for a message: the first `max`, then how many more. */
export function listPaths(paths: readonly string[], max = 12): string {
  if (!paths.length) return 'none';
  return paths.slice(0, max).join(', ') + (paths.length > max ? `, … ${paths.length - max} more` : '');
}

/** The split's files that hold rows, each with its format: those of the extension most of them have (datasets's inference). */
function withFormats(paths: readonly string[], where: string): { path: string; format: DataFileFormat }[] {
  const tally = new Map<string, number>();
  for (const p of paths) {
    for (const ext of baseName(p).split('.').slice(1).map((x) => x.toLowerCase()))
      if (MODULE_OF.has(ext)) tally.set(ext, (tally.get(ext) ?? 0) + 1);
  }
  const top = [...tally].sort((a, b) => b[1] - a[1])[0]?.[0];
  if (top === undefined) throw new InvalidArgument(`${where} holds no data file of a kind \`datasets\` reads (${listPaths(paths)})`);
  const mod = MODULE_OF.get(top)!;
  const kept = paths.filter((p) => MODULE_EXTS[mod]!.some((e) => new RegExp(`\\.${e}(\\..+)?$`, 'i').test(baseName(p))));
  const local = 'download them and pass a JSONL file of the rows as a local file';
  return kept.map((path) => {
    const format = FORMAT_OF[/\.([a-z]+)$/i.exec(path)?.[1]?.toLowerCase() ?? ''];
    if (!format || !['parquet', 'json', 'csv'].includes(mod)) {
      throw new InvalidArgument(`${where} is stored as ${baseName(path)} and its like, which this runner does not read ` +
        `(it reads parquet, JSON lines, JSON and CSV, uncompressed); ${local}`);
    }
    return { path, format };
  });
}

/**
 * The files of `split` of `config` among a dataset repo's files (repo-relative paths), in `datasets`'s order, with their
 * formats. Config 'default' is also the README's `default: true` config, or its only one. Throws InvalidArgument naming
 * the configs, splits or files there are when the asked one is not among them.
 */
export function splitDataFiles(
  repo: string, files: readonly string[], readme: string | null, config: string, split: string,
): { path: string; format: DataFileFormat }[] {
  const configs = readme === null ? [] : readmeConfigs(readme, repo);
  const name = repo.slice(repo.indexOf('/') + 1);
  const script = files.includes(`${name}.py`)
    ? `; it also has a loading script (${name}.py), which neither this runner nor \`datasets\` 4 runs` : '';
  const cfg = configs.length
    ? configs.find((c) => c.name === config) ??
      (config === 'default' ? configs.find((c) => c.isDefault) ?? (configs.length === 1 ? configs[0] : undefined) : undefined)
    : config === 'default' ? { name: 'default', isDefault: true } : undefined;
  if (!cfg) {
    const names = configs.length ? configs.map((c) => c.name).join(', ') : 'default (its README.md names no configs)';
    throw new InvalidArgument(`${repo} has no config '${config}'; its configs: ${names}${script}` +
      (script ? '; download the rows it builds and pass them as a local JSONL file' : ''));
  }
  const dir = cfg.dataDir;
  const rel = dir ? files.filter((f) => f.startsWith(`${dir}/`)).map((f) => f.slice(dir.length + 1)) : [...files];
  const where = `${repo} (config ${cfg.name})`;
  const splits = cfg.dataFiles ?? defaultSplits(rel, where);
  const resolve = (s: string) => {
    const found: string[] = [];
    for (const p of splits.get(s)!) {
      const hits = resolvePattern(rel, p);
      if (!hits.length && !/[*?[]/.test(p))
        throw new InvalidArgument(`${where}: split '${s}' names ${dir ? `${dir}/` : ''}${p}, which the repository does not hold; ` +
          `its files: ${listPaths(files)}`);
      for (const h of hits) if (!found.includes(h)) found.push(h);
    }
    return found.map((f) => (dir ? `${dir}/${f}` : f));
  };
  const paths = splits.has(split) ? resolve(split) : [];
  if (!paths.length) {
    const have = [...splits.keys()].map((s) => {
      const got = (() => { try { return resolve(s); } catch { return []; } })();
      return `${s} (${got.length ? listPaths(got, 3) : 'no file'})`;
    });
    throw new InvalidArgument(`${where} has no files for split '${split}'; its splits: ${have.join(', ') || 'none'}; ` +
      `its files: ${listPaths(files)}${script}`);
  }
  return withFormats(paths, `${where}, split ${split}`);
}

/** The shard files (name-NNNNN-of-MMMMM) whose set is incomplete among `paths`: a cache holding part of a split. */
function missingShards(paths: readonly string[]): string[] {
  const sets = new Map<string, { total: number; have: Set<number> }>();
  for (const p of paths) {
    const m = /^(.*)-([0-9]{5})-of-([0-9]{5})/.exec(p);
    if (!m) continue;
    const key = `${m[1]}-of-${m[3]}`;
    const s = sets.get(key) ?? { total: Number(m[3]), have: new Set<number>() };
    s.have.add(Number(m[2]));
    sets.set(key, s);
  }
  return [...sets].filter(([, s]) => s.have.size < s.total).map(([k, s]) => `${k.replace(/-of-\d+$/, '')}: ${s.have.size} of ${s.total}`);
}

const escapeGlob = (path: string) => path.replace(/[*?[]/g, (c) => `[${c}]`);

export interface HubDatasetOptions extends Omit<HubFetchOptions, 'onRetry' | 'redirect'> {
  /** The hub cache folder (default: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub). */
  cacheDir?: string;
  revision?: string;
  onEvent?: (e: DownloadEvent) => void;
}

/** loadRows's `datasetFiles` through the hub client: the split's files in the Hugging Face cache, fetched when missing. */
export function hubDatasetFiles(s: HubSettings, opts: HubDatasetOptions = {}): DatasetFiles {
  const readText = async (path: string) => (await nodeImport('node:fs/promises')).readFile(path, 'utf8');
  return async (dataset, config, split) => {
    checkRepoId(dataset);
    const base = { ...opts, type: 'dataset' as const };
    if (s.offline) {
      const snap = await downloadRepo(s, dataset, base); // the cached snapshot, or HubOffline
      const readme = snap.files.includes('README.md') ? await readText(`${snap.dir}/README.md`) : null;
      const offline = (why: string) =>
        new HubOffline(`HF_HUB_OFFLINE is set and the cached ${dataset} (${snap.dir}) lacks split '${split}' of config '${config}': ` +
          `${why}; unset HF_HUB_OFFLINE to fetch it`);
      let chosen: ReturnType<typeof splitDataFiles>;
      try {
        chosen = splitDataFiles(dataset, snap.files, readme, config, split);
      } catch (e) {
        throw e instanceof InvalidArgument ? offline(e.message) : e;
      }
      const partial = missingShards(chosen.map((f) => f.path));
      if (partial.length) throw offline(`some shards are missing (${partial.join('; ')})`);
      return chosen.map((f) => ({ path: `${snap.dir}/${f.path}`, format: f.format }));
    }
    const listing = await listRepo(s, dataset, base);
    const files = listing.files.map((f) => f.path);
    // the card first: its configs say which of the files make the split
    const card = files.includes('README.md') ? await downloadRepo(s, dataset, { ...base, include: ['README.md'] }) : null;
    const readme = card ? await readText(`${card.dir}/README.md`) : null;
    const chosen = splitDataFiles(dataset, files, readme, config, split);
    const got = await downloadRepo(s, dataset, { ...base, include: chosen.map((f) => escapeGlob(f.path)) });
    const gone = chosen.find((f) => !got.files.includes(f.path));
    if (gone) throw new DownloadFailed(`${dataset} changed on the hub while it was fetched (${gone.path} is no longer there); run again`);
    return chosen.map((f) => ({ path: `${got.dir}/${f.path}`, format: f.format }));
  };
}
