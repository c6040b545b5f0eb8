/**
 * A benchmark through a RecursiveMAS system (upstream's run.py): each question asked with ask(), each of
 * its rollouts scored, one record per question, and a summary with accuracy and pass@k (docs/method.md §7.1, §7.5).
 * Records come out one at a time so that a long run can be written as it goes and resumed. Questions that ask for
 * the LLM judge (judge.ts) are scored by its verdict, exact match kept beside it as `em`.
 */
import { Cancelled, ContextTooLong, InvalidArgument, PromptSlotMissing, RmasError } from '../errors';
import { yieldToEventLoop } from '../util/yield';
import { askBatch } from '../mas/batch';
import { slotIn } from '../mas/slots';
import type { AskOptions, AskResult } from '../mas/ask';
import type { RecordedMessages } from '../mas/ablation';
import type { MasSystem } from '../mas/system';
import type { SandboxOptions } from '../mas/tools/sandbox';
import { isGreedy, type SamplingOptions } from '../model/generate';
import { extractCode, scoreLcb, scoreMbppPlus } from './code';
import type { EvalItem } from './datasets';
import { createJudge, type Judge, type JudgeOptions, type JudgeVerdict } from './judge';
import { extractChoice, extractPredAnswer, freeFormMatch, mathMatch } from './score';

export interface RolloutRecord {
  raw_output: string;
  /** The parsed answer: math content, choice letter, or code (null when the output holds none). */
  pred: string | null;
  correct: boolean;
  tokens: number;
  retried: boolean;
  /** Why code failed (a stderr tail, "timeout", "no code"), or which normaliser matched a math answer. */
  detail?: string;
  /** Judged answers: exact match, kept beside the judge's verdict (which `correct` then holds). */
  em?: boolean;
  judge?: JudgeRecord;
}

/** What the LLM judge said about one answer. */
export interface JudgeRecord {
  model: string;
  /** null when the reply was not one word, CORRECT or INCORRECT. */
  verdict: JudgeVerdict | null;
  /** The reply as it came. */
  reply: string;
  /** What `correct` holds: the verdict, or exact match when the reply was malformed. */
  scored_by: 'judge' | 'em';
}

/** One question's record (a line of --result_jsonl). */
export interface SampleRecord {
  type: 'sample';
  sample_idx: number;
  question: string;
  task: EvalItem['task'];
  /** Math and choice: the gold answer; search QA: the accepted answers joined by " | "; code: null (the tests decide). */
  gold: string | null;
  pred_answer_parsed: string | null;
  pred_code_parsed: string | null;
  raw_output: string;
  /** The first rollout's verdict. */
  correct: boolean;
  /** Any rollout right (pass@k). */
  solved: boolean;
  rollouts: RolloutRecord[];
  tokens: number;
  latent_steps: number;
  seconds: number;
  seed: number | null;
  /** The row's groups (EvalItem.groups), when it names any. */
  groups?: Record<string, string>;
  /** Judged questions: the first rollout's exact match and judge record (`correct` is then the judge's). */
  em?: boolean;
  judge?: JudgeRecord;
}

export interface EvalSummary {
  type: 'summary';
  samples: number;
  /** Mean of the per-rollout accuracies (the first rollout's accuracy when there is one). */
  accuracy: number;
  /** Share of questions any of the k rollouts got right. */
  pass_at_k: number;
  k: number;
  per_rollout_accuracy: number[];
  tokens_mean: number;
  seconds_mean: number;
  /** Per group value ("level=5", "subject=Algebra"): questions and the first rollout's accuracy; absent when no row names a group. */
  by_group?: Record<string, { samples: number; accuracy: number }>;
  /** Present when the judge scored any answer (`accuracy` is then the judge's): the same mean by exact match alone. */
  em_accuracy?: number;
  /** Present when the judge scored any answer: its model, the answers it judged and how many replies were malformed (scored by exact match). */
  judge?: { model: string; judged: number; malformed: number };
}

