/**
 * evaluate() with the LLM judge, on the committed tiny system (CPU) and a local server that plays the judge:
 * search-QA rows are scored by the verdict with exact match kept beside it, a malformed reply falls back to
 * exact match and says so, the summary and the printed lines carry both accuracies, a run without the judge's
 * settings stops before its first question, and the key is in no record, summary or log line.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { taskSplit } from '../src/eval/tiny-task';
import { InvalidArgument } from '../src/errors';
import { toItems } from '../src/eval/datasets';
import { accuracyLines, evaluate, runJudge, type SampleRecord } from '../src/eval/evaluate';
import { freeFormMatch } from '../src/eval/score';
import { type MasSystem } from '../src/mas/system';
import { loadSystem } from '../src/mas/system-folders';
import { CpuBackend } from '../src/tensor/cpu';

const KEY = 'sk-eval-judge-7d1e0b-SECRET';
const MODEL = 'judge-7b';
const FLAGS = { mode: 'latent' as const, rounds: 1, latentSteps: 4, maxNewTokens: 24, sampling: { greedy: true } };
const rows = taskSplit('test').slice(0, 3).map((r) => ({ question: r.question, answer: String(r.answer_value) }));

let system: MasSystem;
let server: Server;
let baseUrl = '';
const bodies: { model: string; messages: { role: string; content: string }[]; temperature: number }[] = [];
const auth: string[] = [];
/** The n-th reply's content; the third is neither word. */
const VERDICTS = ['CORRECT', 'INCORRECT', 'Probably right, but I am not sure.'];

