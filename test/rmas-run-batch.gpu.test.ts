/**
 * `rmas run --batch_size N` on WebGPU (Dawn on lavapipe) with the committed tiny system: questions asked N at a time
 * (batched latent rollouts and decodes) get the records they get one at a time: greedy, the recorded answers of
 * `npm run tiny:eval`, token for token; sampled with several rollouts, the same draws.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths';
import { taskSplit, toJsonl } from '../src/eval/tiny-task';
import { rmasInProcess } from './util/rmas';

const dir = mkdtempSync(join(tmpdir(), 'rmas-run-batch-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const data = join(dir, 'rows.jsonl');
writeFileSync(data, toJsonl(taskSplit('test').slice(0, 5)));
const recorded = JSON.parse(readFileSync(join(TINY_SYSTEM_DIR, 'eval.json'), 'utf8')) as {
  results: { config: string; answers: string[] }[];
};

type Sample = { type: string; raw_output: string; tokens: number; correct: boolean; rollouts: { raw_output: string }[] };
const samples = (file: string) =>
  readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Sample)
    .filter((x) => x.type === 'sample');

async function run(name: string, ...args: string[]) {
  const file = join(dir, `${name}.jsonl`);
  const r = await rmasInProcess(
    'run',
    '--style',
    'tiny_sequential',
    '--backend',
    'webgpu',
    '--dataset',
    data,
    '--result_jsonl',
    file,
    ...args,
  );
  expect(r.code, r.err).toBe(0);
  return samples(file);
}

describe('rmas run --batch_size on WebGPU', () => {
  it('greedy: 4 at a time gives, record for record, what 1 at a time gives, and the recorded answers', async () => {
    const one = await run('one', '--batch_size', '1');
    const four = await run('four', '--batch_size', '4');
    expect(four.map((s) => [s.raw_output, s.tokens, s.correct])).toEqual(one.map((s) => [s.raw_output, s.tokens, s.correct]));
    const latent3 = recorded.results.find((r) => r.config === 'latent3')!;
    expect(one.map((s) => s.raw_output)).toEqual(latent3.answers.slice(0, 5));
  }, 300_000);

  it('sampled, 2 rollouts a question: 3 at a time draws what 1 at a time draws', async () => {
    const sampled = [
      '--num_samples',
      '3',
      '--temperature',
      '1.2',
      '--top_p',
      '1',
      '--top_k',
      '0',
      '--latent_length',
      '6',
      '--num_recursive_rounds',
      '1',
      '--sample_seed',
      '7',
      '--num_rollouts',
      '2',
    ];
    const one = await run('s1', ...sampled, '--batch_size', '1');
    const three = await run('s3', ...sampled, '--batch_size', '3');
    expect(three.map((s) => s.rollouts.map((o) => o.raw_output))).toEqual(one.map((s) => s.rollouts.map((o) => o.raw_output)));
  }, 300_000);
});
