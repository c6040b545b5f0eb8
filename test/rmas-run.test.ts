/**
 * `rmas run` end to end on the committed tiny system (CPU): the questions of a JSONL file asked as
 * `npm run tiny:eval` asked them (models/tiny/system/eval.json, 3 rounds, latent, greedy), scored as the
 * tiny task scores them, written to --result_jsonl one record at a time and resumed; the settings check
 * of --resume; several rollouts sampled from the same final latents with seeds sample_seed + r.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TINY_SYSTEM_DIR } from '../scripts/tiny-system/paths';
import { scoreAnswer, taskSplit, toJsonl } from '../src/eval/tiny-task';
import { priceJsonl, priceSplit } from '../src/eval/tiny-prices';
import type { EvalSummary, SampleRecord } from '../src/eval/evaluate';
import { runCmd } from '../src/runner/run-cmd';
import { CpuBackend } from '../src/tensor/cpu';
import { overridesFor, runAsk } from './mas/ask-util';

const ROOT = resolve(import.meta.dirname, '..');
const dir = mkdtempSync(join(tmpdir(), 'rmas-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rows = taskSplit('test').slice(0, 6);
const data = join(dir, 'rows.jsonl');
writeFileSync(data, toJsonl(rows));
const recorded = JSON.parse(readFileSync(join(TINY_SYSTEM_DIR, 'eval.json'), 'utf8')) as {
  offset: number; latentSteps: number; results: { config: string; answers: string[] }[];
};
const latent3 = recorded.results.find((r) => r.config === 'latent3')!;

function rmas(...args: string[]) {
  const r = spawnSync(process.execPath, [join(ROOT, 'bin/rmas.js'), 'run', '--style', 'tiny_sequential', '--backend', 'cpu', ...args], {
    cwd: dir, encoding: 'utf8', env: { ...process.env, RMAS_TINY_SYSTEM: '' },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const lines = (file: string) => readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string });

describe('rmas run', () => {
  const results = join(dir, 'results.jsonl');

  it('asks each question as the tiny eval did, scores it, and writes a record per question', () => {
    expect(recorded.offset).toBe(0);
    const r = rmas(
      '--dataset',
      data,
      '--greedy',
      '--num_samples',
      '3',
      '--latent_length',
      String(recorded.latentSteps),
      '--result_jsonl',
      results,
    );
    expect(r.code, r.err).toBe(0);
    const recs = lines(results);
    expect(recs.map((x) => x.type)).toEqual(['config', 'sample', 'sample', 'sample', 'summary']);
    const samples = recs.filter((x) => x.type === 'sample') as SampleRecord[];
    samples.forEach((s, i) => {
      expect(s.sample_idx).toBe(i);
      expect(s.raw_output).toBe(latent3.answers[i]);
      expect(s.correct).toBe(scoreAnswer(s.raw_output, rows[i]!));
      expect(s.gold).toBe(String(rows[i]!.answer_value));
      expect(s.latent_steps).toBe(3 * 3 * recorded.latentSteps - recorded.latentSteps);
    });
    const right = samples.filter((s) => s.correct).length;
    expect(r.out).toBe(`accuracy=${((100 * right) / 3).toFixed(2)}%\n`);
    expect((recs[4] as EvalSummary).accuracy).toBeCloseTo(right / 3, 12);
  }, 180_000);

  it('refuses to overwrite a result file, and resumes one only with the same settings', () => {
    const before = readFileSync(results);
    const again = rmas(
      '--dataset',
      data,
      '--greedy',
      '--num_samples',
      '3',
      '--latent_length',
      String(recorded.latentSteps),
      '--result_jsonl',
      results,
    );
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/results\.jsonl exists; pass --resume to continue it/);
    const other = rmas('--dataset', data, '--greedy', '--num_samples', '5', '--latent_length', '8', '--result_jsonl', results, '--resume');
    expect(other.code).toBe(1);
    expect(other.err).toMatch(/it was run with latent_length = 40, this run has 8/);
    // the KV cache's dtype is a setting of the run (its answers can differ): recorded, and checked on --resume
    expect(lines(results)[0]).toMatchObject({ type: 'config', kv_dtype: 'auto' });
    const f16 = rmas(
      '--dataset',
      data,
      '--greedy',
      '--num_samples',
      '3',
      '--latent_length',
      String(recorded.latentSteps),
      '--result_jsonl',
      results,
      '--resume',
      '--kv_dtype',
      'f16',
    );
    expect(f16.code).toBe(1);
    expect(f16.err).toMatch(/it was run with kv_dtype = "auto", this run has "f16"/);
    expect(readFileSync(results).equals(before)).toBe(true);
  }, 60_000);

  it('resumes after an interrupted write: the recorded questions are kept, the rest asked', () => {
    // a run killed while writing its fourth record leaves half a line
    writeFileSync(results, `${readFileSync(results, 'utf8').split('\n').slice(0, 4).join('\n')}\n{"type":"sample","sample_i`);
    const r = rmas(
      '--dataset',
      data,
      '--greedy',
      '--num_samples',
      '5',
      '--latent_length',
      String(recorded.latentSteps),
      '--result_jsonl',
      results,
      '--resume',
    );
    expect(r.code, r.err).toBe(0);
    expect(r.err).toMatch(/last line is incomplete/);
    expect(r.err).toMatch(/resuming .*: 3 of 5 questions recorded/);
    expect(r.err.match(/\] question \d+:/g)).toHaveLength(2);
    const recs = lines(results);
    expect(recs.map((x) => x.type)).toEqual(['config', 'sample', 'sample', 'sample', 'sample', 'sample', 'summary']);
    const samples = recs.filter((x) => x.type === 'sample') as SampleRecord[];
    expect(samples.map((s) => s.sample_idx)).toEqual([0, 1, 2, 3, 4]);
    samples.forEach((s, i) => expect(s.raw_output).toBe(latent3.answers[i]));
    const summary = recs[6] as EvalSummary;
    expect(summary.samples).toBe(5);
    expect(summary.accuracy).toBeCloseTo(samples.filter((s) => s.correct).length / 5, 12);
  }, 180_000);

  it('--resume of a finished file says so; asked for more questions it sums up once more; a file not ours is refused', () => {
    const args = (n: number, file = results) =>
      ['--dataset', data, '--greedy', '--num_samples', String(n), '--latent_length', String(recorded.latentSteps), '--result_jsonl', file];
    const before = readFileSync(results);
    const done = rmas(...args(5), '--resume');
    expect(done.code).toBe(1);
    expect(done.err).toMatch(/--resume .*results\.jsonl: the run is finished \(its summary says accuracy [\d.]+% over 5 questions\)/);
    expect(done.err).toContain('nothing is left to resume');
    expect(readFileSync(results).equals(before)).toBe(true);
    const more = rmas(...args(6), '--resume');
    expect(more.code, more.err).toBe(0);
    expect(more.err).toMatch(/finished with 5 questions; asking the rest of the 6, then summing up again/);
    expect(lines(results).map((x) => x.type)).toEqual(['config', ...Array(6).fill('sample'), 'summary']);
    expect((lines(results)[7] as EvalSummary).samples).toBe(6);
    // a training-data file is not a result file: nothing is appended to it
    const rowsCopy = join(dir, 'rows-copy.jsonl');
    writeFileSync(rowsCopy, readFileSync(data));
    const r = rmas(...args(3, rowsCopy), '--resume');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/rows-copy\.jsonl: its first line is not the config record rmas run writes; it is not a result file of rmas run/);
    expect(readFileSync(rowsCopy).equals(readFileSync(data))).toBe(true);
  }, 180_000);

  it('a settings mismatch leaves even a half-written file as it was; a file cut inside its config line gets one', async () => {
    const cpu = new CpuBackend('f32');
    const run = (args: Record<string, unknown>) =>
      runCmd(
        { style: 'tiny_sequential', dataset: data, greedy: true, num_recursive_rounds: '1', latent_length: '4', ...args },
        async () => cpu,
        () => {},
        () => {},
      );
    const half = join(dir, 'half.jsonl');
    const text = `${readFileSync(results, 'utf8').split('\n').slice(0, 2).join('\n')}\n{"type":"sam`;
    writeFileSync(half, text);
    await expect(run({ num_samples: '1', result_jsonl: half, resume: true })).rejects.toThrow(
      /it was run with num_recursive_rounds = 3, this run has 1/,
    );
    expect(readFileSync(half, 'utf8')).toBe(text);
    const cut = join(dir, 'cut.jsonl');
    writeFileSync(cut, '{"type":"config","sty');
    await run({ num_samples: '1', result_jsonl: cut, resume: true });
    expect(lines(cut).map((x) => x.type)).toEqual(['config', 'sample', 'summary']);
    expect((lines(cut)[0] as { num_recursive_rounds?: number }).num_recursive_rounds).toBe(1);
  }, 120_000);

  it('samples k rollouts from the same latents: rollout r is the single-rollout run seeded sample_seed + r', () => {
    const sampled = [
      '--dataset',
      data,
      '--num_samples',
      '1',
      '--temperature',
      '1.5',
      '--top_p',
      '1',
      '--top_k',
      '0',
      '--latent_length',
      '8',
      '--num_recursive_rounds',
      '1',
      '--json',
    ];
    const file = join(dir, 'k2.jsonl');
    const two = rmas(...sampled, '--sample_seed', '11', '--num_rollouts', '2', '--result_jsonl', file);
    expect(two.code, two.err).toBe(0);
    const rec = lines(file).find((x) => x.type === 'sample') as SampleRecord;
    expect(rec.rollouts).toHaveLength(2);
    const single = (seed: number) => {
      const f = join(dir, `k1-${seed}.jsonl`);
      expect(rmas(...sampled, '--sample_seed', String(seed), '--result_jsonl', f).code).toBe(0);
      return (lines(f).find((x) => x.type === 'sample') as SampleRecord).raw_output;
    };
    expect(rec.rollouts[0]!.raw_output).toBe(single(11));
    expect(rec.rollouts[1]!.raw_output).toBe(single(12));
    expect(rec.rollouts[0]!.raw_output).not.toBe(rec.rollouts[1]!.raw_output);
    const summary = JSON.parse(two.out) as EvalSummary;
    expect(summary.k).toBe(2);
    expect(summary.pass_at_k).toBe(rec.rollouts.some((o) => o.correct) ? 1 : 0);
    expect(summary.per_rollout_accuracy).toEqual(rec.rollouts.map((o) => (o.correct ? 1 : 0)));
  }, 180_000);

  it('fails clearly on bad arguments', () => {
    expect(rmas('--dataset', 'mmlu').err).toMatch(/expected one of math500, gpqa, medqa, mbppplus, livecodebench/);
    const r = rmas('--dataset', data, '--num_rollouts', '0');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--num_rollouts 0: expected an integer >= 1/);
    expect(rmas('--dataset', data, '--resume').err).toMatch(/--resume continues a --result_jsonl file/);
    expect(rmas('--dataset', data, '--kv_dtype', 'q8').err).toMatch(/--kv_dtype q8: expected auto, f32 or f16/);
  }, 60_000);

  for (const style of ['sequential_light', 'mixture', 'distillation', 'deliberation'] as const) {
    it(`${style} (tiny upstream-layout models): each record is what rmas ask writes for its question`, async () => {
      const o = await overridesFor(style, join(dir, `sys-${style}`));
      const cpu = new CpuBackend('f32');
      const flags = { ckpt_override: o, num_recursive_rounds: '1', latent_length: '2', greedy: true, max_new_tokens: '6' };
      const file = join(dir, `${style}.jsonl`);
      let out = '';
      await runCmd({ style, dataset: data, num_samples: '2', result_jsonl: file, ...flags }, async () => cpu, (x) => (out += x), () => {});
      const samples = lines(file).filter((x) => x.type === 'sample') as SampleRecord[];
      expect(samples).toHaveLength(2);
      for (const [i, rec] of samples.entries()) {
        const r = await runAsk({ style, question: rows[i]!.question, task: 'math', json: true, ...flags }, cpu);
        expect(r.error).toBeNull();
        expect(rec.tokens).toBeGreaterThan(0);
        expect(rec.raw_output).toBe((JSON.parse(r.out) as { text: string }).text);
      }
      expect(out).toMatch(/^accuracy=\d+\.\d\d%\n$/);
    }, 120_000);
  }
});

describe('rmas run with the LLM judge (rows that ask for it)', () => {
  const judged = join(dir, 'judged.jsonl');
  writeFileSync(judged, rows.slice(0, 2).map((r) => JSON.stringify({ ...r, judge: true })).join('\n') + '\n');
  const KEY = 'sk-judge-test-secret';
  const saved = { API_KEY: process.env.API_KEY, API_BASE_URL: process.env.API_BASE_URL, API_MODEL: process.env.API_MODEL };
  const restore = () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  afterAll(restore);
  const flags = { style: 'tiny_sequential', dataset: judged, greedy: true, num_recursive_rounds: '1', latent_length: '4' };

  it('without API_KEY, API_BASE_URL and API_MODEL it stops naming them, before any model loads; ' +
    '--no_judge scores by exact match', async () => {
    for (const k of Object.keys(saved)) delete process.env[k];
    let loads = 0;
    const backend = async () => (loads++, new CpuBackend('f32'));
    await expect(
      runCmd(
        flags,
        backend,
        () => {},
        () => {},
      ),
    ).rejects.toMatchObject({ name: 'InvalidArgument', message: expect.stringMatching(/API_KEY/) });
    expect(loads).toBe(0);
    let out = '';
    await runCmd(
      { ...flags, no_judge: true },
      backend,
      (x) => (out += x),
      () => {},
    );
    expect(out).toMatch(/^accuracy=\d+\.\d\d%\n$/);
  }, 120_000);

  it('the judge decides, exact match is kept beside it, and the key is written nowhere', async () => {
    const { createServer } = await import('node:http');
    const seen: { auth: string | undefined; model: string }[] = [];
    const server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen.push({ auth: req.headers.authorization, model: (JSON.parse(body) as { model: string }).model });
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: 'CORRECT' } }] }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    Object.assign(process.env, { API_KEY: KEY, API_BASE_URL: `http://127.0.0.1:${port}/v1`, API_MODEL: 'judge-1' });
    const file = join(dir, 'judged-results.jsonl');
    let out = '';
    let log = '';
    try {
      await runCmd({ ...flags, result_jsonl: file }, async () => new CpuBackend('f32'), (x) => (out += x), (x) => (log += x));
    } finally {
      server.close();
      restore();
    }
    const recs = lines(file) as unknown as (SampleRecord & { type: string })[];
    const samples = recs.filter((x) => x.type === 'sample');
    expect(samples.map((x) => [x.correct, x.judge?.verdict, x.judge?.model])).toEqual([
      [true, 'CORRECT', 'judge-1'],
      [true, 'CORRECT', 'judge-1'],
    ]);
    const em = samples.filter((x) => x.em).length;
    expect(out).toBe(`accuracy=100.00%\nem=${((100 * em) / 2).toFixed(2)}%\n`);
    expect(seen).toEqual([{ auth: `Bearer ${KEY}`, model: 'judge-1' }, { auth: `Bearer ${KEY}`, model: 'judge-1' }]);
    expect((recs[0] as unknown as { judge_model: string }).judge_model).toBe('judge-1');
    for (const text of [out, log, readFileSync(file, 'utf8')]) expect(text).not.toContain(KEY);
  }, 120_000);
});

describe('rmas run with a question longer than the agents read', () => {
  it('that question is scored wrong with ContextTooLong as its reason; the batch around it is answered as usual', () => {
    const rows = priceSplit('test').slice(0, 4);
    const long = { ...rows[1]!, question: `${'Ann buys many things. '.repeat(300)}${rows[1]!.question}` };
    const file = join(dir, 'long.jsonl');
    writeFileSync(file, priceJsonl([rows[0]!, long, rows[2]!, rows[3]!]));
    const out = join(dir, 'long-results.jsonl');
    const r = spawnSync(process.execPath, [join(ROOT, 'bin/rmas.js'), 'run', '--style', 'tiny_distillation', '--dataset', file, '--greedy',
      '--num_recursive_rounds', '1', '--batch_size', '4', '--backend', 'cpu', '--result_jsonl', out], {
      cwd: dir, encoding: 'utf8', env: { ...process.env, RMAS_TINY_SYSTEM: '' },
    });
    expect(r.status, r.stderr).toBe(0);
    const samples = lines(out).filter((x) => x.type === 'sample') as SampleRecord[];
    expect(samples.map((s) => s.sample_idx)).toEqual([0, 1, 2, 3]);
    const refused = samples[1]!;
    expect([refused.correct, refused.raw_output, refused.tokens]).toEqual([false, '', 0]);
    expect(refused.rollouts[0]!.detail).toMatch(/^ContextTooLong: .*\d+ tokens.*512/);
    // the others are the answers of the committed evaluation (every latent1 answer of these rows is right)
    for (const i of [0, 2, 3]) expect(samples[i]!.correct, samples[i]!.raw_output).toBe(true);
  }, 120_000);
});
