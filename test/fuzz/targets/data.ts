/**
 * Fuzz targets for training data and prompts: JSON and JSONL files (loadRows), the datasets-server rows API's pages
 * (loadRows through a fake fetch that serves the case's pages, with the JSONL cache written and read back), the
 * page's upload of a data file (parseUpload, as TrainView and EvalPanel call it) and the prompt-set JSON
 * (loadPromptSet).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_PROMPTS, loadPromptSet } from '../../../src/mas/prompts';
import { PAGE, type Row, loadRows } from '../../../src/train/data/rows';
import { parseUpload } from '../../../src/ui/train';
import type { Rng } from '../../../src/util/rng';
import type { FuzzTarget } from '../harness';
import { BAD_UTF8, concat, deepJson, mutateBytes, mutateJsonText, mutateJsonValue, oddValue, pick } from '../mutate';
import { bytesKey, cutsAt, enc, expectThat, fnv, jsonBoundaries, jsonFileTarget, repoFile } from './common';

/** A data file as the user gives it: name, bytes, and the JSON field that holds the rows (upstream's --dataset_json_field). */
export interface DataFile { name: string; bytes: Uint8Array; field?: string }

function rowsOf(n: number, seed = 7): Row[] {
  return Array.from({ length: n }, (_, i) => {
    const a = 1 + ((i * 7 + seed) % 20);
    const b = 1 + ((i * 13 + seed) % 20);
    return { question: `What is ${a} + ${b}?`, plan: `Step 1: add ${a} and ${b}.`, answer: `${a + b}. \\boxed{${a + b}}`, id: i };
  });
}
const jsonl = (rows: unknown[]) => enc(rows.map((r) => JSON.stringify(r)).join('\n') + '\n');

/** Rows read back: plain objects only. */
function checkRows(rows: Row[]): string {
  const objects = Array.isArray(rows) && rows.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r));
  expectThat(objects, 'rows that are not objects');
  return `${rows.length}:${fnv(enc(rows.map((r) => Object.keys(r).join(',')).join('|')))}`;
}

/** JSONL mutations by line: one line mutated as JSON, a line cut, duplicated or emptied, CRLF, invalid UTF-8, a deep line. */
export function mutateJsonl(rng: Rng, b: Uint8Array): Uint8Array {
  const lines = new TextDecoder().decode(b).split('\n');
  const i = rng.int(lines.length);
  switch (rng.int(8)) {
    case 0: case 1: lines[i] = new TextDecoder().decode(mutateJsonText(rng, enc(lines[i]!))); break;
    case 2: lines[i] = lines[i]!.slice(0, rng.int(lines[i]!.length + 1)); break;
    case 3: lines.splice(i, 0, pick(rng, ['', '   ', '\r', lines[i]!, JSON.stringify(oddValue(rng)), 'null', '[]', '"row"'])); break;
    case 4: return enc(lines.join('\r\n'));
    case 5: { // invalid UTF-8 inside a line
      const at = enc(lines.slice(0, i).join('\n')).length + 1 + rng.int(8);
      return concat(b.subarray(0, at), Uint8Array.from(pick(rng, BAD_UTF8)), b.subarray(at));
    }
    case 6: lines[i] = `{"question": ${deepJson(pick(rng, [1000, 100_000]))}}`; break;
    default: return mutateBytes(rng, b);
  }
  return enc(lines.join('\n'));
}

const lineCuts = (b: Uint8Array) => {
  const at: number[] = [0];
  for (let i = 0; i < b.length; i++) if (b[i] === 0x0a) at.push(i, i + 1);
  return at.slice(0, 80);
};

const fileCommon = {
  size: (f: DataFile) => f.bytes.length,
  key: (f: DataFile) => `${f.name}:${f.field}:${bytesKey(f.bytes)}`,
  files: (f: DataFile) => ({ [f.name]: f.bytes }),
};