export interface EvaluateOptions extends Pick<
  AskOptions,
  'rounds' | 'latentSteps' | 'mode' | 'maxNewTokens' | 'prompts' | 'answerRetry' | 'tools' | 'signal' | 'alone'
> {
  /**
   * Latent mode: every message replaced (src/mas/ablation.ts), zeroed, or shuffled: question i sends the messages the
   * system sends for question i + 1 of `items` (the last one question 0's), as `npm run tiny:eval` pairs them.
   */
  messages?: 'zeroed' | 'shuffled';
  /** Questions asked at once (askBatch: the same answers as one at a time). Default 1. */
  batchSize?: number;
  /** Question i's rollout r samples with seed + i·k + r (k rollouts); greedy ignores it. */
  sampling: SamplingOptions;
  /** k, the final decodes per question. Default 1. */
  rollouts?: number;
  /** MBPP+ program time limit (upstream's --mbppplus_timeout_s). Default 10 s. */
  mbppTimeoutMs?: number;
  /** LiveCodeBench limit per test. Default 6 s. */
  lcbTimeoutMs?: number;
  python?: string;
  /** Where no sandbox can be made for code answers: refuse (SandboxUnavailable, the default) or run them unsandboxed. */
  sandbox?: SandboxOptions;
  /** Questions already recorded (a resumed run): not asked again, counted in the summary. */
  done?: ReadonlyMap<number, SampleRecord>;
  onSample?: (record: SampleRecord, index: number, total: number) => void | Promise<void>;
  /**
   * The LLM judge for questions that ask for it (EvalItem.judge): settings (API_KEY, API_BASE_URL, API_MODEL read
   * from `env`, fields override them), a judge made by createJudge, or 'off' to score them by exact match only.
   * Default: settings from process.env where there is one (Node); 'off' where there is none (a browser tab).
   */
  judge?: JudgeOptions | Judge | 'off';
}

/** The judge a run uses: null when no question asks for one or it is off; throws, naming what is unset, when one is needed. */
export function runJudge(items: readonly EvalItem[], judge: EvaluateOptions['judge']): Judge | null {
  if (!items.some((i) => i.judge)) return null;
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  const j = judge ?? (env ? { env } : 'off');
  if (j === 'off') return null;
  return typeof (j as Judge).judge === 'function' ? (j as Judge) : createJudge(j as JudgeOptions);
}

/** The accepted answers a judge compares with. */
function goldAnswers(item: EvalItem): string[] {
  const c = item.check;
  return c.kind === 'freeform' ? c.gold : c.kind === 'math' || c.kind === 'choice' ? [c.gold] : [];
}

/** Scores one output, and when the question asks for it and a judge is given, has the judge decide (exact match kept as `em`). */
export async function scoreRollout(
  item: EvalItem,
  text: string,
  opts: Pick<EvaluateOptions, 'mbppTimeoutMs' | 'lcbTimeoutMs' | 'python' | 'sandbox' | 'signal'>,
  judge: Judge | null,
): Promise<Pick<RolloutRecord, 'pred' | 'correct' | 'detail' | 'em' | 'judge'>> {
  const s = await scoreOutput(item, text, opts);
  if (!item.judge || !judge) return s;
  const r = await judge.judge({ question: item.question, gold: goldAnswers(item), prediction: s.pred ?? '' }, opts.signal);
  const rec: JudgeRecord = { model: judge.model, verdict: r.verdict, reply: r.reply, scored_by: r.verdict === null ? 'em' : 'judge' };
  return { ...s, correct: r.verdict === null ? s.correct : r.verdict === 'CORRECT', em: s.correct, judge: rec };
}

