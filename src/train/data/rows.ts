/**
 * Training rows (docs/method.md §3.5): a local JSON file (an array, or an object holding the array under a field,
 * as upstream's `--dataset_json_field data`), a JSONL file, or a Hugging Face dataset. A dataset is read from its
 * own data files (parquet, JSONL, JSON, CSV) when the caller passes `datasetFiles` (the runner: the hub client puts
 * them in the Hugging Face cache, src/store/hub-datasets.ts, which sits above this layer); otherwise (the page) page
 * by page through the public datasets-server rows API, cached as JSONL so that a second load needs no network.
 */
import { InvalidArgument } from '../../errors.ts';
import { nodeImport } from '../../util/node-import.ts';
import { parseCsvRows, parseParquetRows } from './data-files.ts';
import { showValue } from '../../util/show.ts';

export type Row = Record<string, unknown>;

export interface RowSource {
  jsonFile?: string;
  /** The field of a JSON object file that holds the row array (upstream --dataset_json_field, e.g. 'data'). */
  jsonField?: string;
  jsonlFile?: string;
  /** A Hugging Face dataset id (upstream --dataset_name), e.g. RecursiveMAS/Sequential-Math. */
  datasetName?: string;
  /** Dataset config; default 'default'. */
  config?: string;
  /** Dataset split; default 'train'. */
  split?: string;
}

/** How a dataset's data file holds its rows. */
export type DataFileFormat = 'parquet' | 'jsonl' | 'json' | 'csv';
/** A data file of a dataset split on disk. */
export interface DataFile {
  path: string;
  format: DataFileFormat;
}
/** The data files that make `split` of `config` of a hub dataset, in order, fetched where needed. */
export type DatasetFiles = (dataset: string, config: string, split: string) => Promise<DataFile[]>;

export interface LoadRowsOptions {
  /**
   * A dataset's rows come from these files instead of the rows API (whose host ignores HF_ENDPOINT and mirrors); then
   * `fetch`, `cacheDir` and `token` do not apply: the hook has its own settings and cache.
   */
  datasetFiles?: DatasetFiles;
  fetch?: typeof fetch;
  /** Folder for the JSONL cache of downloaded datasets (Node only); no cache when absent. */
  cacheDir?: string;
  onProgress?: (loaded: number, total: number) => void;
  /** A Hugging Face access token, sent to the rows API for gated datasets (GPQA). */
  token?: string;
}

const nodeFs = () => nodeImport('node:fs/promises');

export const ROWS_API = 'https://datasets-server.huggingface.co/rows';
/** Rows per request; the datasets-server caps `length` at 100. */
export const PAGE = 100;

const isRecord = (v: unknown): v is Row => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The offset of the first byte that breaks UTF-8 in `b` (a bad lead or continuation byte, an overlong or surrogate
 * form, a sequence cut by the end), or -1.
 */
export function firstInvalidUtf8(b: Uint8Array): number {
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    if (c < 0x80) { i++; continue; }
    const n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
    if (n < 0) return i;
    // the second byte's range excludes overlong forms, surrogates and code points past U+10FFFF
    const lo = c === 0xe0 ? 0xa0 : c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xed ? 0x9f : c === 0xf4 ? 0x8f : 0xbf;
    for (let k = 1; k <= n; k++) {
      const x = b[i + k];
      if (x === undefined || x < (k === 1 ? lo : 0x80) || x > (k === 1 ? hi : 0xbf)) return i;
    }
    i += n + 1;
  }
  return -1;
}

async function readText(path: string, flag: string, allowEmpty = false): Promise<string> {
  const fs = await nodeFs();
  let bytes: Uint8Array;
  try {
    bytes = await fs.readFile(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new InvalidArgument(`${flag} ${path} does not exist; check the path`);
    throw new InvalidArgument(`${flag} ${path} cannot be read (${(e as Error).message}); check the path and its permissions`);
  }
  const bad = firstInvalidUtf8(bytes);
  if (bad >= 0) {
    const line = bytes.subarray(0, bad).reduce((n, x) => n + (x === 0x0a ? 1 : 0), 1);
    throw new InvalidArgument(`${flag} ${path} is not UTF-8: byte ${bad} (line ${line}) is 0x${bytes[bad]!.toString(16).padStart(2, '0')}; ` +
      'convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8) and try again');
  }
  const text = new TextDecoder('utf-8').decode(bytes);
  if (!text.trim() && !allowEmpty)
    throw new InvalidArgument(`${flag} ${path} is empty; give a file with one row per line (JSONL) or a JSON array of rows`);
  return text;
}

function checkRows(rows: unknown[], where: string): Row[] {
  rows.forEach((r, i) => {
    if (!isRecord(r))
      throw new InvalidArgument(
        `${where}: row ${i} is not a JSON object (got ${Array.isArray(r) ? 'an array' : typeof r}); each row must be an object of named fields`,
      );
  });
  return rows as Row[];
}

/** Rows of a JSON document: an array, or an object whose `field` holds the array. */
export function parseJsonRows(text: string, where: string, field?: string): Row[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new InvalidArgument(`${where} is not valid JSON (${(e as Error).message}); fix it, or give a JSONL file with one row per line`);
  }
  if (Array.isArray(doc)) {
    if (field !== undefined)
      throw new InvalidArgument(`${where} holds a top-level array, so the JSON field '${field}' does not apply; drop it`);
    return checkRows(doc, where);
  }
  if (!isRecord(doc)) throw new InvalidArgument(`${where} must hold an array of rows or an object with one (e.g. {"data": [...]})`);
  const arrays = Object.keys(doc).filter((k) => Array.isArray(doc[k]));
  const hint = arrays.length ? `its array fields: ${arrays.join(', ')}` : 'it has no array field';
  if (field === undefined)
    throw new InvalidArgument(`${where} holds an object; name the field that holds the rows (--dataset_json_field; ${hint})`);
  if (!Array.isArray(doc[field])) throw new InvalidArgument(`${where} has no array field '${field}'; ${hint}`);
  return checkRows(doc[field], `${where} field '${field}'`);
}

