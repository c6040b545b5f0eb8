/**
 * Fuzz target: a result JSONL given to `rmas run --resume` (and the part file of an interrupted sharded run beside
 * it), through runCmd up to the point where it would load the models (the backend callback, which stops the case).
 * Besides the harness's property: a file it accepts keeps every complete record byte for byte; only a half-written
 * last line or a summary is cut, and whatever it appends starts a new line.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { taskSplit, toJsonl } from '../../../src/eval/tiny-task';
import { runCmd } from '../../../src/runner/run-cmd';
import { firstInvalidUtf8 } from '../../../src/train/data/rows';
import type { Rng } from '../../../src/util/rng';
import type { FuzzTarget } from '../harness';
import { concat, mutateBytes, pick } from '../mutate';
import { bytesKey, enc, expectThat } from './common';
import { mutateJsonl } from './data';

/** The result file, and optionally the part file of rank 1 of an interrupted sharded run. */
export interface ResultFiles { results: Uint8Array; part?: Uint8Array }

class Reached extends Error {}

// the dataset lives outside the cases' folders: its path is part of the config line a resumed file must match
const home = mkdtempSync(join(tmpdir(), 'rmas-fuzz-results-'));
process.once('exit', () => rmSync(home, { recursive: true, force: true }));
const DATA = join(home, 'rows.jsonl');
writeFileSync(DATA, toJsonl(taskSplit('test').slice(0, 6)));
const ARGS = { style: 'tiny_sequential', dataset: DATA, greedy: true, num_recursive_rounds: '1', latent_length: '4', no_judge: true };

const stop = async (): Promise<never> => {
  throw new Reached('the models would load now');
};

/** The config line runCmd writes for these settings (asked of runCmd itself, on a new file). */
async function configLine(): Promise<string> {
  const file = join(home, 'fresh.jsonl');
  await runCmd({ ...ARGS, result_jsonl: file }, stop, () => {}, () => {}).catch((e: unknown) => {
    if (!(e instanceof Reached)) throw e;
  });
  return readFileSync(file, 'utf8').split('\n')[0]!;
}

const sample = (i: number, correct: boolean) => JSON.stringify({
  type: 'sample', sample_idx: i, question: `q${i}`, task: 'math', gold: String(i), pred_answer_parsed: correct ? String(i) : '0',
  pred_code_parsed: null, raw_output: `\\boxed{${correct ? i : 0}} é`, correct, solved: correct,
  rollouts: [{ raw_output: 'x', pred: String(i), correct, tokens: 5, retried: false }], tokens: 5, latent_steps: 4, seconds: 0.5, seed: 42,
});
const summary = (n: number) => JSON.stringify({ type: 'summary', samples: n, accuracy: 0.5, pass_at_k: 0.5, k: 1,
  per_rollout_accuracy: [0.5], tokens_mean: 5, seconds_mean: 0.5 });

async function seeds(): Promise<ResultFiles[]> {
  const c = await configLine();
  const lines = (...l: string[]) => enc(l.map((x) => `${x}\n`).join(''));
  return [
    { results: lines(c, sample(0, true), sample(1, false)) },
    { results: concat(lines(c, sample(0, true), sample(1, false)), enc(sample(2, true).slice(0, 40))) }, // cut mid-line
    { results: lines(c, sample(0, true), sample(1, false), sample(2, true), summary(3)) }, // finished with 3, asked for 6
    { results: lines(c) },
    { results: lines(c, sample(0, true)), part: lines(c, sample(3, true), sample(5, false)) },
  ];
}