/** Scores one output against its question's check. */
export async function scoreOutput(
  item: EvalItem,
  text: string,
  opts: Pick<EvaluateOptions, 'mbppTimeoutMs' | 'lcbTimeoutMs' | 'python' | 'sandbox' | 'signal'> = {},
): Promise<Pick<RolloutRecord, 'pred' | 'correct' | 'detail'>> {
  const c = item.check;
  if (c.kind === 'math') {
    const pred = extractPredAnswer(text);
    const how = mathMatch(pred, c.gold);
    return { pred, correct: how !== null, ...(how ? { detail: how } : {}) };
  }
  if (c.kind === 'choice') {
    const pred = extractChoice(text);
    return { pred, correct: pred === c.gold };
  }
  if (c.kind === 'freeform') {
    const pred = extractPredAnswer(text);
    return { pred, correct: c.gold.some((g) => freeFormMatch(pred, g)) };
  }
  const code = extractCode(text);
  if (code === null) return { pred: null, correct: false, detail: 'no code' };
  const run = {
    ...(opts.python ? { python: opts.python } : {}), ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.sandbox ? { sandbox: opts.sandbox } : {}),
  };
  if (c.kind === 'mbppplus') {
    const r = await scoreMbppPlus(code, c.test, { timeoutMs: opts.mbppTimeoutMs ?? 10_000, ...run });
    return { pred: code, correct: r.passed, ...(r.passed ? {} : { detail: r.detail }) };
  }
  const r = await scoreLcb(code, c.tests, {
    timeoutMs: opts.lcbTimeoutMs ?? 6_000,
    ...(item.fnName ? { fnName: item.fnName } : {}),
    ...run,
  });
  return { pred: code, correct: r.passed, ...(r.passed ? {} : { detail: r.detail }) };
}

/** The summary of a run's records (k rollouts each). */
export function summarize(records: readonly SampleRecord[], k: number): EvalSummary {
  const n = records.length;
  const per = Array.from({ length: k }, (_, r) => (n ? records.filter((s) => s.rollouts[r]?.correct).length / n : 0));
  const groups = new Map<string, { samples: number; right: number }>();
  for (const s of records) {
    for (const [key, v] of Object.entries(s.groups ?? {})) {
      const g = groups.get(`${key}=${v}`) ?? { samples: 0, right: 0 };
      g.samples++;
      if (s.correct) g.right++;
      groups.set(`${key}=${v}`, g);
    }
  }
  const judged = records.flatMap((s) => s.rollouts).filter((r) => r.judge);
  const em = Array.from({ length: k }, (_, r) => (n ? records.filter((s) => s.rollouts[r]?.em ?? s.rollouts[r]?.correct).length / n : 0));
  const byGroup = [...groups].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }))
    .map(([name, g]) => [name, { samples: g.samples, accuracy: g.right / g.samples }] as const);
  return {
    type: 'summary',
    samples: n,
    k,
    accuracy: per.reduce((a, b) => a + b, 0) / k,
    pass_at_k: n ? records.filter((s) => s.solved).length / n : 0,
    per_rollout_accuracy: per,
    tokens_mean: n ? records.reduce((a, s) => a + s.tokens, 0) / n : 0,
    seconds_mean: n ? records.reduce((a, s) => a + s.seconds, 0) / n : 0,
    ...(byGroup.length ? { by_group: Object.fromEntries(byGroup) } : {}),
    ...(judged.length
      ? {
          em_accuracy: em.reduce((a, b) => a + b, 0) / k,
          judge: {
            model: [...new Set(judged.map((r) => r.judge!.model))].join(', '),
            judged: judged.length,
            malformed: judged.filter((r) => r.judge!.verdict === null).length,
          },
        }
      : {}),
  };
}

/**
 * The lines a run prints, as upstream's modules print them: `accuracy=X%` (the judge's when it scored any answer),
 * then `em=Y%` (exact match) when it did, then `pass@k=Z%` with several rollouts.
 */