/** Rows of a JSONL document (blank lines skipped). */
export function parseJsonlRows(text: string, where: string): Row[] {
  const rows: Row[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (e) {
      throw new InvalidArgument(`${where} line ${i + 1} is not valid JSON (${(e as Error).message}); each line must hold one JSON object`);
    }
    if (!isRecord(v)) throw new InvalidArgument(`${where} line ${i + 1} is not a JSON object; each line must hold one row object`);
    rows.push(v);
  });
  return rows;
}

/** The rows of one data file of a dataset split. */
export async function readDataFile(f: DataFile): Promise<Row[]> {
  if (f.format === 'parquet') {
    let bytes: Uint8Array;
    try {
      bytes = await (await nodeFs()).readFile(f.path);
    } catch (e) {
      const why = (e as Error).message;
      throw new InvalidArgument(`the data file ${f.path} cannot be read (${why}); delete it from the cache to fetch it again`);
    }
    return parseParquetRows(bytes, f.path);
  }
  // a dataset's shard may be empty: no rows, not an error
  const text = await readText(f.path, 'the data file', true);
  if (!text.trim()) return [];
  if (f.format === 'csv') return parseCsvRows(text, f.path);
  // `datasets` reads a .json file as JSON lines unless it holds one document; an array is such a document
  if (f.format === 'json' && text.trimStart().startsWith('[')) return parseJsonRows(text, f.path);
  return parseJsonlRows(text, f.path);
}

/** The cache file of a dataset split under `cacheDir`. */
export function cachePath(cacheDir: string, dataset: string, config: string, split: string): string {
  const safe = (s: string) => s.replace(/[^A-Za-z0-9._-]/g, '_');
  return `${cacheDir.replace(/\/+$/, '')}/${safe(dataset.replace('/', '--'))}/${safe(config)}/${safe(split)}.jsonl`;
}

interface RowsPage {
  rows?: { row_idx?: number; row?: unknown; truncated_cells?: unknown[] }[];
  num_rows_total?: number;
}

async function fetchPage(
  f: typeof fetch,
  dataset: string,
  config: string,
  split: string,
  offset: number,
  token?: string,
): Promise<RowsPage> {
  const url =
    `${ROWS_API}?dataset=${encodeURIComponent(dataset)}&config=${encodeURIComponent(config)}` +
    `&split=${encodeURIComponent(split)}&offset=${offset}&length=${PAGE}`;
  const local = 'download the dataset (e.g. its parquet converted to JSONL) and pass it as a local JSONL or JSON file instead';
  let res: Response;
  try {
    res = token ? await f(url, { headers: { Authorization: `Bearer ${token}` } }) : await f(url);
  } catch (e) {
    throw new InvalidArgument(
      `the dataset ${dataset} could not be fetched from ${ROWS_API} (${(e as Error).message}); check the network, or ${local}`,
    );
  }
  if (!res.ok) {
    let detail = '';
    try {
      const body = (await res.json()) as { error?: unknown };
      if (typeof body.error === 'string') detail = `: ${body.error}`;
    } catch {
      /* no JSON body */
    }
    const what =
      res.status === 404
        ? `; check the dataset name '${dataset}', config '${config}' and split '${split}'`
        : res.status === 401 || res.status === 403
          ? `; ${dataset} may be gated: accept its terms on huggingface.co and set HF_TOKEN to an access token`
          : '';
    throw new InvalidArgument(
      `the dataset ${dataset} could not be fetched (HTTP ${res.status} at offset ${offset}${detail})${what}; or ${local}`,
    );
  }
  try {
    return (await res.json()) as RowsPage;
  } catch (e) {
    throw new InvalidArgument(
      `the dataset ${dataset} could not be fetched: the rows API sent a body that is not JSON (${(e as Error).message}); try again, or ${local}`,
    );
  }
}

