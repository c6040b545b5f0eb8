/**
 * Datasets by name come from the hub HF_ENDPOINT names (issue 35). `rmas run --dataset math500` with an empty HF_HOME:
 * the stand-in hub's test.jsonl lands in HF_HOME/hub/datasets--HuggingFaceH4--MATH-500 and its rows are the questions
 * asked; a second run fetches no file body; HF_HUB_OFFLINE=1 asks the hub nothing. `rmas train-inner --dataset_name
 * RecursiveMAS/Sequential-Math` trains on the rows of the repo's parquet shard.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTinySystem } from '../scripts/tiny-system/tiny-mas';
import { type StandInHub, startHub } from './util/hub';
import { rmasInProcess, trainInProcess } from './util/rmas';

const root = mkdtempSync(join(tmpdir(), 'rmas-run-hub-dataset-'));
const ROWS = [
  { problem: 'What is $2+3$?', solution: '$\\boxed{5}$', answer: '5', subject: 'Prealgebra', level: 1, unique_id: 'test/p/1.json' },
  { problem: 'Compute $4 \\cdot 6$.', solution: '$\\boxed{24}$', answer: '24', subject: 'Algebra', level: 2, unique_id: 'test/a/2.json' },
  { problem: 'What is $9-7$?', solution: '$\\boxed{2}$', answer: '2', subject: 'Prealgebra', level: 1, unique_id: 'test/p/3.json' },
];
let hub: StandInHub;
beforeAll(async () => {
  const dir = join(root, 'repo');
  mkdirSync(dir, { recursive: true });
  const card = '---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: test.jsonl\n---\n';
  writeFileSync(join(dir, 'README.md'), card);
  writeFileSync(join(dir, 'test.jsonl'), ROWS.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const seq = join(root, 'seq/data');
  mkdirSync(seq, { recursive: true });
  const col = (name: string, data: string[]) => ({ name, data, type: 'STRING' as const });
  writeFileSync(join(seq, 'train-00000-of-00001.parquet'), new Uint8Array(parquetWriteBuffer({ columnData: [
    col('question', ['What is 3 + 4?', 'What is 5 - 1?', 'What is 2 * 3?']),
    col('plan', ['Step 1: add.', 'Step 1: subtract.', 'Step 1: multiply.']),
    col('answer', ['\\boxed{7}', '\\boxed{4}', '\\boxed{6}']),
  ] })));
  hub = await startHub({ repos: [
    { id: 'HuggingFaceH4/MATH-500', dir, type: 'dataset' }, { id: 'RecursiveMAS/Sequential-Math', dir: join(root, 'seq'), type: 'dataset' },
  ] });
});
afterAll(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

let nRun = 0;
async function run(env: Record<string, string>) {
  const saved = { ...process.env };
  for (const k of ['HF_HUB_CACHE', 'HF_TOKEN', 'HF_HUB_OFFLINE', 'HUGGING_FACE_HUB_TOKEN', 'RMAS_TINY_SYSTEM']) delete process.env[k];
  Object.assign(process.env, { HF_HOME: join(root, 'home'), HF_ENDPOINT: hub.url }, env);
  const results = join(root, `results${++nRun}.jsonl`);
  try {
    const r = await rmasInProcess('run', '--style', 'tiny_sequential', '--dataset', 'math500', '--num_samples', '2', '--greedy',
      '--backend', 'cpu', '--max_new_tokens', '4', '--no_judge', '--result_jsonl', results);
    expect(r.code, r.err).toBe(0);
    return readFileSync(results, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; question?: string; gold?: string });
  } finally {
    process.env = saved;
  }
}
const bodies = (from: number) =>
  hub.log.slice(from).filter((q) => q.server === 'cdn' || (q.method === 'GET' && q.path.includes('/resolve/')));

describe('rmas run --dataset math500 through the hub', () => {
  it('reads the hub\'s rows into an empty HF_HOME; again without a file body; offline with no request', async () => {
    const first = await run({});
    const samples = first.filter((x) => x.type === 'sample');
    expect(samples.map((s) => [s.question, s.gold])).toEqual([[ROWS[0]!.problem, '5'], [ROWS[1]!.problem, '24']]);
    const snap = join(root, 'home/hub/datasets--HuggingFaceH4--MATH-500/snapshots', hub.commit('HuggingFaceH4/MATH-500'));
    expect(readFileSync(join(snap, 'test.jsonl'), 'utf8')).toBe(ROWS.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const from = hub.log.length;
    const questions = (recs: { type: string; question?: string }[]) => recs.filter((x) => x.type === 'sample').map((s) => s.question);
    expect(questions(await run({}))).toEqual([ROWS[0]!.problem, ROWS[1]!.problem]);
    expect(bodies(from)).toEqual([]);
    const quiet = hub.log.length;
    expect(questions(await run({ HF_HUB_OFFLINE: '1' }))).toEqual([ROWS[0]!.problem, ROWS[1]!.problem]);
    expect(hub.log.length).toBe(quiet);
  }, 60_000);
});

describe('rmas train-inner --dataset_name through the hub', () => {
  it('trains on the rows of the repo\'s parquet shard, fetched into HF_HOME', async () => {
    const sys = await buildTinySystem('sequential_light', join(root, 'sys'));
    const saved = { ...process.env };
    for (const k of ['HF_HUB_CACHE', 'HF_TOKEN', 'HF_HUB_OFFLINE', 'HUGGING_FACE_HUB_TOKEN']) delete process.env[k];
    Object.assign(process.env, { HF_HOME: join(root, 'train-home'), HF_ENDPOINT: hub.url });
    try {
      const r = await trainInProcess('inner', {
        model_name_or_path: sys.roles.planner, mas_design: 'sequential', mas_role: 'planner', dataset_name: 'RecursiveMAS/Sequential-Math',
        save_dir: join(root, 'planner'), max_steps: '1', batch_size: '3', seed: '3',
      });
      expect(r.error).toBeNull();
      expect(r.err).toContain('loading rows from RecursiveMAS/Sequential-Math\n');
      expect(r.err).toContain('3 rows, 3 usable');
    } finally {
      process.env = saved;
    }
    const snap = join(root, 'train-home/hub/datasets--RecursiveMAS--Sequential-Math/snapshots', hub.commit('RecursiveMAS/Sequential-Math'));
    const shard = 'data/train-00000-of-00001.parquet';
    expect(readFileSync(join(snap, shard))).toEqual(readFileSync(join(root, 'seq', shard)));
  }, 60_000);
});