export function accuracyLines(summary: EvalSummary): string {
  const pct = (x: number) => `${(100 * x).toFixed(2)}%`;
  return `accuracy=${pct(summary.accuracy)}\n${summary.em_accuracy !== undefined ? `em=${pct(summary.em_accuracy)}\n` : ''}` +
    `${summary.k > 1 ? `pass@${summary.k}=${pct(summary.pass_at_k)}\n` : ''}`;
}

/**
 * Asks a chunk of questions at once; when one of them does not fit an agent's context (ContextTooLong, refused
 * before anything runs), each is asked alone, and the ones that do not fit get their error instead of an answer.
 */
async function askChunk(
  system: MasSystem, chunk: readonly EvalItem[], options: (item: EvalItem) => AskOptions,
): Promise<[EvalItem, AskResult | ContextTooLong][]> {
  try {
    const results = await askBatch(system, chunk.map(options));
    return chunk.map((c, i) => [c, results[i]!]);
  } catch (e) {
    if (!(e instanceof ContextTooLong)) throw e;
  }
  const out: [EvalItem, AskResult | ContextTooLong][] = [];
  for (const c of chunk) {
    try {
      out.push([c, (await askBatch(system, [options(c)]))[0]!]);
    } catch (e) {
      if (!(e instanceof ContextTooLong)) throw e;
      out.push([c, e]);
    }
  }
  return out;
}

