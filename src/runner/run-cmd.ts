/**
 * `rmas run`: a benchmark through a RecursiveMAS system, as upstream's run.py runs it (flags spelled the
 * same: --style, --dataset, --dataset_split, --seed, --sample_seed, --num_recursive_rounds, --latent_length,
 * --temperature, --top_p, --top_k, --num_samples, --num_rollouts, --ckpt_override, --result_jsonl,
 * --mbppplus_timeout_s, --mbppplus_num_prompt_tests, --lcb_use_private_tests). Prints `accuracy=X%` (and
 * `pass@k=Y%` with several rollouts) as upstream's modules do. --result_jsonl is written one question at a
 * time, after a config line; --resume continues such a file with the same settings. run.py's other flags are
 * taken too: --batch_size (questions asked at once, answered as alone), --trust_remote_code, --device (cli.ts),
 * --tavily_keys_file and --tavily_sentinel_file; and those it always passes to its modules: --dtype auto,
 * --enable_thinking 0, --do_sample, --ans.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { allGatherJson, fromRoot, singleProcess, type ProcessGroup } from '../dist/group';
import { InvalidArgument, UsageError } from '../errors';
import { BENCHMARK_NAMES, loadBenchmark, type BenchmarkName } from '../eval/datasets';
import { paperAccuracy } from '../eval/paper';
import { accuracyLines, evaluate, runJudge, summarize, type SampleRecord } from '../eval/evaluate';
import type { TaskKind } from '../mas/prompts';
import { defaultMaxNewTokens } from '../mas/budget';
import { DEFAULT_ROUNDS, defaultLatentSteps, getStyle, type StyleSpec } from '../mas/styles';
import { progressPrinter, runnerHub } from './hub';
import { nodePythonRunner, parseTavilyKeys, sandboxMode, tavilySearchRunner, type ToolRunners } from '../mas/tools';
import type { SamplingOptions } from '../model/generate';
import { hubDatasetFiles } from '../store/hub-datasets';
import type { Backend } from '../tensor/backend';
import { kvDtypeFlag, numberFlag, type Values } from './args';
import { SYSTEM_OPTIONS, loadCommandSystem, readPrompts, upstreamFlags, upstreamSampling } from './ask-cmd';
import { writing } from './outputs';
import { withOutputLocks, type OutputLocks } from './output-lock';
import { checkConfig, partFiles, readResults, type RunConfig } from './results-file';

const s = { type: 'string' } as const;
const b = { type: 'boolean' } as const;

export const RUN_OPTIONS = {
  ...SYSTEM_OPTIONS,
  dataset: s,
  dataset_file: s,
  dataset_split: s,
  cache_dir: s,
  sample_seed: s,
  num_samples: s,
  num_rollouts: s,
  no_judge: b,
  result_jsonl: s,
  resume: b,
  mbppplus_timeout_s: s,
  mbppplus_num_prompt_tests: s,
  lcb_use_private_tests: s,
  // run.py's remaining flags, and those it always passes to its modules
  tavily_keys_file: s,
  tavily_sentinel_file: s,
  do_sample: b,
  ans: b,
} as const;

export const RUN_USAGE =
  `  rmas run --style STYLE --dataset ${BENCHMARK_NAMES.join('|')}|FILE.json[l] [--dataset_file FILE] [--dataset_split S]
           [--num_samples N] [--num_rollouts K] [--seed 42] [--sample_seed S] [--num_recursive_rounds 3] [--latent_length M]
           [--greedy | --temperature T --top_p 0.95 --top_k -1] [--max_new_tokens N] [--mode latent|text] [--ckpt_override ROLE=PATH ...]
           [--prompts FILE.json] [--no_ans] [--result_jsonl FILE [--resume]] [--mbppplus_timeout_s 10] [--mbppplus_num_prompt_tests 3]
           [--lcb_use_private_tests 1] [--cache_dir DIR] [--backend webgpu|cpu|cuda [--devices 0,1,…] | --device cuda|cpu|cuda:N] [--json]
           [--batch_size 8] [--trust_remote_code 1] [--tavily_keys_file FILE [--tavily_sentinel_file FILE]]
           [--dtype auto] [--enable_thinking 0|1] [--do_sample] [--ans] [--kv_dtype auto|f32|f16] [--allow_unsandboxed_code]
      asks each question of the benchmark (the first N with --num_samples) and scores it as upstream does; prints accuracy=X%
      (and pass@k=Y% with K rollouts: K final decodes from the same latents, seeds sample_seed + i·K + r). Benchmarks come from
      their Hugging Face dataset through the hub (HF_ENDPOINT, HF_TOKEN for gated GPQA, HF_HUB_OFFLINE) into the Hugging Face
      cache (or --cache_dir), or from --dataset_file (needed by medqa,
      upstream's inference/dataset/medqa.json, and by aime25, aime26, bamboogle, hotpotqa, whose loaders are unpublished;
      search QA (and rows with "judge": true) is scored by an LLM judge as upstream: an OpenAI-compatible endpoint set by
      API_KEY, API_BASE_URL and API_MODEL, exact match kept beside its verdict (--no_judge: exact match only); a plain
      FILE is MedQA-style choice when its rows have options, else math.
      Defaults as upstream: temperature 0.6 (0.2 for code), latent steps and max new tokens per style and dataset,
      10 rollouts for AIME.
      --result_jsonl writes a config line, one record per question as it is scored and a summary; --resume continues it
      Upstream's run.py flags: --batch_size N (default 8) asks N questions at once: their latent rollouts and decodes
      run as batched steps (WebGPU), each question answered as it would be alone (greedy: token for token);
      --trust_remote_code 0|1 is accepted and changes nothing: no code from a model repository
      is ever run; --device cuda|cpu|cuda:N is --backend cuda|cpu (with --devices N). --tavily_keys_file FILE: the
      deliberation search tool's Tavily keys, one per line (blank lines and # comments skipped; without it
      TAVILY_API_KEY): a key refused for auth or quota (HTTP 401, 403, 429, 432, 433, or a 4xx whose body says usage
      limit) is skipped for the rest of the run and the search goes to the next; keys are never printed or written,
      messages say "key 2 of 3". --tavily_sentinel_file FILE: upstream documents only that it is written when all
      Tavily keys are exhausted; read so here: written then, with one line saying when and why (no key), for a caller
      to stop on, while the run goes on with search off (upstream's contents and whether its run stops are unknown).
      What run.py always passes: --dtype auto (the engine reads weights as stored; other dtypes only tune PyTorch),
      --enable_thinking 0 (1 sets the chat templates' enable_thinking), --do_sample (sampling, the default; not with
      --greedy), --ans (the answer retry, the default; not with --no_ans). --kv_dtype: the KV caches' dtype (auto: f16
      on a WebGPU device with shader-f16, else f32), recorded in the config line. Code answers (MBPP+, LiveCodeBench) and
      deliberation's Python tool run in a bubblewrap sandbox (no network, no secrets, only their folder writable, bounded),
      scored by a harness the answer cannot reach; where none can be made the run stops with SandboxUnavailable before
      loading, unless --allow_unsandboxed_code runs the code without one`;

export type RunArgs = Values<typeof RUN_OPTIONS>;

type NumberFlag =
  | 'seed'
  | 'sample_seed'
  | 'num_recursive_rounds'
  | 'num_rollouts'
  | 'num_samples'
  | 'temperature'
  | 'top_p'
  | 'top_k'
  | 'latent_length'
  | 'max_new_tokens'
  | 'mbppplus_timeout_s'
  | 'mbppplus_num_prompt_tests'
  | 'lcb_use_private_tests';
const num = (a: RunArgs, k: NumberFlag, integer: boolean, min: number) => numberFlag(k, a[k], { integer, min });

/** Upstream's RELEASE_RECOMMENDED_SETTINGS latent steps (docs/method.md §4.5); the style's default elsewhere. */
export function recommendedLatentSteps(style: StyleSpec, dataset: BenchmarkName | null): number {
  const table: Partial<Record<string, Partial<Record<BenchmarkName, number>>>> = {
    sequential_light: { math500: 48, medqa: 32, gpqa: 32, mbppplus: 16 },
    sequential_scaled: { math500: 32, medqa: 48, gpqa: 48, mbppplus: 16 },
  };
  return (dataset && table[style.name]?.[dataset]) ?? defaultLatentSteps(style);
}