/** A line mutated (JSONL mutations), a record's field swapped, a line cut, invalid UTF-8 before a cut line, the part file touched. */
function mutate(rng: Rng, f: ResultFiles): ResultFiles {
  const k = rng.int(10);
  if (f.part && k === 0) return { ...f, part: mutateJsonl(rng, f.part) };
  if (k === 1) return { ...f, part: pick(rng, [enc('not json\n'), f.results, enc(''), mutateBytes(rng, f.results)]) };
  if (k === 2) { // a record's field given a value of another type
    const text = new TextDecoder().decode(f.results);
    const fields = ['"rollouts":', '"sample_idx":', '"type":', '"style":', '"accuracy":', '"samples":'];
    const at = text.indexOf(pick(rng, fields));
    if (at < 0) return { ...f, results: mutateJsonl(rng, f.results) };
    const colon = text.indexOf(':', at) + 1;
    const v = pick(rng, ['null', '"x"', '-1', '1e300', '[]', '{}', '[1,2]', '{"toString":1}', '"config"', '"summary"', '0.5']);
    return { ...f, results: enc(text.slice(0, colon) + v + ',' + text.slice(colon)) };
  }
  if (k === 3) return { ...f, results: concat(f.results, enc(pick(rng, ['{"type":"sample","sample_idx":9', 'null', '\n', '[', 'é']))) };
  return { ...f, results: k < 9 ? mutateJsonl(rng, f.results) : mutateBytes(rng, f.results) };
}

/** Where a resumed file may be cut: before a half-written last line, or where its (first) summary starts. */
function keepUpTo(b: Uint8Array): number {
  let keep = b.lastIndexOf(0x0a) + 1;
  for (let at = 0; at < keep;) {
    const end = b.indexOf(0x0a, at);
    try {
      if ((JSON.parse(new TextDecoder().decode(b.subarray(at, end))) as { type?: unknown })?.type === 'summary') return Math.min(keep, at);
    } catch { /* not a record: the reader refuses such a file */ }
    at = end + 1;
  }
  return keep;
}

export const results: FuzzTarget<ResultFiles> = {
  name: 'result-jsonl-resume',
  seeds,
  truncations: (f) => {
    const cuts: ResultFiles[] = [];
    for (let i = 0; i <= f.results.length; i++) if (i === 0 || f.results[i - 1] === 0x0a || f.results[i] === 0x0a) cuts.push({ ...f,
      results: f.results.slice(0, i) });
    return cuts;
  },
  mutate,
  labels: (_f, ctx) => [join(ctx.dir, 'results.jsonl')],
  size: (f) => f.results.length + (f.part?.length ?? 0),
  key: (f) => `${bytesKey(f.results)}+${f.part ? bytesKey(f.part) : '-'}`,
  run: async (f, ctx) => {
    const file = join(ctx.dir, 'results.jsonl');
    writeFileSync(file, f.results);
    if (f.part) writeFileSync(`${file}.rank-1`, f.part);
    let log = '';
    try {
      await runCmd({ ...ARGS, result_jsonl: file, resume: true }, stop, () => {}, (s) => (log += s));
      throw new Error('runCmd returned without loading the models');
    } catch (e) {
      if (!(e instanceof Reached)) throw e;
    }
    // accepted: the complete records before the cut are kept byte for byte, and what follows starts a line
    const now = new Uint8Array(readFileSync(file));
    const q = keepUpTo(f.results);
    const kept = now.length >= q && now.subarray(0, q).every((x, i) => x === f.results[i]);
    const bad = firstInvalidUtf8(f.results) >= 0 ? ' (the file holds invalid UTF-8)' : '';
    expectThat(kept, `the first ${q} bytes (complete records) were not kept: ${now.length} bytes now${bad}`);
    // what follows the kept bytes (a config line, the part files' records) is whole JSON lines
    const rest = new TextDecoder().decode(now.subarray(q));
    const whole = rest === '' || (rest.endsWith('\n') && rest.slice(0, -1).split('\n').every((l) => {
      try {
        return typeof JSON.parse(l) === 'object';
      } catch {
        return false;
      }
    }));
    expectThat(whole, `after byte ${q} the file holds ${JSON.stringify(rest.slice(0, 60))}, not whole records${bad}`);
    expectThat(!existsSync(`${file}.rank-1`), 'the part file is still there');
    return `${now.length}:${log.split('\n').filter((l) => l.startsWith('resuming')).join()}`;
  },
  files: (f) => ({ 'results.jsonl': f.results, ...(f.part ? { 'results.jsonl.rank-1': f.part } : {}) }),
};
