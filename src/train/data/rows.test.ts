import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { beforeAll, describe, expect, it } from 'vitest';
import { InvalidArgument } from '../../errors.ts';
import { cachePath, type DataFile, loadRows, ROWS_API } from './rows.ts';

let dir = '';
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rmas-rows-'));
});

const rowsOf = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ({ question: `q${from + i}`, answer: String(from + i) }));

/** A fake datasets-server: serves `total` rows in pages, records the URLs it was asked for. */
function fakeServer(total: number, opts: { status?: number; truncated?: number } = {}) {
  const urls: string[] = [];
  const f = (async (input: string | URL | Request) => {
    const url = String(input);
    urls.push(url);
    if (opts.status) return new Response(JSON.stringify({ error: 'The dataset does not exist.' }), { status: opts.status });
    const q = new URL(url).searchParams;
    const offset = Number(q.get('offset'));
    const length = Number(q.get('length'));
    const rows = rowsOf(Math.max(0, Math.min(length, total - offset)), offset).map((row, i) => ({
      row_idx: offset + i,
      row,
      truncated_cells: offset + i === opts.truncated ? ['answer'] : [],
    }));
    return new Response(JSON.stringify({ features: [], rows, num_rows_total: total, num_rows_per_page: 100, partial: false }), {
      status: 200,
    });
  }) as typeof fetch;
  return { f, urls };
}

describe('loadRows from files', () => {
  it('reads a JSON array, a JSON object field and JSONL (blank lines skipped)', async () => {
    const a = join(dir, 'a.json');
    await writeFile(a, JSON.stringify(rowsOf(3)));
    expect(await loadRows({ jsonFile: a })).toEqual([
      { question: 'q0', answer: '0' },
      { question: 'q1', answer: '1' },
      { question: 'q2', answer: '2' },
    ]);
    const b = join(dir, 'b.json');
    await writeFile(b, JSON.stringify({ meta: 1, data: rowsOf(2, 5) }));
    expect(await loadRows({ jsonFile: b, jsonField: 'data' })).toEqual([{ question: 'q5', answer: '5' }, { question: 'q6', answer: '6' }]);
    const c = join(dir, 'c.jsonl');
    await writeFile(c, '{"question":"x","plan":"p"}\n\n{"question":"y"}\r\n');
    expect(await loadRows({ jsonlFile: c })).toEqual([{ question: 'x', plan: 'p' }, { question: 'y' }]);
  });

  it('names what to fix for bad input', async () => {
    const bad = join(dir, 'bad.json');
    await writeFile(bad, '{"data": [');
    await expect(loadRows({ jsonFile: bad })).rejects.toThrow(InvalidArgument);
    await expect(loadRows({ jsonFile: bad })).rejects.toThrow(/bad\.json is not valid JSON/);
    await expect(loadRows({ jsonFile: join(dir, 'nope.json') })).rejects.toThrow(/nope\.json does not exist; check the path/);
    const obj = join(dir, 'obj.json');
    await writeFile(obj, JSON.stringify({ data: rowsOf(1), rows: [] }));
    await expect(loadRows({ jsonFile: obj })).rejects.toThrow(
      'name the field that holds the rows (--dataset_json_field; its array fields: data, rows)',
    );
    await expect(loadRows({ jsonFile: obj, jsonField: 'items' })).rejects.toThrow(
      "has no array field 'items'; its array fields: data, rows",
    );
    const nonObj = join(dir, 'nonobj.json');
    await writeFile(nonObj, '[{"a":1}, 3]');
    await expect(loadRows({ jsonFile: nonObj })).rejects.toThrow('row 1 is not a JSON object (got number)');
    const badl = join(dir, 'bad.jsonl');
    await writeFile(badl, '{"a":1}\n{"a":\n');
    await expect(loadRows({ jsonlFile: badl })).rejects.toThrow(/bad\.jsonl line 2 is not valid JSON/);
    await writeFile(badl, '{"a":1}\n[1]\n');
    await expect(loadRows({ jsonlFile: badl })).rejects.toThrow('line 2 is not a JSON object');
    await expect(loadRows({})).rejects.toThrow(/no training data given/);
    await expect(loadRows({ jsonFile: obj, datasetName: 'a/b' })).rejects.toThrow('give one data source, not jsonFile and datasetName');
    await expect(loadRows({ jsonlFile: badl, jsonField: 'data' })).rejects.toThrow(/applies to a JSON file only/);
    await expect(loadRows({ datasetName: 'no-owner' }, { fetch: fakeServer(1).f })).rejects.toThrow(/write it as owner\/name/);
  });
});

