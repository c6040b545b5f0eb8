/**
 * The two data file formats of hub datasets that are not JSON: CSV (GPQA ships it) and parquet (what `datasets` pushes
 * to the hub), read into rows as `datasets` reads them. loadRows (rows.ts) reads them for its `datasetFiles` hook.
 */
import { InvalidArgument } from '../../errors.ts';
import { nodeImport } from '../../util/node-import.ts';
import type { Row } from './rows.ts';

const isRecord = (v: unknown): v is Row => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Rows of an RFC 4180 CSV document under a header line: quoted fields may hold commas, line breaks and doubled quotes;
 * records end in CRLF or LF; blank lines are skipped. Cells stay the text written (no type guessing), except that an
 * empty cell, or one missing at the end of a short record, is null, as `datasets` (through pandas) reads it.
 */
export function parseCsvRows(text: string, where: string): Row[] {
  const n = text.length;
  const records: { cells: (string | null)[]; line: number }[] = [];
  let cells: (string | null)[] = [];
  let line = 1;
  let first = 1; // the line the record starts on
  let quoted = false; // the last cell was quoted (so a lone "" is not a blank line)
  const eol = (k: number) => text[k] === '\n' || (text[k] === '\r' && text[k + 1] === '\n');
  for (let i = text.charCodeAt(0) === 0xfeff ? 1 : 0; ;) {
    let cell = '';
    quoted = text[i] === '"';
    if (quoted) {
      const open = line;
      for (i++; ;) {
        const q = text.indexOf('"', i);
        if (q < 0) throw new InvalidArgument(`${where}: the quoted field opened on line ${open} is never closed; end it with "`);
        const part = text.slice(i, q);
        cell += part;
        for (let k = part.indexOf('\n'); k >= 0; k = part.indexOf('\n', k + 1)) line++;
        if (text[q + 1] === '"') { cell += '"'; i = q + 2; continue; }
        i = q + 1;
        break;
      }
      if (i < n && text[i] !== ',' && !eol(i)) {
        throw new InvalidArgument(`${where} line ${line}: a quoted field is followed by ${JSON.stringify(text[i])}, not a comma or ` +
          'the end of the line; write a quote inside a quoted field as ""');
      }
    } else {
      let j = i;
      while (j < n && text[j] !== ',' && !eol(j)) j++;
      cell = text.slice(i, j);
      i = j;
    }
    cells.push(cell === '' ? null : cell);
    if (text[i] === ',') { i++; continue; }
    if (!(cells.length === 1 && cells[0] === null && !quoted)) records.push({ cells, line: first });
    if (i >= n) break;
    i += text[i] === '\r' ? 2 : 1;
    first = ++line;
    cells = [];
    if (i >= n) break;
  }
  const header = records.shift();
  if (!header) throw new InvalidArgument(`${where} has no header line; a CSV data file starts with its column names`);
  // pandas's names for blank and repeated columns, so that rows keep the keys `datasets` gives them
  const seen = new Map<string, number>();
  const names = header.cells.map((c, k) => {
    const base = c ?? `Unnamed: ${k}`;
    const times = seen.get(base) ?? 0;
    seen.set(base, times + 1);
    return times ? `${base}.${times}` : base;
  });
  return records.map(({ cells: r, line: at }) => {
    if (r.length > names.length) {
      throw new InvalidArgument(`${where} line ${at} has ${r.length} fields but the header names ${names.length}; ` +
        'quote fields that hold commas');
    }
    return Object.fromEntries(names.map((k, c) => [k, r[c] ?? null]));
  });
}

/** A parquet cell as JSON would hold it: 64-bit integers as numbers (as text past 2^53), dates as ISO text, bytes as lists. */
function plainCell(v: unknown): unknown {
  if (v === undefined) return null;
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (v instanceof Date) return v.toISOString();
  if (v instanceof Uint8Array) return Array.from(v);
  if (Array.isArray(v)) return v.map(plainCell);
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plainCell(x)]));
  return v;
}

/** Rows of a parquet file (hyparquet: snappy built in; gzip and brotli through node:zlib, zstd where this Node has it). */
export async function parseParquetRows(bytes: Uint8Array, where: string): Promise<Row[]> {
  const { parquetMetadata, parquetReadObjects } = await import('hyparquet');
  const zlib = await nodeImport('node:zlib');
  type Codec = (b: Uint8Array) => Uint8Array;
  const zstd = (zlib as unknown as { zstdDecompressSync?: Codec }).zstdDecompressSync;
  const compressors: Record<string, Codec> = { GZIP: (b) => zlib.gunzipSync(b), BROTLI: (b) => zlib.brotliDecompressSync(b) };
  if (zstd) compressors.ZSTD = (b) => zstd(b);
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const local = 'convert it to JSONL (e.g. pandas.read_parquet(...).to_json(lines=True, orient="records")) and pass the local file';
  let metadata: ReturnType<typeof parquetMetadata>;
  try {
    metadata = parquetMetadata(file);
  } catch (e) {
    const why = (e as Error).message;
    throw new InvalidArgument(`${where} is not a readable parquet file (${why}); delete it to fetch it again, or ${local}`);
  }
  const codecs = new Set(metadata.row_groups.flatMap((g) => g.columns.map((c) => c.meta_data?.codec ?? 'UNCOMPRESSED')));
  const unread = [...codecs].filter((c) => c !== 'UNCOMPRESSED' && c !== 'SNAPPY' && !compressors[c]);
  if (unread.length) {
    throw new InvalidArgument(`${where} is compressed with ${unread.join(', ')}, which this runner cannot decompress` +
      `${unread.includes('ZSTD') ? ` (ZSTD needs Node 22.15 or later; this is ${process.version})` : ''}; ${local}`);
  }
  let rows: Record<string, unknown>[];
  try {
    rows = await parquetReadObjects({ file, metadata, compressors });
  } catch (e) {
    throw new InvalidArgument(`${where} could not be read as parquet (${(e as Error).message}); ${local}`);
  }
  return rows.map((r) => plainCell(r) as Row);
}