beforeAll(async () => {
  system = await loadSystem('tiny_sequential', { backend: new CpuBackend('f32'), task: 'math' });
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      bodies.push(JSON.parse(raw));
      auth.push(req.headers.authorization ?? '');
      const content = VERDICTS[(bodies.length - 1) % VERDICTS.length];
      res
        .writeHead(200, { 'Content-Type': 'application/json' })
        .end(JSON.stringify({ choices: [{ message: { role: 'assistant', content } }] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
}, 120_000);
afterAll(async () => {
  system?.dispose();
  server?.closeAllConnections();
  await new Promise((r) => server?.close(r));
});
afterEach(() => {
  vi.unstubAllEnvs();
  bodies.length = 0;
  auth.length = 0;
});

describe('evaluate with the LLM judge (tiny system, local judge server)', () => {
  it('scores search QA by the verdict, keeps exact match and the reply, and falls back to exact match on a malformed reply', async () => {
    const items = await toItems('bamboogle', rows);
    expect(items.every((i) => i.judge)).toBe(true);
    const logs: string[] = [];
    const { records, summary } = await evaluate(system, items, {
      ...FLAGS, judge: { env: { API_KEY: KEY, API_BASE_URL: baseUrl, API_MODEL: MODEL }, log: (l) => void logs.push(l) },
    });
    expect(bodies).toHaveLength(3);
    expect(auth).toEqual(Array(3).fill(`Bearer ${KEY}`));
    records.forEach((r, i) => {
      expect(bodies[i]!.model).toBe(MODEL);
      expect(bodies[i]!.temperature).toBe(0);
      expect(bodies[i]!.messages[1]!.content).toContain(
        `Question: ${rows[i]!.question}\nGold answer: ${rows[i]!.answer}\nPrediction: ${r.pred_answer_parsed}\n`,
      );
      const em = freeFormMatch(r.pred_answer_parsed!, rows[i]!.answer);
      expect(r.em).toBe(em);
      expect(r.rollouts[0]!.em).toBe(em);
      expect(r.judge).toEqual(r.rollouts[0]!.judge);
    });
    expect(records.map((r) => [r.correct, r.solved, r.judge])).toEqual([
      [true, true, { model: MODEL, verdict: 'CORRECT', reply: 'CORRECT', scored_by: 'judge' }],
      [false, false, { model: MODEL, verdict: 'INCORRECT', reply: 'INCORRECT', scored_by: 'judge' }],
      [records[2]!.em, records[2]!.em, { model: MODEL, verdict: null, reply: VERDICTS[2], scored_by: 'em' }],
    ]);
    const right = 1 + Number(records[2]!.em);
    const emRight = records.filter((r) => r.em).length;
    expect(summary.accuracy).toBeCloseTo(right / 3, 12);
    expect(summary.em_accuracy).toBeCloseTo(emRight / 3, 12);
    expect(summary.judge).toEqual({ model: MODEL, judged: 3, malformed: 1 });
    expect(accuracyLines(summary)).toBe(`accuracy=${((100 * right) / 3).toFixed(2)}%\nem=${((100 * emRight) / 3).toFixed(2)}%\n`);
    expect(logs).toEqual([`judge: ${MODEL} did not reply CORRECT or INCORRECT ("${VERDICTS[2]}"); scored by exact match`]);
    expect(JSON.stringify({ records, summary, logs })).not.toContain(KEY);
  }, 120_000);

  it('judges every rollout, and reads API_KEY, API_BASE_URL and API_MODEL from process.env by default', async () => {
    vi.stubEnv('API_KEY', KEY);
    vi.stubEnv('API_BASE_URL', baseUrl);
    vi.stubEnv('API_MODEL', MODEL);
    // a math row that asks for the judge
    const items = await toItems(null, [{ question: rows[0]!.question, answer: rows[0]!.answer, judge: true }]);
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      const { records, summary } = await evaluate(system, items, {
        ...FLAGS,
        sampling: { temperature: 0.6, topP: 0.95, seed: 1 },
        rollouts: 3,
      });
      expect(records[0]!.rollouts.map((r) => r.judge?.verdict)).toEqual(['CORRECT', 'INCORRECT', null]);
      expect(records[0]!.rollouts.map((r) => r.correct)).toEqual([true, false, records[0]!.rollouts[2]!.em]);
      expect(summary.judge).toEqual({ model: MODEL, judged: 3, malformed: 1 });
      expect(summary.pass_at_k).toBe(1);
      expect(accuracyLines(summary)).toMatch(/^accuracy=\d+\.\d\d%\nem=\d+\.\d\d%\npass@3=100\.00%\n$/);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(JSON.stringify([records, summary, warn.mock.calls])).not.toContain(KEY);
    } finally {
      warn.mockRestore();
    }
  }, 120_000);

  it('stops before the first question when the judge is needed and unset; ' +
    "'off' scores by exact match with the records as before", async () => {
    vi.stubEnv('API_KEY', '');
    vi.stubEnv('API_BASE_URL', '');
    vi.stubEnv('API_MODEL', '');
    const items = await toItems('hotpotqa', rows);
    const onSample = vi.fn();
    // the system is never touched: the error comes first
    await expect(evaluate({} as MasSystem, items, { ...FLAGS, onSample })).rejects.toThrow(InvalidArgument);
    await expect(evaluate({} as MasSystem, items, { ...FLAGS, judge: { env: { API_MODEL: MODEL } }, onSample })).rejects.toThrow(
      /needs API_KEY \(.*\), API_BASE_URL \(.*\); set them in the environment, or score by exact match only/,
    );
    expect(onSample).not.toHaveBeenCalled();
    expect(runJudge(await toItems(null, rows), undefined)).toBeNull(); // no row asks for it

    const { records, summary } = await evaluate(system, items.slice(0, 1), { ...FLAGS, judge: 'off' });
    expect(Object.keys(records[0]!).sort()).toEqual([
      'correct',
      'gold',
      'latent_steps',
      'pred_answer_parsed',
      'pred_code_parsed',
      'question',
      'raw_output',
      'rollouts',
      'sample_idx',
      'seconds',
      'seed',
      'solved',
      'task',
      'tokens',
      'type',
    ]);
    expect(records[0]!.correct).toBe(freeFormMatch(records[0]!.pred_answer_parsed!, rows[0]!.answer));
    expect(summary.em_accuracy).toBeUndefined();
    expect(summary.judge).toBeUndefined();
    expect(accuracyLines(summary)).toBe(`accuracy=${(100 * summary.accuracy).toFixed(2)}%\n`);
    // a resumed run whose judged questions are all recorded needs no judge
    const done = new Map<number, SampleRecord>([[0, records[0]!]]);
    expect((await evaluate({} as MasSystem, items.slice(0, 1), { ...FLAGS, done })).records).toEqual(records);
    expect(bodies).toHaveLength(0);
  }, 120_000);
});