/**
 * The deliberation search tool of --tavily_keys_file (else TAVILY_API_KEY): keys rotated on auth and quota
 * errors; --tavily_sentinel_file written when every key is gone. Messages name keys by position only.
 */
export function searchTool(
  a: Pick<RunArgs, 'tavily_keys_file' | 'tavily_sentinel_file'>,
  err: (s: string) => void,
  opts: { url?: string; env?: NodeJS.ProcessEnv } = {},
): ToolRunners['search'] {
  const env = opts.env ?? process.env;
  if (a.tavily_sentinel_file && !a.tavily_keys_file)
    err('note: --tavily_sentinel_file is written when the keys of --tavily_keys_file are exhausted; without a keys file it is not used\n');
  if (!a.tavily_keys_file) return tavilySearchRunner({ apiKey: env.TAVILY_API_KEY, ...(opts.url ? { url: opts.url } : {}) });
  let text: string;
  try {
    text = readFileSync(a.tavily_keys_file, 'utf8');
  } catch (e) {
    throw new InvalidArgument(`--tavily_keys_file ${a.tavily_keys_file}: cannot read it (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const keys = parseTavilyKeys(text);
  if (!keys.length)
    throw new InvalidArgument(
      `--tavily_keys_file ${a.tavily_keys_file} holds no key (one per line; blank lines and # comments are skipped)`,
    );
  err(`search: ${keys.length} Tavily key(s) from ${a.tavily_keys_file}\n`);
  const sentinel = a.tavily_sentinel_file;
  return tavilySearchRunner({
    keys,
    ...(opts.url ? { url: opts.url } : {}),
    onKeyEvent: (m) => err(`search: ${m}\n`),
    onExhausted: (m) => {
      err(`search: ${m}; web search is off for the rest of the run${sentinel ? `; wrote ${sentinel}` : ''}\n`);
      if (sentinel) writeFileSync(sentinel, `${new Date().toISOString()} ${m} (${a.tavily_keys_file})\n`);
    },
  });
}

/**
 * `group` (mpirun: several ranks) shards the questions: those not yet recorded go round-robin to the ranks,
 * each rank writes its records to FILE.rank-R as it goes, and at the end rank 0 merges every rank's records
 * into --result_jsonl in question order and writes the summary. A resumed run first takes in the records of
 * the part files it finds (an interrupted sharded run, at any world size). Rank 0 alone prints the results.
 */
export async function runCmd(a: RunArgs, backend: () => Promise<Backend>, out: (s: string) => void, err: (s: string) => void,
  place?: (roles: readonly string[]) => Promise<Record<string, Backend>>, group: ProcessGroup = singleProcess()) {
  return withOutputLocks('run', (locks) => run(a, backend, out, err, place, group, locks));
}

async function run(a: RunArgs, backend: () => Promise<Backend>, out: (s: string) => void, err: (s: string) => void,
  place: ((roles: readonly string[]) => Promise<Record<string, Backend>>) | undefined, group: ProcessGroup, locks: OutputLocks) {
  if (!a.style) throw new UsageError('--style is required (e.g. sequential_light)');
  if (!a.dataset) throw new UsageError(`--dataset is required: ${BENCHMARK_NAMES.join(', ')}, or a .json/.jsonl file`);
  const style = getStyle(a.style);
  const mode = a.mode ?? 'latent';
  if (mode !== 'latent' && mode !== 'text') throw new UsageError(`--mode ${mode}: expected latent or text`);
  if (a.resume && !a.result_jsonl) throw new UsageError('--resume continues a --result_jsonl file; give its path');
  const seed = num(a, 'seed', true, 0) ?? 42;
  const sampleSeed = num(a, 'sample_seed', true, -1) ?? -1;
  const rounds = num(a, 'num_recursive_rounds', true, 1) ?? DEFAULT_ROUNDS;
  // upstream samples AIME 10 times (pass@10)
  const k = num(a, 'num_rollouts', true, 1) ?? (a.dataset === 'aime25' || a.dataset === 'aime26' ? 10 : 1);
  const limit = num(a, 'num_samples', true, -1) ?? -1;
  const temperature = num(a, 'temperature', false, 0);
  const topP = num(a, 'top_p', false, 0);
  const topK = num(a, 'top_k', true, -1);
  if (a.greedy && [temperature, topP, topK, a.sample_seed].some((x) => x !== undefined)) {
    throw new UsageError('--greedy does not combine with --temperature, --top_p, --top_k or --sample_seed');
  }
  if (a.greedy && a.do_sample) throw new UsageError('--do_sample (sampling, the default) and --greedy contradict each other; give one');
  if (a.no_ans && a.ans) throw new UsageError('--ans (the answer retry, the default) and --no_ans contradict each other; give one');
  const { batchSize, thinking } = upstreamFlags(a, err);
  const kvChoice = kvDtypeFlag(a.kv_dtype);
  if ((a.tavily_keys_file || a.tavily_sentinel_file) && !style.tools)
    err(`note: --tavily_keys_file is for deliberation's search tool; ${style.name} has no tools\n`);
  const search = style.tools ? searchTool(a, err) : null;
  const mbppTimeout = num(a, 'mbppplus_timeout_s', false, 0.001) ?? 10;
  const promptTests = num(a, 'mbppplus_num_prompt_tests', true, 0) ?? 3;
  const privateTests = (num(a, 'lcb_use_private_tests', true, 0) ?? 1) !== 0;
  const prompts = a.prompts ? readPrompts(a.prompts) : undefined;

  const { name, items: all } = await loadBenchmark(a.dataset, {
    ...(a.dataset_file ? { file: a.dataset_file } : {}), ...(a.dataset_split ? { split: a.dataset_split } : {}),
    // a named benchmark's files come through the hub client (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE) into the hub cache,
    // or under --cache_dir when given; the rows API (whose host ignores HF_ENDPOINT) is the page's path only
    datasetFiles: hubDatasetFiles(runnerHub(err).settings, {
      onEvent: progressPrinter(err, !!process.stderr.isTTY), ...(a.cache_dir ? { cacheDir: a.cache_dir } : {}),
    }),
    seed, privateTests, promptTests, onProgress: (n, total) => err(`\rdataset: ${n}/${total} rows`),
  });
  const items = limit < 0 ? all : all.slice(0, limit);
  if (!items.length) throw new InvalidArgument(`--dataset ${a.dataset} gave no questions${limit === 0 ? ' (--num_samples 0)' : ''}`);
  // the judge's settings are checked before any model loads (a missing API_KEY stops the run at once)
  const judge = a.no_judge ? null : runJudge(items, { env: process.env, log: (l) => err(`${l}\n`) });
  const task: TaskKind = items[0]!.task;
  // model-written code runs sandboxed: where no sandbox can be made, stop before loading (SandboxUnavailable)
  const sandbox = { allowUnsandboxed: a.allow_unsandboxed_code === true };
  if (style.tools || items.some((i) => i.check.kind === 'mbppplus' || i.check.kind === 'lcb')) await sandboxMode('python3', sandbox);
  const latentSteps = num(a, 'latent_length', true, 1) ?? recommendedLatentSteps(style, name);
  const maxNewTokens = num(a, 'max_new_tokens', true, 1) ?? defaultMaxNewTokens(style, { dataset: name });
  const sampling: SamplingOptions = a.greedy
    ? { greedy: true }
    : upstreamSampling({ temperature, topP, topK, seed: sampleSeed >= 0 ? sampleSeed : seed }, task);
  const config: RunConfig = {
    type: 'config',
    style: style.name,
    dataset: a.dataset,
    dataset_file: a.dataset_file ?? null,
    dataset_split: a.dataset_split ?? null,
    seed,
    sampling: JSON.stringify(sampling),
    num_recursive_rounds: rounds,
    latent_length: latentSteps,
    max_new_tokens: maxNewTokens,
    mode,
    num_rollouts: k,
    answer_retry: !a.no_ans,
    prompts: a.prompts ?? null,
    ckpt_override: (a.ckpt_override ?? []).join(' ') || null,
    enable_thinking: thinking,
    batch_size: batchSize,
    judge_model: judge?.model ?? null,
    kv_dtype: kvChoice,
  };

  let done = new Map<number, SampleRecord>();
  const file = a.result_jsonl;
  const lead = group.rank === 0;
  const sharded = group.size > 1;
  // rank 0 checks and prepares the result file; every rank learns which questions it already holds
  const parts = file ? partFiles(file) : [];
  if (parts.length && !a.resume) {
    throw new InvalidArgument(`${parts.join(', ')}: part files of an interrupted sharded run of ${file}; pass --resume to ` +
      'take their records in and continue, or delete them (nothing was changed)');
  }
  // a line of the result file (or of this rank's part file); a failed write is named, and says how --resume goes on
  const put = (path: string, value: unknown, doing: string, create = false) => writing(`${doing} to ${path}`,
    'the complete records are kept; once the disk can be written again, run the same command with --resume (a half-written ' +
      'last line is cut and its question asked again)',
    () => (create ? writeFileSync : appendFileSync)(path, `${JSON.stringify(value)}\n`));
  let prevExisted = false;
  const { indices: recorded, resumed } = await fromRoot(group, async () => {
    // one writer per result file: a second run on it (say two --resume) is refused before either writes
    locks.take('result_jsonl', file);
    locks.take('tavily_sentinel_file', style.tools ? a.tavily_sentinel_file : undefined);
    if (file && existsSync(file)) {
      prevExisted = true;
      if (!a.resume)
        throw new InvalidArgument(`--result_jsonl ${file} exists; pass --resume to continue it, or name another file (it was not changed)`);
      const prev = readResults(file);
      checkConfig(file, prev.config, config);
      if (prev.summary && items.every((i) => prev.done.has(i.index))) {
        const s = prev.summary;
        throw new InvalidArgument(`--resume ${file}: the run is finished (its summary says accuracy ${(100 * s.accuracy).toFixed(2)}% ` +
          `over ${s.samples} questions); nothing is left to resume. Name another --result_jsonl to run again (the file was not changed)`);
      }
      for (const i of items) {
        const r = prev.done.get(i.index);
        if (r && r.rollouts.length !== k) {
          throw new InvalidArgument(`--resume ${file}: the recorded question ${i.index} has ${r.rollouts.length} rollouts, this run asks for ${k}; ` +
            'resume with the same --num_rollouts (the file was not changed)');
        }
      }
      if (prev.summaryAt !== null) {
        // a finished run asked for more questions: its summary makes way for the one written at the end
        err(`${file}: finished with ${prev.done.size} questions; asking the rest of the ${items.length}, then summing up again\n`);
        truncateSync(file, prev.summaryAt);
      } else if (prev.keep !== null) {
        err(`${file}: its last line is incomplete (the run was interrupted while writing); asking that question again\n`);
        truncateSync(file, prev.keep);
      }
      // a file cut before its config line was complete gets one now, so that a later resume checks the settings
      if (!prev.config) put(file, config, 'appending the config line');
      done = prev.done;
    } else if (file) {
      // a new file's folder is made, as upstream's run.py makes its output folders
      mkdirSync(dirname(file), { recursive: true });
      put(file, config, 'writing the config line', true);
    }
    return { indices: [...done.keys()], resumed: done.size > 0 || prevExisted };
  });
  if (file) {
    // the records of an interrupted sharded run, from the part files each rank sees, go into the result file
    const found = parts.flatMap((p) => {
      const r = readResults(p);
      checkConfig(p, r.config, config);
      return [...r.done.values()];
    });
    const gathered = (await allGatherJson(group, found)).flat();
    await fromRoot(group, async () => {
      const fresh = new Map<number, SampleRecord>();
      for (const r of gathered) if (!done.has(r.sample_idx)) fresh.set(r.sample_idx, r);
      for (const r of [...fresh.values()].sort((x, y) => x.sample_idx - y.sample_idx)) {
        put(file, r, `appending the record of question ${r.sample_idx}`);
        done.set(r.sample_idx, r);
      }
      if (parts.length || gathered.length) err(`${file}: took in ${fresh.size} records of the part files of an interrupted sharded run\n`);
      return null;
    });
    for (const p of parts) rmSync(p, { force: true });
    // no rank starts its new part file while another may still be deleting the old ones
    await group.barrier();
    for (const r of gathered) recorded.push(r.sample_idx);
  }
  const held = new Set(recorded);
  if (resumed) err(`resuming ${file}: ${items.filter((i) => held.has(i.index)).length} of ${items.length} questions recorded\n`);
  // this rank's questions: those not yet recorded, dealt round-robin
  const mine = sharded ? items.filter((i) => !held.has(i.index)).filter((_, n) => n % group.size === group.rank) : items;
  const part = file && sharded ? `${file}.rank-${group.rank}` : null;
  if (part) put(part, config, 'writing the config line', true);
  if (sharded) err(`sharded over ${group.size} ranks: rank 0 asks ${mine.length} of the ${items.length - held.size} questions left\n`);

  const be = await backend();
  const placement = place ? await place(style.roles.map((r) => r.key)) : undefined;
  const t0 = performance.now();
  const { system, kv } = await loadCommandSystem(style.name, {
    backend: be, ...(placement ? { placement } : {}), ckptOverride: a.ckpt_override, task,
    links: mode === 'latent', stylePrompts: !prompts, thinking, kvChoice, err,
  });
  try {
    err(
      `loaded ${style.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${items.length} questions of ${name ?? a.dataset}, ${mode} mode, ` +
        `${rounds} round(s)${mode === 'latent' ? `, ${latentSteps} latent steps` : ''}, ${k} rollout(s), max ${maxNewTokens} new tokens; ${kv} KV cache\n`,
    );
    let right = sharded ? 0 : [...done.values()].filter((r) => r.sample_idx < items.length && r.correct).length;
    let seen = sharded ? 0 : [...done.keys()].filter((i) => i < items.length).length;
    const total = mine.length;
    const sink = part ?? file;
    const result = await evaluate(system, mine, {
      rounds, latentSteps, mode, maxNewTokens, sampling, rollouts: k, answerRetry: !a.no_ans, judge: judge ?? 'off', batchSize,
      ...(sharded ? {} : { done }),
      ...(prompts ? { prompts } : {}), mbppTimeoutMs: mbppTimeout * 1000, sandbox,
      ...(search ? { tools: { python: nodePythonRunner({ sandbox }), search } } : {}),
      onSample: (rec) => {
        seen++;
        if (rec.correct) right++;
        if (sink) put(sink, rec, `appending the record of question ${rec.sample_idx}`);
        const pred = (rec.pred_answer_parsed ?? (rec.pred_code_parsed ? 'code' : 'none')).replace(/\s+/g, ' ').slice(0, 40);
        const by = rec.judge ? ` by the judge${rec.judge.verdict === null ? ' (malformed reply: exact match)' : ''}` : '';
        err(
          `[${seen}/${total}] question ${rec.sample_idx}: ${rec.correct ? 'right' : 'wrong'}${by} (${pred}${rec.gold !== null ? ` vs ${rec.gold.slice(0, 40)}` : ''}); ` +
            `${rec.tokens} tokens, ${rec.seconds.toFixed(1)} s; accuracy so far ${((100 * right) / seen).toFixed(2)}%\n`,
        );
      },
    });
    // sharded: every rank's new records come to rank 0, which writes them in question order and sums up
    const gathered = sharded ? (await allGatherJson(group, result.records)).flat() : [];
    const summary = !sharded ? result.summary : await fromRoot(group, async () => {
      const fresh = new Map(gathered.map((r) => [r.sample_idx, r] as const));
      const all = items.map((i) => done.get(i.index) ?? fresh.get(i.index)).filter((r): r is SampleRecord => !!r);
      if (file) for (const r of all) if (fresh.has(r.sample_idx)) put(file, r, `appending the record of question ${r.sample_idx}`);
      return summarize(all, k);
    });
    if (part) rmSync(part, { force: true });
    if (!lead) return;
    if (file) put(file, summary, 'appending the summary');
    // per group (MATH-500's level and subject, GPQA's domain, …): one line per kind of group
    const kinds = new Map<string, string[]>();
    for (const [g, v] of Object.entries(summary.by_group ?? {})) {
      const [kind, value] = [g.slice(0, g.indexOf('=')), g.slice(g.indexOf('=') + 1)];
      kinds.set(kind, [...(kinds.get(kind) ?? []), `${value} ${(100 * v.accuracy).toFixed(1)}% (${v.samples})`]);
    }
    for (const [kind, parts] of kinds) err(`by ${kind}: ${parts.join(' · ')}\n`);
    const paper = paperAccuracy(style.name, name, rounds, mode);
    if (paper)
      err(
        `the paper: ${paper.accuracy.toFixed(1)}% (${paper.source}; its mean of 5 runs${k > 1 && (name === 'aime25' || name === 'aime26') ? ', pass@10' : ''})\n`,
      );
    if (a.json) out(`${JSON.stringify(summary)}\n`);
    else out(accuracyLines(summary));
  } finally {
    system.dispose();
  }
}