describe('loadRows from the Hugging Face rows API', () => {
  it('pages until num_rows_total, reports progress, caches and reloads offline', async () => {
    const { f, urls } = fakeServer(250);
    const progress: [number, number][] = [];
    const cacheDir = join(dir, 'cache');
    const rows = await loadRows(
      { datasetName: 'RecursiveMAS/Sequential-Math' },
      { fetch: f, cacheDir, onProgress: (a, b) => progress.push([a, b]) },
    );
    expect(rows).toEqual(rowsOf(250));
    expect(urls).toEqual(
      [0, 100, 200].map((o) => `${ROWS_API}?dataset=RecursiveMAS%2FSequential-Math&config=default&split=train&offset=${o}&length=100`),
    );
    expect(progress).toEqual([[100, 250], [200, 250], [250, 250]]);
    const file = cachePath(cacheDir, 'RecursiveMAS/Sequential-Math', 'default', 'train');
    expect(file).toBe(`${cacheDir}/RecursiveMAS--Sequential-Math/default/train.jsonl`);
    expect((await readFile(file, 'utf8')).split('\n')[249]).toBe('{"question":"q249","answer":"249"}');
    const offline = (async () => {
      throw new Error('offline');
    }) as typeof fetch;
    expect(await loadRows({ datasetName: 'RecursiveMAS/Sequential-Math' }, { fetch: offline, cacheDir })).toEqual(rows);
    await writeFile(file, '{"question":"q0"}\n{broken\n');
    await expect(loadRows({ datasetName: 'RecursiveMAS/Sequential-Math' }, { fetch: offline, cacheDir })).rejects.toThrow(
      `line 2 is not valid JSON`,
    );
    await expect(loadRows({ datasetName: 'RecursiveMAS/Sequential-Math' }, { fetch: offline, cacheDir })).rejects.toThrow(
      `the cache is damaged, delete ${file} to download the dataset again`,
    );
    // another split is another cache entry, so it goes to the network
    await expect(loadRows({ datasetName: 'RecursiveMAS/Sequential-Math', split: 'test' }, { fetch: offline, cacheDir })).rejects.toThrow(
      /could not be fetched .*\(offline\); check the network, or download the dataset/,
    );
  });

  it('passes config and split through and handles an exact multiple of the page size', async () => {
    const { f, urls } = fakeServer(200);
    expect(await loadRows({ datasetName: 'o/d', config: 'c1', split: 'validation' }, { fetch: f })).toHaveLength(200);
    expect(urls.map((u) => new URL(u).searchParams.get('offset'))).toEqual(['0', '100']);
    expect(new URL(urls[0]!).searchParams.get('config')).toBe('c1');
    expect(new URL(urls[0]!).searchParams.get('split')).toBe('validation');
  });

  it('says the dataset could not be fetched and how to use a local file', async () => {
    const err = await loadRows({ datasetName: 'RecursiveMAS/Nope' }, { fetch: fakeServer(10, { status: 404 }).f }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidArgument);
    expect((err as Error).message).toBe(
      'the dataset RecursiveMAS/Nope could not be fetched (HTTP 404 at offset 0: The dataset does not exist.); ' +
        "check the dataset name 'RecursiveMAS/Nope', config 'default' and split 'train'; or download the dataset " +
        '(e.g. its parquet converted to JSONL) and pass it as a local JSONL or JSON file instead',
    );
    await expect(loadRows({ datasetName: 'o/d' }, { fetch: fakeServer(10, { status: 500 }).f })).rejects.toThrow(/HTTP 500 at offset 0/);
  });

  it('refuses rows whose cells the API truncated', async () => {
    await expect(loadRows({ datasetName: 'o/d' }, { fetch: fakeServer(150, { truncated: 120 }).f })).rejects.toThrow(
      'the rows API truncated the cells answer of row 120 of o/d',
    );
  });
});