export const trainingJson: FuzzTarget<DataFile> = {
  ...fileCommon,
  name: 'training-json',
  seeds: () => [{ name: 'rows.json', bytes: enc(JSON.stringify(rowsOf(12), null, 2)) },
    { name: 'rows.json', bytes: enc(JSON.stringify({ meta: { n: 5 }, data: rowsOf(5) })), field: 'data' }] as DataFile[],
  truncations: (f) => cutsAt(f.bytes, jsonBoundaries(f.bytes, 60)).map((bytes) => ({ ...f, bytes })),
  mutate: (rng, f) => ({ ...f, bytes: mutateJsonText(rng, f.bytes), ...(rng.int(10) ? {} : { field: pick(rng, ['data', 'rows', '']) }) }),
  labels: (_f, ctx) => [join(ctx.dir, 'rows.json')],
  run: async (f, ctx) => {
    const path = join(ctx.dir, 'rows.json');
    writeFileSync(path, f.bytes);
    return checkRows(await loadRows({ jsonFile: path, ...(f.field !== undefined ? { jsonField: f.field } : {}) }));
  },
};

export const trainingJsonl: FuzzTarget<DataFile> = {
  ...fileCommon,
  name: 'training-jsonl',
  seeds: () => [{ name: 'rows.jsonl', bytes: jsonl(rowsOf(20)) },
    { name: 'rows.jsonl', bytes: enc('{"question":"x","plan":"p"}\n\n{"q":1}\r\n') }],
  truncations: (f) => cutsAt(f.bytes, lineCuts(f.bytes)).map((bytes) => ({ ...f, bytes })),
  mutate: (rng, f) => ({ ...f, bytes: mutateJsonl(rng, f.bytes) }),
  labels: (_f, ctx) => [join(ctx.dir, 'rows.jsonl')],
  run: async (f, ctx) => {
    const path = join(ctx.dir, 'rows.jsonl');
    writeFileSync(path, f.bytes);
    return checkRows(await loadRows({ jsonlFile: path }));
  },
};

// ---- the rows API

/** The pages a datasets-server answers in turn (then 404), with their HTTP statuses. */
export interface Pages { bodies: Uint8Array[]; status: number[] }
const DATASET = 'fuzz-org/fuzz-set';

function pagesOf(total: number): Pages {
  const rows = rowsOf(total, 3);
  const bodies: Uint8Array[] = [];
  for (let offset = 0; offset < total || offset === 0; offset += PAGE) {
    const page = rows.slice(offset, offset + PAGE).map((row, i) => ({ row_idx: offset + i, row, truncated_cells: [] }));
    bodies.push(enc(JSON.stringify({ features: [], rows: page, num_rows_total: total, num_rows_per_page: PAGE, partial: false })));
    if (total === 0) break;
  }
  return { bodies, status: bodies.map(() => 200) };
}

/** One page mutated: its JSON, its rows (null, arrays, strings, truncated cells), its total, its status; a page dropped or repeated. */
function mutatePages(rng: Rng, p: Pages): Pages {
  const bodies = [...p.bodies];
  const status = [...p.status];
  const i = rng.int(bodies.length);
  switch (rng.int(6)) {
    case 0: case 1: bodies[i] = mutateJsonText(rng, bodies[i]!); break;
    case 2: { // a row item or the total given another value
      let page: { rows?: unknown[]; num_rows_total?: unknown };
      try {
        page = JSON.parse(new TextDecoder().decode(bodies[i])) as typeof page;
      } catch {
        bodies[i] = mutateBytes(rng, bodies[i]!);
        break;
      }
      if (rng.int(2) && Array.isArray(page.rows) && page.rows.length) {
        const k = rng.int(page.rows.length);
        page.rows[k] = pick(rng, [null, [], 'row', 7, { row: null }, { row: [] }, { row: { q: 1 }, truncated_cells: ['q'] },
          { row: { q: 1 }, truncated_cells: [{ toString: 1 }] }, { row_idx: -1 }, mutateJsonValue(rng, page.rows[k])]);
      } else page.num_rows_total = pick(rng, [0, -1, 1e12, 2 ** 53, '250', null, 1.5, 99, 101, 251]);
      bodies[i] = enc(JSON.stringify(page));
      break;
    }
    case 3: status[i] = pick(rng, [404, 401, 403, 500, 503, 302, 206, 204]); break;
    case 4: if (bodies.length > 1) bodies.splice(i, 1), status.splice(i, 1); break;
    default: bodies.splice(i, 0, bodies[i]!), status.splice(i, 0, status[i]!);
  }
  return { bodies, status };
}