async function downloadRows(dataset: string, config: string, split: string, opts: LoadRowsOptions): Promise<Row[]> {
  const f = opts.fetch ?? globalThis.fetch;
  if (typeof f !== 'function')
    throw new InvalidArgument(`no fetch is available to download ${dataset}; pass a local JSONL or JSON file instead`);
  const rows: Row[] = [];
  let total = Infinity;
  while (rows.length < total) {
    const page = await fetchPage(f, dataset, config, split, rows.length, opts.token);
    if (typeof page.num_rows_total !== 'number' || !Array.isArray(page.rows)) {
      throw new InvalidArgument(
        `the rows API answered for ${dataset} without rows or num_rows_total; try again later, or pass a local file`,
      );
    }
    total = page.num_rows_total;
    if (page.rows.length === 0 && rows.length < total) {
      throw new InvalidArgument(
        `the rows API returned no rows at offset ${rows.length} of ${total} for ${dataset}; try again later, or pass a local file`,
      );
    }
    for (const item of page.rows) {
      if (!isRecord(item) || !isRecord(item.row))
        throw new InvalidArgument(`the rows API sent a malformed row at offset ${rows.length} of ${dataset}; pass a local file instead`);
      if (Array.isArray(item.truncated_cells) && item.truncated_cells.length > 0) {
        // the cells and the row are the server's words: shown, never converted (an object there has no usable toString)
        const cells = item.truncated_cells.map((c) => (typeof c === 'string' ? c : showValue(c, 60))).join(', ');
        throw new InvalidArgument(
          `the rows API truncated the cells ${cells} of row ${rows.length} of ${dataset}, ` +
            'so its text is incomplete; download the parquet files and pass them as a local JSONL file instead',
        );
      }
      rows.push(item.row);
    }
    opts.onProgress?.(rows.length, total);
  }
  return rows.slice(0, total);
}

/**
 * Loads the rows of one source. Throws InvalidArgument (saying what to fix) for a missing or unreadable
 * file, bad JSON, a wrong JSON field, several sources or none, and a dataset the rows API cannot serve.
 */
export async function loadRows(src: RowSource, opts: LoadRowsOptions = {}): Promise<Row[]> {
  const given = (['jsonFile', 'jsonlFile', 'datasetName'] as const).filter((k) => src[k] !== undefined && src[k] !== '');
  if (given.length !== 1) {
    throw new InvalidArgument(
      given.length === 0
        ? 'no training data given; pass a JSON file, a JSONL file or a Hugging Face dataset name (e.g. RecursiveMAS/Sequential-Math)'
        : `give one data source, not ${given.join(' and ')}`,
    );
  }
  if (src.jsonField !== undefined && src.jsonFile === undefined)
    throw new InvalidArgument('the JSON field applies to a JSON file only; drop it or give a JSON file');
  if (src.jsonFile) return parseJsonRows(await readText(src.jsonFile, 'the JSON file'), src.jsonFile, src.jsonField);
  if (src.jsonlFile) return parseJsonlRows(await readText(src.jsonlFile, 'the JSONL file'), src.jsonlFile);
  const dataset = src.datasetName!;
  if (!/^[\w.-]+\/[\w.-]+$/.test(dataset))
    throw new InvalidArgument(`'${dataset}' is not a Hugging Face dataset id; write it as owner/name, e.g. RecursiveMAS/Sequential-Math`);
  const config = src.config || 'default';
  const split = src.split || 'train';
  if (opts.datasetFiles) {
    const rows: Row[] = [];
    for (const f of await opts.datasetFiles(dataset, config, split)) for (const r of await readDataFile(f)) rows.push(r);
    opts.onProgress?.(rows.length, rows.length);
    return rows;
  }
  const cache = opts.cacheDir ? cachePath(opts.cacheDir, dataset, config, split) : undefined;
  if (cache) {
    const fs = await nodeFs();
    let text: string | undefined;
    try {
      text = await fs.readFile(cache, 'utf8');
    } catch { /* not cached yet */ }
    if (text !== undefined) {
      let rows: Row[];
      try {
        rows = parseJsonlRows(text, `the cached dataset ${cache}`);
      } catch (e) {
        throw new InvalidArgument(`${(e as Error).message}; the cache is damaged, delete ${cache} to download the dataset again`);
      }
      opts.onProgress?.(rows.length, rows.length);
      return rows;
    }
  }
  const rows = await downloadRows(dataset, config, split, opts);
  if (cache) {
    const lines = rows.map((r, i) => {
      try {
        return JSON.stringify(r);
      } catch (e) { // a row nested too deep for JSON.stringify: no training example is, so the server sent garbage
        throw new InvalidArgument(`the rows API sent row ${i} of ${dataset} in a shape that cannot be stored (${(e as Error).message}); ` +
          'try again later, or pass a local file');
      }
    });
    const fs = await nodeFs();
    await fs.mkdir(cache.slice(0, cache.lastIndexOf('/')), { recursive: true });
    // Write to a temporary name first so that an interrupted write never looks like a complete cache.
    const tmp = `${cache}.partial`;
    await fs.writeFile(tmp, lines.join('\n') + '\n', 'utf8');
    await fs.rename(tmp, cache);
  }
  return rows;
}