/** Asks every question (skipping `done` ones), scores every rollout, and returns the records in item order with their summary. */
export async function evaluate(
  system: MasSystem,
  items: readonly EvalItem[],
  opts: EvaluateOptions,
): Promise<{ records: SampleRecord[]; summary: EvalSummary }> {
  const k = opts.rollouts ?? 1;
  if (!Number.isInteger(k) || k < 1) throw new InvalidArgument(`rollouts must be a positive integer, got ${k}`);
  // before the first question: a run that needs the judge and lacks its settings stops here
  const judge = runJudge(
    items.filter((i) => !opts.done?.has(i.index)),
    opts.judge,
  );
  const records: SampleRecord[] = [];
  const batchSize = opts.batchSize ?? 1;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw new InvalidArgument(`batch size must be a positive integer, got ${batchSize}`);
  if (opts.messages !== undefined && (opts.messages !== 'zeroed' && opts.messages !== 'shuffled' || opts.mode === 'text' || opts.alone))
    throw new InvalidArgument(`messages must be 'zeroed' or 'shuffled', in latent mode; got ${JSON.stringify(opts.messages)}`);
  const seedOf = (item: EvalItem) => (isGreedy(opts.sampling) ? null : (opts.sampling.seed ?? 0) + item.index * k);
  /** Shuffled messages: each question's donor's, recorded before its chunk is asked. */
  const donated = new Map<number, RecordedMessages>();
  const askOptions = (item: EvalItem): AskOptions => {
    const seed = seedOf(item);
    return {
      question: item.question,
      task: item.task,
      ...(item.fnName ? { fnName: item.fnName } : {}),
      rounds: opts.rounds,
      latentSteps: opts.latentSteps,
      mode: opts.mode,
      maxNewTokens: opts.maxNewTokens,
      sampling: seed === null ? opts.sampling : { ...opts.sampling, seed },
      rollouts: k,
      ...(opts.prompts ? { prompts: opts.prompts } : {}),
      ...(opts.answerRetry !== undefined ? { answerRetry: opts.answerRetry } : {}),
      ...(opts.tools ? { tools: opts.tools } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(opts.alone ? { alone: true } : {}),
      ...(opts.messages === 'zeroed' ? { ablation: { kind: 'zeroed' as const } } : {}),
      ...(donated.has(item.index) ? { ablation: { kind: 'replaced' as const, from: donated.get(item.index)! } } : {}),
    };
  };
  /** The messages the system sends for each donor of `chunk` (one decode each, no retry: only the messages are kept). */
  const recordDonors = async (chunk: readonly EvalItem[]) => {
    const donors = chunk.map((c) => items[(items.indexOf(c) + 1) % items.length]!);
    const runs = await askBatch(system, donors.map((d) => ({ ...askOptions(d), rollouts: 1, answerRetry: false, recordMessages: true })));
    chunk.forEach((c, i) => donated.set(c.index, runs[i]!.messages!));
  };
  // questions to ask, batchSize at a time (askBatch answers each as ask() would alone); recorded ones are kept as they are
  const answered = new Map<number, AskResult | ContextTooLong | PromptSlotMissing>();
  // a question holding a latent slot marker would be taken for a slot: scored wrong with the reason, never asked
  for (const item of items) {
    const slot = opts.done?.has(item.index) ? null : slotIn(item.question);
    if (slot) {
      answered.set(item.index, new PromptSlotMissing(`the question holds ${slot}, a latent slot marker of the prompts, which no ` +
        'question may hold (it would be taken for the slot); it was not asked'));
    }
  }
  const pending = items.filter((item) => !opts.done?.has(item.index) && !answered.has(item.index));
  let next = 0;
  for (const item of items) {
    // a cancel stops between questions, also between those of one batch already answered
    await yieldToEventLoop();
    if (opts.signal?.aborted) throw new Cancelled('cancelled between questions');
    const old = opts.done?.get(item.index);
    if (old) {
      if (old.rollouts.length !== k) {
        throw new InvalidArgument(
          `the recorded question ${item.index} has ${old.rollouts.length} rollouts, this run asks for ${k}; resume with the same --num_rollouts`,
        );
      }
      records.push(old);
      continue;
    }
    if (!answered.has(item.index)) {
      const chunk = pending.slice(next, next + batchSize);
      next += chunk.length;
      if (opts.messages === 'shuffled') await recordDonors(chunk);
      for (const [c, res] of await askChunk(system, chunk, askOptions)) answered.set(c.index, res);
      for (const c of chunk) donated.delete(c.index);
    }
    const seed = seedOf(item);
    const r = answered.get(item.index)!;
    answered.delete(item.index);
    const rollouts: RolloutRecord[] = [];
    const refused = r instanceof RmasError ? r : null;
    if (refused) {
      // a question the agents cannot read is scored wrong, with the reason, and the run goes on
      const detail = `${refused.name}: ${refused.message}`;
      const none = { raw_output: '', pred: null, correct: false, tokens: 0, retried: false, detail };
      for (let i = 0; i < k; i++) rollouts.push({ ...none });
    }
    for (const o of r instanceof RmasError ? [] : r.rollouts) {
      rollouts.push({ raw_output: o.text, tokens: o.tokens, retried: o.retried, ...(await scoreRollout(item, o.text, opts, judge)) });
    }
    const first = rollouts[0]!;
    const code = item.task === 'code';
    const rec: SampleRecord = {
      type: 'sample',
      sample_idx: item.index,
      question: item.question,
      task: item.task,
      gold:
        item.check.kind === 'math' || item.check.kind === 'choice'
          ? item.check.gold
          : item.check.kind === 'freeform'
            ? item.check.gold.join(' | ')
            : null,
      pred_answer_parsed: code ? null : first.pred,
      pred_code_parsed: code ? first.pred : null,
      raw_output: first.raw_output,
      correct: first.correct,
      solved: rollouts.some((o) => o.correct),
      rollouts,
      tokens: r instanceof RmasError ? 0 : r.tokens,
      latent_steps: r instanceof RmasError ? 0 : r.latentSteps,
      seconds: r instanceof RmasError ? 0 : r.seconds,
      seed,
      ...(item.groups ? { groups: item.groups } : {}),
      ...(first.judge ? { em: first.em!, judge: first.judge } : {}),
    };
    records.push(rec);
    await opts.onSample?.(rec, records.length - 1, items.length);
  }
  return { records, summary: summarize(records, k) };
}