function fakeFetch(p: Pages): typeof fetch {
  let k = 0;
  return (async () => {
    const i = k++;
    if (i >= p.bodies.length) return new Response(JSON.stringify({ error: 'no more pages' }), { status: 404 });
    return new Response(p.bodies[i]!.slice(), { status: p.status[i] });
  }) as unknown as typeof fetch;
}

export const rowsApi: FuzzTarget<Pages> = {
  name: 'rows-api',
  seeds: () => [pagesOf(250), pagesOf(3), pagesOf(0)],
  truncations: (p) => p.bodies.flatMap((b, i) =>
    cutsAt(b, jsonBoundaries(b, 12)).map((c) => ({ ...p, bodies: p.bodies.map((x, j) => (j === i ? c : x)) }))),
  mutate: mutatePages,
  labels: () => [DATASET],
  size: (p) => p.bodies.reduce((n, b) => n + b.length, 0),
  key: (p) => p.bodies.map(bytesKey).join(';') + p.status.join(','),
  run: async (p, ctx) => {
    const cacheDir = join(ctx.dir, 'cache');
    const rows = await loadRows({ datasetName: DATASET }, { fetch: fakeFetch(p), cacheDir });
    const digest = checkRows(rows);
    // a second load reads the JSONL cache the first wrote, and must give the same rows
    const again = await loadRows({ datasetName: DATASET }, { fetch: fakeFetch({ bodies: [], status: [] }), cacheDir });
    expectThat(JSON.stringify(again) === JSON.stringify(rows), `the cache gave ${again.length} rows back for ${rows.length}`);
    return digest;
  },
  files: (p) => Object.fromEntries(p.bodies.map((b, i) => [`page-${i}-http-${p.status[i]}.json`, b])),
};

// ---- the page's upload of a data file

export const pageDataUpload: FuzzTarget<DataFile> = {
  ...fileCommon,
  name: 'page-data-upload',
  seeds: () => [{ name: 'rows.jsonl', bytes: jsonl(rowsOf(10)) }, { name: 'train.json', bytes: enc(JSON.stringify(rowsOf(6))) },
    { name: 'eval.json', bytes: enc(JSON.stringify({ data: rowsOf(4) })) }],
  truncations: (f) => cutsAt(f.bytes, jsonBoundaries(f.bytes, 40)).map((bytes) => ({ ...f, bytes })),
  mutate: (rng, f) => ({
    name: rng.int(12) ? f.name : pick(rng, ['rows.JSONL', 'x', 'a/b\\c.json', '', 'r.jsonl.json']),
    bytes: f.name.endsWith('.jsonl') ? mutateJsonl(rng, f.bytes) : mutateJsonText(rng, f.bytes),
  }),
  labels: (f) => [f.name],
  run: (f) => {
    // as the page reads a File: text() decodes with U+FFFD; EvalPanel takes a JSON object's rows from "data"
    const text = new TextDecoder().decode(f.bytes);
    return checkRows(parseUpload(text, f.name, /^\s*\{/.test(text) && !/\.jsonl$/i.test(f.name) ? 'data' : undefined));
  },
};

// ---- prompt sets

const PROMPTS = 'fuzz/prompts.json';

export const promptSet = jsonFileTarget({
  name: 'prompt-set',
  label: PROMPTS,
  cuts: 60,
  seeds: () => [repoFile('models/tiny/system/prompts.json'), repoFile('models/tiny/distillation/prompts.json'),
    enc(JSON.stringify(DEFAULT_PROMPTS, null, 2))],
  run: (b) => {
    const set = loadPromptSet(new TextDecoder().decode(b), PROMPTS);
    expectThat(Object.values(set.templates).every((t) => typeof t === 'string'), 'a template that is not a string');
    return fnv(enc(JSON.stringify(set)));
  },
});
