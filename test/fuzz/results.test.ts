/**
 * Fuzzing the result JSONL `rmas run --resume` reads (and the part files of a sharded run); test/fuzz/harness.ts has
 * the property. Below, the crashes it found in src/runner/run-cmd.ts, as regression cases.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidArgument } from '../../src/errors';
import { taskSplit, toJsonl } from '../../src/eval/tiny-task';
import { runCmd } from '../../src/runner/run-cmd';
import { fuzzReader, fuzzTimeout } from './harness';
import { deepJson } from './mutate';

describe('fuzz: result JSONL on --resume', () => {
  it('a resumed file keeps its complete records, or is refused by name', async () => {
    expect(await fuzzReader('results.ts', 'results', 500)).toEqual([]);
  }, fuzzTimeout());
});

// Four crashes the fuzzer found in `rmas run --resume`, minimised, fixed in readResults (src/runner/results-file.ts).
describe('result JSONL on --resume: regression cases', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rmas-fuzz-resume-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const data = join(dir, 'rows.jsonl');
  writeFileSync(data, toJsonl(taskSplit('test').slice(0, 6)));
  const args = { style: 'tiny_sequential', dataset: data, greedy: true, num_recursive_rounds: '1', latent_length: '4', no_judge: true };
  class Reached extends Error {}
  const stop = async (): Promise<never> => {
    throw new Reached('the models would load now');
  };
  let n = 0;
  /** The config line runCmd writes, then `lines`, in a new file; the error runCmd --resume ends with (Reached: it accepted it). */
  async function resume(...lines: (string | Uint8Array)[]): Promise<{ file: string; error: unknown; before: Buffer }> {
    const file = join(dir, `r${++n}.jsonl`);
    await runCmd({ ...args, result_jsonl: file }, stop, () => {}, () => {}).catch(() => {});
    const config = readFileSync(file, 'utf8');
    const before = Buffer.concat([Buffer.from(config), ...lines.map((l) => Buffer.from(l))]);
    writeFileSync(file, before);
    const error = await runCmd({ ...args, result_jsonl: file, resume: true }, stop, () => {}, () => {}).then(() => null, (e: unknown) => e);
    return { file, error, before };
  }
  const sample = (i: number, extra = {}) => JSON.stringify({ type: 'sample', sample_idx: i, question: 'q', task: 'math', gold: '1',
    pred_answer_parsed: '1', pred_code_parsed: null, raw_output: 'x', correct: true, solved: true,
    rollouts: [{ raw_output: 'x', pred: '1', correct: true, tokens: 1, retried: false }], tokens: 1, latent_steps: 4, seconds: 1, seed: 42,
    ...extra });

  it('a line `null` after the config line is refused by name (readResults: TypeError reading null.type)', async () => {
    const { error } = await resume('null\n');
    expect(error).toBeInstanceOf(InvalidArgument);
  });

  it('a sample record without rollouts is refused by name (runCmd: TypeError reading r.rollouts.length)', async () => {
    const { error } = await resume(`${sample(0, { rollouts: undefined })}\n`);
    expect(error).toBeInstanceOf(InvalidArgument);
  });

  it('a config value nested 100 000 deep is refused by name (checkConfig: JSON.stringify overflows the stack)', async () => {
    const file = join(dir, 'deep.jsonl');
    writeFileSync(file, `{"type":"config","style":"tiny_sequential","seed":${deepJson(100_000)}}\n`);
    const error = await runCmd({ ...args, result_jsonl: file, resume: true }, stop, () => {}, () => {}).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidArgument);
  });

  it('a file with invalid UTF-8 and a half-written last line keeps its complete records (the cut is counted in bytes, not ' +
    'in decoded text)', async () => {
    const [head, tail] = sample(0, { raw_output: 'a~~' }).split('~~') as [string, string];
    // a 0xff inside a complete record, another complete record, then a half-written line
    const { file, error, before } = await resume(head, Uint8Array.of(0xff), `${tail}\n${sample(1)}\n{"type":"sam`);
    expect(error).toBeInstanceOf(Reached);
    // cut exactly at the last newline (nothing is appended before the models load): the half-written line is gone whole
    expect(readFileSync(file).equals(before.subarray(0, before.lastIndexOf(0x0a) + 1))).toBe(true);
  });
});

// Found by the 20x fuzz run: the --num_rollouts mismatch message named no file.
describe('result JSONL on --resume: what the long run found', () => {
  it('a record of 0 rollouts is refused naming the result file (the --num_rollouts message names no file)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rmas-fuzz-rollouts-'));
    try {
      const data = join(dir, 'rows.jsonl');
      writeFileSync(data, toJsonl(taskSplit('test').slice(0, 2)));
      const file = join(dir, 'r.jsonl');
      const args = { style: 'tiny_sequential', dataset: data, greedy: true, num_recursive_rounds: '1', latent_length: '4',
        no_judge: true };
      const stop = async (): Promise<never> => {
        throw new Error('the models would load now');
      };
      await runCmd({ ...args, result_jsonl: file }, stop, () => {}, () => {}).catch(() => {});
      writeFileSync(file, `${readFileSync(file, 'utf8')}{"type":"sample","sample_idx":0,"rollouts":[]}\n`);
      const error = await runCmd({ ...args, result_jsonl: file, resume: true }, stop, () => {}, () => {})
        .then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidArgument);
      expect((error as Error).message).toContain(file);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
