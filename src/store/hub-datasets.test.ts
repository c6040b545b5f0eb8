import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StandInHub, startHub } from '../../test/util/hub';
import { loadRows } from '../train/data/rows';
import { type HubSettings } from './hub';
import { defaultSplits, globRegExp, hubDatasetFiles, readmeConfigs, resolvePattern, splitDataFiles } from './hub-datasets';

const root = mkdtempSync(join(tmpdir(), 'rmas-hub-datasets-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function repoDir(name: string, files: Record<string, string | Uint8Array>): string {
  const dir = join(root, 'repos', name);
  for (const [f, body] of Object.entries(files)) {
    mkdirSync(join(dir, f, '..'), { recursive: true });
    writeFileSync(join(dir, f), body);
  }
  return dir;
}

const MATH = [
  { problem: 'What is $1+1$?', solution: 'It is $\\boxed{2}$.', answer: '2', subject: 'Prealgebra', level: 1, unique_id: 'test/a.json' },
  { problem: 'Solve $x^2=9$ for $x>0$.', solution: '$\\boxed{3}$', answer: '3', subject: 'Algebra', level: 2, unique_id: 'test/b.json' },
  { problem: 'How many sides?', solution: '$\\boxed{6}$', answer: '6', subject: 'Geometry', level: 1, unique_id: 'test/c.json' },
];
const SEQ = [
  { question: 'Q0: 2+2?', answer: '4', id: 0n },
  { question: 'Q1: "quoted", with comma\nand a line break', answer: '7', id: 9007199254740993n },
  { question: 'Q2: ünïcödé ∑', answer: '-1', id: -5n },
];
const seqParquet = () =>
  new Uint8Array(parquetWriteBuffer({
    columnData: [
      { name: 'question', data: SEQ.map((r) => r.question), type: 'STRING' },
      { name: 'answer', data: SEQ.map((r) => r.answer), type: 'STRING' },
      { name: 'id', data: SEQ.map((r) => r.id), type: 'INT64' },
    ],
  }));
const TWO_CONFIGS = `---
license: mit
configs:
- config_name: easy
  data_files:
  - split: train
    path: easy/train.jsonl
  - split: test
    path: "easy/test-*.jsonl"
- config_name: hard
  default: true
  data_files: hard/*.csv
---
# Two configs
`;

const NO_TRAIN =
  "HuggingFaceH4/MATH-500 (config default) has no files for split 'train'; its splits: test (test.jsonl); its files: README.md, test.jsonl";

let hub: StandInHub;
let settings: HubSettings;
beforeAll(async () => {
  hub = await startHub({
    lfsThreshold: 256,
    repos: [
      { id: 'HuggingFaceH4/MATH-500', type: 'dataset',
        dir: repoDir('math', { 'README.md': '# MATH-500\n', 'test.jsonl': MATH.map((r) => JSON.stringify(r)).join('\n') + '\n' }) },
      { id: 'RecursiveMAS/Sequential-Math', type: 'dataset',
        dir: repoDir('seq', {
          'README.md': '---\nlicense: mit\n---\n', 'data/train-00000-of-00001.parquet': seqParquet(),
          '.gitattributes': '*.parquet filter=lfs\n',
        }) },
      { id: 'Org/Two', type: 'dataset',
        dir: repoDir('two', {
          'README.md': TWO_CONFIGS, 'easy/train.jsonl': '{"q":"e0"}\n{"q":"e1"}\n', 'easy/test-0.jsonl': '{"q":"t0"}\n',
          'easy/test-1.jsonl': '{"q":"t1"}\n', 'hard/b.csv': 'q,a\n"h,1",x\n', 'hard/a.csv': 'q,a\nh0,"y ""z"""\n',
        }) },
      { id: 'Idavidrein/gpqa', type: 'dataset', gated: true,
        dir: repoDir('gpqa', { 'gpqa_diamond.csv': 'Question,Correct Answer\nWhy?,Because\n' }) },
    ],
  });
  settings = { endpoint: hub.url };
});
afterAll(() => hub.close());

let n = 0;
const fresh = () => join(root, `cache${++n}`);
const bodies = (from: number) =>
  hub.log.slice(from).filter((q) => q.server === 'cdn' || (q.path.includes('/resolve/') && q.method === 'GET'));

describe('which files make a split (datasets conventions)', () => {
  it('globs as fsspec: * within a segment, ** across any number, sets with [!…]', () => {
    expect(globRegExp('data/train-*').test('data/train-0.parquet')).toBe(true);
    expect(globRegExp('data/train-*').test('data/train-0/x.parquet')).toBe(false);
    expect(globRegExp('**/train[-._ 0-9]*').test('train.jsonl')).toBe(true);
    expect(globRegExp('**/train[-._ 0-9]*').test('a/b/train_1.csv')).toBe(true);
    expect(globRegExp('**/train[-._ 0-9]*').test('trainer.csv')).toBe(false);
    expect(globRegExp('**/test/**').test('data/test/part.jsonl')).toBe(true);
    expect(globRegExp('x[!a].json').test('xb.json')).toBe(true);
    expect(globRegExp('x[!a].json').test('xa.json')).toBe(false);
    expect(resolvePattern(['.hidden/train.csv', '__pycache__/train.csv', 'README.md', 'b/train.csv', 'a/train.csv'], '**'))
      .toEqual(['a/train.csv', 'b/train.csv']);
    expect(resolvePattern(['README.md'], 'README.md')).toEqual(['README.md']);
  });
  it('infers splits as datasets does: sharded names, then folders, then file names, else train', () => {
    const order = (files: string[]) => [...defaultSplits(files, 'r').keys()];
    expect(order(['data/train-00000-of-00002.parquet', 'data/train-00001-of-00002.parquet', 'data/random-00000-of-00001.parquet',
      'data/test-00000-of-00001.parquet'])).toEqual(['train', 'test', 'random']);
    expect(order(['data/test/a.jsonl', 'data/validation/b.jsonl', 'train.jsonl'])).toEqual(['validation', 'test']);
    expect(order(['my_train_file.csv', 'dev.csv', 'testfile.csv'])).toEqual(['train', 'validation']);
    expect(order(['all.csv', 'README.md'])).toEqual(['train']);
    expect(splitDataFiles('o/r', ['README.md', 'test-00000-of-00001.parquet', 'train.jsonl', 'train2.jsonl'], null, 'default', 'train'))
      .toEqual([{ path: 'train.jsonl', format: 'jsonl' }, { path: 'train2.jsonl', format: 'jsonl' }]);
  });
  it('reads the README configs: {split, path} lists, a plain glob, data_dir, the default config', () => {
    const cfgs = readmeConfigs(TWO_CONFIGS, 'Org/Two');
    expect(cfgs.map((c) => [c.name, c.isDefault, [...(c.dataFiles ?? [])]])).toEqual([
      ['easy', false, [['train', ['easy/train.jsonl']], ['test', ['easy/test-*.jsonl']]]],
      ['hard', true, [['train', ['hard/*.csv']]]],
    ]);
    const files = ['README.md', 'easy/train.jsonl', 'easy/test-1.jsonl', 'easy/test-0.jsonl', 'hard/a.csv', 'hard/notes.md'];
    expect(splitDataFiles('Org/Two', files, TWO_CONFIGS, 'easy', 'test').map((f) => f.path))
      .toEqual(['easy/test-0.jsonl', 'easy/test-1.jsonl']);
    expect(splitDataFiles('Org/Two', files, TWO_CONFIGS, 'default', 'train')).toEqual([{ path: 'hard/a.csv', format: 'csv' }]);
    const dirCard = '---\nconfigs:\n- config_name: main\n  data_dir: sub\n---\n';
    expect(splitDataFiles('o/r', ['sub/test.json', 'test.json'], dirCard, 'default', 'test'))
      .toEqual([{ path: 'sub/test.json', format: 'json' }]);
  });
  it('names the configs, splits and files there are when the asked one is not there', () => {
    expect(() => splitDataFiles('Org/Two', ['easy/train.jsonl'], TWO_CONFIGS, 'medium', 'train')).toThrow(
      "Org/Two has no config 'medium'; its configs: easy, hard",
    );
    expect(() => splitDataFiles('HuggingFaceH4/MATH-500', ['README.md', 'test.jsonl'], '# card', 'default', 'train')).toThrow(NO_TRAIN);
    expect(() => splitDataFiles('o/r', ['data/train.arrow', 'data/train.json'], null, 'default', 'train')).toThrow(
      'o/r (config default), split train is stored as train.arrow and its like, which this runner does not read',
    );
    expect(() => splitDataFiles('o/r', ['train.jsonl.gz'], null, 'default', 'train')).toThrow(/stored as train\.jsonl\.gz/);
    expect(() => splitDataFiles('o/r', ['x.csv'], '---\nconfigs:\n- config_name: default\n  data_files: y.csv\n---\n', 'default', 'train'))
      .toThrow("o/r (config default): split 'train' names y.csv, which the repository does not hold; its files: x.csv");
  });
});

describe('hubDatasetFiles through the stand-in hub', () => {
  it('fetches only the README and the split into the hub cache; again with no file body; offline with no request', async () => {
    const cacheDir = fresh();
    const from = hub.log.length;
    const seq = { datasetName: 'RecursiveMAS/Sequential-Math' };
    const rows = await loadRows(seq, { datasetFiles: hubDatasetFiles(settings, { cacheDir }) });
    // INT64 comes back as a number, as text past 2^53
    expect(rows).toEqual([
      { question: SEQ[0]!.question, answer: '4', id: 0 },
      { question: SEQ[1]!.question, answer: '7', id: '9007199254740993' },
      { question: SEQ[2]!.question, answer: '-1', id: -5 },
    ]);
    const shard = 'data/train-00000-of-00001.parquet';
    expect(bodies(from).map((q) => q.file).sort()).toEqual(['README.md', shard, shard]); // the shard: the hub's 302, then the CDN
    const snap = join(cacheDir, 'datasets--RecursiveMAS--Sequential-Math', 'snapshots', hub.commit('RecursiveMAS/Sequential-Math'));
    expect(readFileSync(join(snap, shard))).toEqual(Buffer.from(seqParquet()));
    const again = hub.log.length;
    expect(await loadRows(seq, { datasetFiles: hubDatasetFiles(settings, { cacheDir }) })).toEqual(rows);
    expect(bodies(again)).toEqual([]);
    const quiet = hub.log.length;
    const offline = hubDatasetFiles({ ...settings, offline: true }, { cacheDir });
    expect(await loadRows(seq, { datasetFiles: offline })).toEqual(rows);
    expect(hub.log.length).toBe(quiet);
    await expect(loadRows({ ...seq, split: 'test' }, { datasetFiles: offline })).rejects.toMatchObject({
      name: 'HubOffline', message: expect.stringContaining("lacks split 'test' of config 'default'"),
    });
  });
  it('reads a README config by name and the default config, in the order datasets lists the files', async () => {
    const files = hubDatasetFiles(settings, { cacheDir: fresh() });
    expect(await loadRows({ datasetName: 'Org/Two', config: 'easy', split: 'test' }, { datasetFiles: files }))
      .toEqual([{ q: 't0' }, { q: 't1' }]);
    expect(await loadRows({ datasetName: 'Org/Two' }, { datasetFiles: files })).toEqual([{ q: 'h0', a: 'y "z"' }, { q: 'h,1', a: 'x' }]);
  });
  it('refuses a gated dataset without a token (GatedRepo) and reads it with one', async () => {
    const cacheDir = fresh();
    const src = { datasetName: 'Idavidrein/gpqa', config: 'default', split: 'train' };
    await expect(loadRows(src, { datasetFiles: hubDatasetFiles(settings, { cacheDir }) })).rejects.toMatchObject({
      name: 'GatedRepo', message: expect.stringContaining(`accept its terms on ${hub.url}/datasets/Idavidrein/gpqa`),
    });
    const rows = await loadRows(src, { datasetFiles: hubDatasetFiles({ ...settings, token: hub.token }, { cacheDir }) });
    expect(rows).toEqual([{ Question: 'Why?', 'Correct Answer': 'Because' }]);
  });
  it('names the splits there are when the split asked has no files, before fetching any data file', async () => {
    const from = hub.log.length;
    const datasetFiles = hubDatasetFiles(settings, { cacheDir: fresh() });
    await expect(loadRows({ datasetName: 'HuggingFaceH4/MATH-500', split: 'train' }, { datasetFiles }))
      .rejects.toMatchObject({ name: 'InvalidArgument', message: NO_TRAIN });
    expect(bodies(from).map((q) => q.file)).toEqual(['README.md']);
  });
});