describe('data files that are not rows', () => {
  it('a file that is not UTF-8 is refused, naming the file, the byte offset and its line; nothing is read as U+FFFD', async () => {
    const file = join(dir, 'latin1.jsonl');
    // "café" in Latin-1 on line 2: é is the single byte 0xe9
    const head = Buffer.from('{"question":"q","answer":"1"}\n{"question":"caf');
    const bytes = Buffer.concat([head, Buffer.from([0xe9]), Buffer.from('","answer":"2"}\n')]);
    await writeFile(file, bytes);
    const at = bytes.indexOf(0xe9);
    await expect(loadRows({ jsonlFile: file })).rejects.toThrow(
      new InvalidArgument(`the JSONL file ${file} is not UTF-8: byte ${at} (line 2) is 0xe9; convert it to UTF-8 ` +
        '(e.g. iconv -f latin1 -t utf-8) and try again'),
    );
  });

  it('an empty (or blank) file says it is empty, naming it', async () => {
    for (const [name, text] of [['empty.jsonl', ''], ['blank.json', ' \n\n']] as const) {
      const file = join(dir, name);
      await writeFile(file, text);
      const src = name.endsWith('.jsonl') ? { jsonlFile: file } : { jsonFile: file };
      await expect(loadRows(src)).rejects.toThrow(new RegExp(`${file.replace(/[.]/g, '\\.')} is empty; give a file with one row per line`));
    }
  });
});

describe('loadRows through a datasetFiles hook', () => {
  it('reads the files the hook names, in order, whatever their format, and asks it for the config and split', async () => {
    const files: DataFile[] = [
      { path: join(dir, 'h0.parquet'), format: 'parquet' },
      { path: join(dir, 'h1.jsonl'), format: 'jsonl' },
      { path: join(dir, 'h2.json'), format: 'json' },
      { path: join(dir, 'h3.json'), format: 'json' },
      { path: join(dir, 'h4.csv'), format: 'csv' },
      { path: join(dir, 'h5.jsonl'), format: 'jsonl' },
    ];
    const parquet = parquetWriteBuffer({ columnData: [{ name: 'q', data: ['p0', 'p1'], type: 'STRING' }] });
    await writeFile(files[0]!.path, new Uint8Array(parquet));
    await writeFile(files[1]!.path, '{"q":"l0"}\n');
    await writeFile(files[2]!.path, '[{"q":"a0"},\n {"q":"a1"}]');
    await writeFile(files[3]!.path, '{"q":"j0"}\n{"q":"j1"}\n'); // .json holding JSON lines, as many hub datasets do
    await writeFile(files[4]!.path, 'q\nc0\n');
    await writeFile(files[5]!.path, ''); // an empty shard
    const asked: string[][] = [];
    const progress: number[][] = [];
    const rows = await loadRows({ datasetName: 'o/d', config: 'c', split: 'validation' }, {
      datasetFiles: async (...a) => (asked.push(a), files), fetch: fakeServer(0).f, cacheDir: join(dir, 'unused'),
      onProgress: (x, t) => progress.push([x, t]),
    });
    expect(rows.map((r) => r.q)).toEqual(['p0', 'p1', 'l0', 'a0', 'a1', 'j0', 'j1', 'c0']);
    expect(asked).toEqual([['o/d', 'c', 'validation']]);
    expect(progress).toEqual([[8, 8]]);
    await expect(readFile(cachePath(join(dir, 'unused'), 'o/d', 'c', 'validation'))).rejects.toMatchObject({ code: 'ENOENT' });
    const defaults: string[][] = [];
    await loadRows({ datasetName: 'o/d' }, { datasetFiles: async (...a) => (defaults.push(a), []) });
    expect(defaults).toEqual([['o/d', 'default', 'train']]);
  });
});
