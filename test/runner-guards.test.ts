/**
 * Issue 39, items 8 to 10, on the committed tiny system and models (CPU, in this process). A dataset row holding a
 * latent slot marker is scored as an error row with the reason while the other questions are answered as the tiny eval
 * answered them, and --resume goes past it. Number flags out of range are one usage error (exit 2) before anything
 * loads, in every command alike. --num_train_epochs sets the run's length as the Hugging Face Trainer does.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths';
import type { SampleRecord } from '../src/eval/evaluate';
import { taskSplit, toJsonl } from '../src/eval/tiny-task';
import { SLOTS } from '../src/mas/slots';
import { runCmd } from '../src/runner/run-cmd';
import type { TrainArgs } from '../src/runner/train-args';
import { CpuBackend } from '../src/tensor/cpu';
import { arithmeticRows } from './train/fixtures';
import { rmasInProcess, trainInProcess as train } from './util/rmas';

const tmp = mkdtempSync(join(tmpdir(), 'rmas-guards-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const cpu = new CpuBackend('f32');

describe('a dataset row holding the latent slot marker', () => {
  const recorded = JSON.parse(readFileSync(join(TINY_SYSTEM_DIR, 'eval.json'), 'utf8')) as {
    latentSteps: number; results: { config: string; answers: string[] }[];
  };
  const answers = recorded.results.find((r) => r.config === 'latent3')!.answers;
  const rows = taskSplit('test').slice(0, 3);
  const marked = { ...rows[1]!, question: `${rows[1]!.question} ${SLOTS.planner}` };
  const data = join(tmp, 'marked.jsonl');
  writeFileSync(data, toJsonl([rows[0]!, marked, rows[2]!]));
  const file = join(tmp, 'marked-results.jsonl');
  let err = '';
  const run = (resume: boolean) => runCmd({
    style: 'tiny_sequential', dataset: data, greedy: true, latent_length: String(recorded.latentSteps), result_jsonl: file,
    ...(resume ? { resume: true } : {}),
  }, async () => cpu, () => {}, (s) => (err += s));
  const samples = () => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as SampleRecord)
    .filter((r) => r.type === 'sample');
  const reason = `PromptSlotMissing: the question holds ${SLOTS.planner}, a latent slot marker of the prompts, which no question ` +
    'may hold (it would be taken for the slot); it was not asked';

  it('is scored wrong with the reason; the run goes on and answers the others as the tiny eval did', async () => {
    await run(false);
    const s = samples();
    expect(s.map((r) => r.sample_idx)).toEqual([0, 1, 2]);
    expect([s[0]!.raw_output, s[2]!.raw_output]).toEqual([answers[0], answers[2]]);
    expect(s[1]).toMatchObject({ correct: false, raw_output: '', tokens: 0, rollouts: [{ correct: false, detail: reason }] });
    expect(err).toContain('[2/3] question 1: wrong');
  }, 60_000);

  it('--resume of a file cut after that row asks only the next one', async () => {
    const lines = readFileSync(file, 'utf8').split('\n');
    writeFileSync(file, `${lines.slice(0, 3).join('\n')}\n`);
    err = '';
    await run(true);
    expect(err).toContain(`resuming ${file}: 2 of 3 questions recorded`);
    expect(err).toContain('[3/3] question 2');
    const s = samples();
    expect(s.map((r) => r.sample_idx)).toEqual([0, 1, 2]);
    expect(s[1]!.rollouts[0]!.detail).toBe(reason);
    expect(s[2]!.raw_output).toBe(answers[2]);
    expect(readFileSync(file, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { type: string }).type).at(-1)).toBe('summary');
  }, 60_000);

  it('rmas ask refuses such a question before it loads anything', async () => {
    const r = await rmasInProcess('ask', '--backend', 'cpu', '-q', `What is 2 + 2? ${SLOTS.refined}`);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`rmas: InvalidArgument: question 1 holds ${SLOTS.refined}, a latent slot marker of the prompts`);
    expect(r.err).not.toContain('loaded');
  });
});

describe('number flags out of range: a usage error, exit 2, before anything loads', () => {
  const data = join(tmp, 'q.jsonl');
  writeFileSync(data, toJsonl(taskSplit('test').slice(0, 1)));
  const rows = join(tmp, 'rows.jsonl');
  writeFileSync(rows, arithmeticRows(4).map((r) => JSON.stringify(r)).join('\n'));
  const ask = ['ask', '--backend', 'cpu', '-q', 'What is 2 + 2?'];
  const run = ['run', '--backend', 'cpu', '--style', 'tiny_sequential', '--dataset', data];
  const gen = ['generate', '--backend', 'cpu', '--model', 'models/tiny/llama-tiny', '--prompt', 'Add 17 and 25.'];
  const outer = ['train-outer', '--backend', 'cpu', '--style', 'tiny_sequential', '--dataset_name', rows, '--save_dir', join(tmp, 'o')];
  const cases: [string[], string][] = [
    [[...ask, '--num_recursive_rounds', '99999999999'], '--num_recursive_rounds 99999999999: expected an integer >= 1 and <= 100'],
    [[...run, '--num_recursive_rounds', '101'], '--num_recursive_rounds 101: expected an integer >= 1 and <= 100'],
    [[...outer, '--num_recursive_rounds', '99999999999'], '--num_recursive_rounds 99999999999: expected an integer >= 1 and <= 100'],
    [[...ask, '--top_p', '0'], '--top_p 0: expected a number > 0 and <= 1'],
    [[...ask, '--top_p=-0.5'], '--top_p -0.5: expected a number > 0 and <= 1'],
    [[...run, '--top_p', '0'], '--top_p 0: expected a number > 0 and <= 1'],
    [[...gen, '--top_p', '0'], '--top_p 0: expected a number > 0 and <= 1'],
    [[...gen, '--top_p', '1.5'], '--top_p 1.5: expected a number > 0 and <= 1'],
    [[...ask, '--seed', '1e300'], '--seed 1e300: expected an integer >= 0'],
    [[...run, '--latent_length', '1e7'], '--latent_length 1e7: expected an integer >= 1 and <= 1000000'],
  ];
  it.each(cases)('%s', async (argv, msg) => {
    const r = await rmasInProcess(...argv);
    expect(r.code).toBe(2);
    expect(r.err.split('\n')[0]).toBe(`rmas: ${msg}`);
    expect(r.err).not.toMatch(/backend: cpu|loading rows|loaded tiny/);
  });
});

describe('--num_train_epochs (6 rows, batch 2: 3 updates an epoch)', () => {
  const rowsFile = join(tmp, 'epochs.jsonl');
  writeFileSync(rowsFile, arithmeticRows(6).map((r) => JSON.stringify(r)).join('\n'));
  let n = 0;
  const args = (extra: TrainArgs): TrainArgs => ({
    model_name_or_path: 'models/tiny/qwen3-tiny', mas_design: 'sequential', mas_role: 'planner', dataset_name: rowsFile,
    save_dir: join(tmp, `epochs-${n++}`), batch_size: '2', save_steps: '0', ...extra,
  });
  const steps = (out: string) => (JSON.parse(out) as { steps: number }).steps;

  it('sets the length when --max_steps is not given: ceil(epochs × updates per epoch)', async () => {
    const half = await train('inner', args({ num_train_epochs: '0.5' }));
    expect(half.error).toBeNull();
    expect(steps(half.out)).toBe(2);
    expect(half.err).toContain('done: 2 steps');
    const more = await train('inner', args({ num_train_epochs: '1.5', max_steps: '-1' }));
    expect(steps(more.out)).toBe(5);
  });

  it('--max_steps > 0 overrides it, with a note; 0 epochs is a usage error', async () => {
    const r = await train('inner', args({ num_train_epochs: '0.5', max_steps: '3' }));
    expect(steps(r.out)).toBe(3);
    expect(r.err).toContain('note: --max_steps 3 overrides --num_train_epochs 0.5, as in the Hugging Face Trainer');
    const zero = await train('inner', args({ num_train_epochs: '0' }));
    expect(zero.error?.name).toBe('UsageError');
    expect(zero.error?.message).toBe('--num_train_epochs 0: expected a number > 0');
  });
});
