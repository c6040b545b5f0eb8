/**
 * `rmas ask`: one question through a RecursiveMAS system. Flag names follow upstream's run.py
 * (--style, --ckpt_override KEY=PATH, --num_recursive_rounds, --latent_length, --temperature, --top_p,
 * --top_k, --seed, --max_new_tokens) so that upstream commands translate.
 */
import { appendFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { InvalidArgument, UsageError } from '../errors';
import { writing } from './outputs';
import { withOutputLocks, type OutputLocks } from './output-lock';
import type { GpuCounters } from '../gpu/counters';
import { ablationLabel, checkAblation, prepareAblation } from '../mas/ablation';
import { stripThink } from '../mas/answer';
import { defaultMaxNewTokens } from '../mas/budget';
import { ask, type AskOptions } from '../mas/ask';
import { DumpWriter } from '../mas/dump';
import { slotIn } from '../mas/slots';
import { DEFAULT_PROMPTS, detectTask, loadPromptSet, type PromptSet, type TaskKind } from '../mas/prompts';
import { DEFAULT_ROUNDS, DEFAULT_STYLE, defaultLatentSteps, getStyle } from '../mas/styles';
import { kvDtypes, type MasSystem } from '../mas/system';
import { type LoadSystemOptions, loadSystem } from '../mas/system-folders';
import { runnerHub } from './hub';
import { materializeOverrides } from '../store/bundle-node';
import { nodePythonRunner, sandboxMode, tavilySearchRunner } from '../mas/tools';
import type { KvDType } from '../model/cache';
import type { SamplingOptions } from '../model/generate';
import type { Backend } from '../tensor/backend';
import type { Tokenizer } from '../tokenizer';
import { flag01, kvDtypeFlag, numberFlag, type Values } from './args';
import { parseQuestionsFile, reasoningPrompts, type CustomQuestion } from './custom';
import { DEVICE_OPTIONS } from './devices';

const s = { type: 'string' } as const;
const b = { type: 'boolean' } as const;

/** The flags `rmas ask` and `rmas run` share: upstream run.py's, and this project's for the same settings. */
export const SYSTEM_OPTIONS = {
  style: s,
  ckpt_override: { type: 'string', multiple: true },
  num_recursive_rounds: s,
  latent_length: s,
  greedy: b,
  temperature: s,
  top_p: s,
  top_k: s,
  seed: s,
  max_new_tokens: s,
  mode: s,
  prompts: s,
  no_ans: b,
  json: b,
  enable_thinking: s,
  batch_size: s,
  trust_remote_code: s,
  dtype: s,
  kv_dtype: s,
  allow_unsandboxed_code: b,
  ...DEVICE_OPTIONS,
} as const;

/** Upstream run.py's spellings, and run_custom.py's (-q is cli.ts's alias of --question). */
export const ASK_OPTIONS = {
  ...SYSTEM_OPTIONS,
  question: { type: 'string', multiple: true },
  questions_file: s,
  output_jsonl: s,
  task: s,
  fn_name: s,
  dump: s,
  zero_messages: b,
  messages_from: s,
} as const;

export const ASK_USAGE = `  rmas ask (--question TEXT | -q TEXT ... | --questions_file FILE) [--style STYLE] [--ckpt_override ROLE=PATH ...]
           [--num_recursive_rounds R] [--latent_length M] [--greedy | --temperature T --top_p P --top_k K --seed S]
           [--max_new_tokens N] [--mode latent|text] [--task math|reasoning|choice|code] [--fn_name NAME] [--prompts FILE.json]
           [--no_ans] [--output_jsonl OUT] [--backend webgpu|cpu|cuda [--devices 0,1,…] | --device cuda|cpu|cuda:N]
           [--enable_thinking 0|1] [--batch_size 8] [--trust_remote_code 1] [--dtype auto] [--kv_dtype auto|f32|f16]
           [--dump DIR] [--json] [--zero_messages | --messages_from QUESTION] [--allow_unsandboxed_code]
      styles: tiny_sequential (the default: the tiny system shipped in models/tiny/system, with its own
      prompts; RMAS_TINY_SYSTEM=DIR loads another copy), sequential_light, sequential_scaled, mixture,
      distillation, deliberation. ROLE is a role of the style or "outer"; roles not overridden come from
      the package (tiny_sequential) or the Hugging Face cache (RecursiveMAS repos). A role's PATH is its
      model folder (model files + inner links; a train-inner save_dir is one), or a folder or .zip bundle of
      its inner link alone (a playground export), the role keeping the style's model; outer=PATH also
      takes a .zip bundle. --prompts replaces the style's prompts. Defaults as upstream: 3 rounds, 32
      latent steps, temperature 0.6 (0.2 for code), top_p 0.95, top_k from the final agent's
      generation_config.json, seed 42, max_new_tokens as run.py gives the question's task (math 1000 on
      sequential_light, else 2000; choice and code 4000; 64 on the tiny systems). --json prints {answer, text,
      tokens, seconds, rounds} (a line per question; on WebGPU also per_latent_step and per_decoded_token: the
      dispatches, submits, readbacks and weight/activation bytes bound per step, after each rollout's first); ` +
      `--dump DIR writes manifest.json and one safetensors
      file per stage (DIR/<index>/ with several questions).
      As upstream's run_custom.py: -q is --question and may be repeated; --questions_file reads .txt (a question
      per line, or per blank-line-separated block), .json (a list of strings or of objects with "question",
      or {"questions": [...]}) or .jsonl (a string or such an object per line); the system is loaded once and
      the questions asked in turn; --output_jsonl OUT gets one --json record per question with its index and
      question (written to OUT.partial as they come, renamed to OUT at the end). --task reasoning: open-ended
      questions (math's context and links, plan/outline prompts, a natural-language answer in the format the
      question asks for), no answer retry and no extraction: answer is the whole text.
      --device is upstream's spelling of --backend (cuda:N = --backend cuda --devices N); --enable_thinking is the
      chat template's variable (0, upstream's default, renders Qwen3's empty think block). --batch_size is accepted
      (upstream's default 8); rmas ask takes its questions one at a time (rmas run batches them); ` +
      `--trust_remote_code is accepted and changes nothing:
      no code from a model repository is ever run; --dtype auto (upstream's) is what the engine does, other dtypes
      only tune PyTorch. --kv_dtype: the KV caches' dtype (auto: f16 on a WebGPU device with shader-f16, else f32;
      f16 needs shader-f16 or the CPU backend). Ablations of the latent messages (not upstream's): --zero_messages sends
      zeros in place of every message; --messages_from QUESTION first asks QUESTION and then sends its messages, round
      for round, in place of the question's own (what the agents say about another question). Deliberation's search
      tool reads its key from TAVILY_API_KEY (never written anywhere). Its Python tool runs the model's code in a
      bubblewrap sandbox (no network, no secrets, only its own folder writable, bounded); where none can be made the
      command stops with SandboxUnavailable before loading, unless --allow_unsandboxed_code runs the code without one.`;

/** The flags of `rmas ask`; a caller in code may give one question as a string. */
export type AskArgs = Omit<Values<typeof ASK_OPTIONS>, 'question' | 'ckpt_override'> & {
  question?: string | readonly string[];
  ckpt_override?: readonly string[];
};

const num = (
  a: AskArgs,
  k: 'num_recursive_rounds' | 'latent_length' | 'max_new_tokens' | 'temperature' | 'top_p' | 'top_k' | 'seed',
  integer: boolean,
  min: number,
) => numberFlag(k, a[k], { integer, min });

/** Upstream run.py's sampling: temperature 0.6 (0.2 for code), top_p 0.95, top_k from the model's generation_config unless >= 0. */
export function upstreamSampling(f: { temperature?: number; topP?: number; topK?: number; seed: number }, task: TaskKind): SamplingOptions {
  return {
    temperature: f.temperature ?? (task === 'code' ? 0.2 : 0.6),
    topP: f.topP ?? 0.95,
    seed: f.seed,
    // upstream's --top_k -1 means: the model's generation_config
    ...(f.topK !== undefined && f.topK >= 0 ? { topK: f.topK } : {}),
  };
}

export function overrides(list: readonly string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const s of list) {
    const i = s.indexOf('=');
    if (i <= 0 || i === s.length - 1) throw new UsageError(`--ckpt_override ${s}: expected ROLE=PATH, e.g. planner=/models/planner`);
    out[s.slice(0, i)] = s.slice(i + 1);
  }
  return out;
}

/**
 * The system `rmas ask` and `rmas run` load: --ckpt_override's entries (bundles extracted to temporary folders by
 * materializeOverrides, and named in progress lines and errors by the name the user gave, not that folder), released
 * folders through the runner's hub, the chat templates' thinking and the KV-cache dtype set; and the dtype it uses.
 */
export async function loadCommandSystem(
  style: string,
  o: Omit<LoadSystemOptions, 'ckptOverride' | 'onProgress' | 'repoFolder'> & {
    ckptOverride: readonly string[] | undefined; thinking: boolean; kvChoice: KvDType | 'auto'; err: (s: string) => void;
  },
): Promise<{ system: MasSystem; kv: string }> {
  const { ckptOverride: list, thinking, kvChoice, err, ...load } = o;
  const given = overrides(list);
  const ckptOverride = await materializeOverrides(given);
  const folders = Object.entries(ckptOverride).flatMap(([role, dir]) => (dir === given[role] ? [] : [[dir, given[role]!] as const]));
  const named = (s: string) => folders.reduce((t, [dir, name]) => t.replaceAll(dir, name), s);
  const system = await loadSystem(style, {
    ...load, ckptOverride, onProgress: (s) => err(`${named(s)}\n`), repoFolder: runnerHub(err).repoFolder,
  }).catch((e: unknown) => {
    if (e instanceof Error) e.message = named(e.message);
    throw e;
  });
  try {
    thinkAll(system, thinking);
    return { system, kv: kvDtypeAll(system, kvChoice) };
  } catch (e) {
    system.dispose();
    throw e;
  }
}

/** The prompt set of a --prompts file. */
export function readPrompts(path: string): PromptSet {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new InvalidArgument(`--prompts ${path}: cannot read it (${(e as Error).message})`);
  }
  return loadPromptSet(text, path);
}

/**
 * The flags run.py and run_custom.py take that this engine has no use for, checked as upstream checks them:
 * --batch_size (rmas run asks that many questions at once; one question has nothing to batch), --trust_remote_code (no code
 * from a repository is ever run), --dtype (auto is what the engine does; others only tune PyTorch), and
 * --enable_thinking, which is honoured (thinkingTokenizer).
 */
export function upstreamFlags(a: { batch_size?: string; trust_remote_code?: string; dtype?: string; enable_thinking?: string },
  err: (s: string) => void): { batchSize: number; thinking: boolean } {
  const batchSize = numberFlag('batch_size', a.batch_size, { integer: true, min: 1 }) ?? 8;
  flag01('trust_remote_code', a.trust_remote_code, true);
  if (a.dtype !== undefined && !['auto', 'float32', 'float16', 'bfloat16'].includes(a.dtype))
    throw new UsageError(`--dtype ${a.dtype}: expected auto, float32, float16 or bfloat16`);
  if (a.dtype !== undefined && a.dtype !== 'auto')
    err(`note: --dtype ${a.dtype} only tunes PyTorch; here weights are read as stored and the engine computes in f32 (upstream's auto)\n`);
  return { batchSize, thinking: flag01('enable_thinking', a.enable_thinking, false) };
}

/**
 * `tok` with the chat template's `enable_thinking` set to `on` wherever a render sets it (the engine renders
 * with it false, upstream's --enable_thinking 0, and falls back to a render without it for templates that
 * reject it). `tok` itself for false.
 */
export function thinkingTokenizer(tok: Tokenizer, on: boolean): Tokenizer {
  if (!on) return tok;
  const t = Object.create(tok) as Tokenizer;
  t.applyChatTemplate = (messages, opts = {}) =>
    tok.applyChatTemplate(
      messages,
      opts.kwargs && 'enable_thinking' in opts.kwargs ? { ...opts, kwargs: { ...opts.kwargs, enable_thinking: true } } : opts,
    );
  return t;
}

/** Every agent of `system` renders its chats with `enable_thinking` on. */
export function thinkAll(system: MasSystem, on: boolean): void {
  for (const agent of system.agents.values()) agent.tokenizer = thinkingTokenizer(agent.tokenizer, on);
}

/**
 * --kv_dtype: every agent's cache dtype (auto keeps each decoder's default, f16 on WebGPU with shader-f16); returns
 * what the agents use, e.g. "f16" or "f16 (planner), f32 (critic)" when placement mixes backends.
 */
export function kvDtypeAll(system: MasSystem, choice: KvDType | 'auto'): string {
  if (choice !== 'auto') for (const agent of system.agents.values()) agent.decoder.kvDtype = choice;
  return kvDtypes(system);
}

/** The questions of -q/--question (in order) and then of --questions_file. */
function questionsOf(a: AskArgs): CustomQuestion[] {
  const given = a.question === undefined ? [] : typeof a.question === 'string' ? [a.question] : [...a.question];
  const out: CustomQuestion[] = given.map((q) => ({ question: q.trim() })).filter((q) => q.question !== '');
  if (a.questions_file) {
    let text: string;
    try {
      text = readFileSync(a.questions_file, 'utf8');
    } catch (e) {
      throw new InvalidArgument(`--questions_file ${a.questions_file}: cannot read it (${(e as Error).message})`);
    }
    out.push(...parseQuestionsFile(text, a.questions_file));
  }
  return out;
}

/**
 * `place`, when given, opens a backend for each role (--devices over several GPUs); without it every role
 * runs on `backend`. Several questions (-q repeated, --questions_file) are asked in turn through one system.
 */
export async function askCmd(a: AskArgs, backend: () => Promise<Backend>, out: (s: string) => void, err: (s: string) => void,
  place?: (roles: readonly string[]) => Promise<Record<string, Backend>>) {
  return withOutputLocks('ask', (locks) => askWith(a, backend, out, err, place, locks));
}

async function askWith(a: AskArgs, backend: () => Promise<Backend>, out: (s: string) => void, err: (s: string) => void,
  place: ((roles: readonly string[]) => Promise<Record<string, Backend>>) | undefined, locks: OutputLocks) {
  const questions = questionsOf(a);
  if (!questions.length) {
    throw new UsageError(
      a.questions_file ? `--questions_file ${a.questions_file} holds no question` : '--question (-q) or --questions_file is required',
    );
  }
  // a question holding a latent slot marker would be taken for a slot (rmas run scores it wrong and goes on)
  for (const [i, q] of questions.entries()) {
    const slot = slotIn(q.question);
    if (slot) throw new InvalidArgument(`question ${i + 1} holds ${slot}, a latent slot marker of the prompts, which no question may ` +
      'hold; remove it (nothing was asked)');
  }
  const style = getStyle(a.style ?? DEFAULT_STYLE);
  // model-written code runs sandboxed: where no sandbox can be made, stop before loading (SandboxUnavailable)
  const sandbox = { allowUnsandboxed: a.allow_unsandboxed_code === true };
  if (style.tools) await sandboxMode('python3', sandbox);
  const mode = a.mode ?? 'latent';
  if (mode !== 'latent' && mode !== 'text') throw new UsageError(`--mode ${mode}: expected latent or text`);
  if (a.task !== undefined && !['math', 'reasoning', 'choice', 'code'].includes(a.task))
    throw new UsageError(`--task ${a.task}: expected math, reasoning, choice or code`);
  const reasoning = a.task === 'reasoning';
  // reasoning questions run as math ones (upstream maps the task to math500's loaders and links) with their own prompts
  const taskOf = (q: string): TaskKind => (reasoning ? 'math' : (a.task as TaskKind | undefined) ?? detectTask(q));
  const rounds = num(a, 'num_recursive_rounds', true, 1) ?? DEFAULT_ROUNDS;
  const latentSteps = num(a, 'latent_length', true, 1) ?? defaultLatentSteps(style);
  const maxNewTokensFlag = num(a, 'max_new_tokens', true, 1);
  const temperature = num(a, 'temperature', false, 0);
  const topP = num(a, 'top_p', false, 0);
  const topK = num(a, 'top_k', true, -1);
  const seed = num(a, 'seed', true, 0);
  if (a.greedy && [temperature, topP, topK, seed].some((x) => x !== undefined)) {
    throw new UsageError('--greedy does not combine with --temperature, --top_p, --top_k or --seed');
  }
  const { thinking } = upstreamFlags(a, err);
  const kvChoice = kvDtypeFlag(a.kv_dtype);
  if (a.zero_messages && a.messages_from !== undefined)
    throw new UsageError('--zero_messages and --messages_from are two ablations; give one');
  const choice = checkAblation(
    a.zero_messages ? { kind: 'zeroed' } : a.messages_from !== undefined ? { kind: 'from', question: a.messages_from } : undefined,
    mode, a.zero_messages ? '--zero_messages' : '--messages_from', (why) => new UsageError(why),
  );
  const samplingOf = (task: TaskKind): SamplingOptions =>
    a.greedy ? { greedy: true } : upstreamSampling({ temperature, topP, topK, seed: seed ?? 42 }, task);
  const given = a.prompts ? readPrompts(a.prompts) : undefined;
  const partial = a.output_jsonl ? `${a.output_jsonl}.partial` : null;
  // one writer per output: a second ask on the same --output_jsonl (or --dump folder) is refused before loading
  locks.take('output_jsonl', a.output_jsonl);
  locks.take('dump', a.dump);
  const be = await backend();
  const placement = place ? await place(style.roles.map((r) => r.key)) : undefined;
  const t0 = performance.now();
  const firstTask = taskOf(questions[0]!.question);
  const { system, kv } = await loadCommandSystem(style.name, {
    backend: be, ...(placement ? { placement } : {}), ckptOverride: a.ckpt_override, task: firstTask,
    links: mode === 'latent', stylePrompts: !given, thinking, kvChoice, err,
  });
  try {
    const prompts = reasoning ? reasoningPrompts(given ?? system.prompts ?? DEFAULT_PROMPTS) : given;
    err(
      `loaded ${style.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${mode} mode, ${rounds} round(s)` +
        `${mode === 'latent' ? `, ${latentSteps} latent steps` : ''}, task ${reasoning ? 'reasoning' : firstTask}${system.adapterTask ? ` (${system.adapterTask} links)` : ''}` +
        `${questions.length > 1 ? `; ${questions.length} questions` : ''}${thinking ? '; thinking on' : ''}; ${kv} KV cache\n`,
    );
    const keep = (doing: string, write: () => void) => writing(`${doing} ${partial} (for --output_jsonl ${a.output_jsonl})`,
      `${a.output_jsonl} was not changed and the answers so far stay in ${partial}; run the command again once the disk can be written`,
      write);
    if (partial) {
      keep('making', () => {
        mkdirSync(dirname(partial), { recursive: true });
        writeFileSync(partial, '');
      });
    }
    const tools = style.tools
      ? { python: nodePythonRunner({ sandbox }), search: tavilySearchRunner({ apiKey: process.env.TAVILY_API_KEY }) }
      : undefined;
    const common = (task: TaskKind): Omit<AskOptions, 'question'> => ({
      rounds,
      latentSteps,
      mode,
      sampling: samplingOf(task),
      maxNewTokens: maxNewTokensFlag ?? defaultMaxNewTokens(style, { task }),
      ...(prompts ? { prompts } : {}),
      ...(tools ? { tools } : {}),
    });
    const settings = (q: string) => ({ task: taskOf(q), ...common(taskOf(q)) });
    const { ablation, donor } = await prepareAblation(choice, settings, (o) => ask(system, o));
    const sent = donor?.messages;
    if (sent) err(`messages from "${sent.question}" (${sent.messages.size} messages, ${donor!.seconds.toFixed(2)} s)\n`);
    for (const [index, q] of questions.entries()) {
      const task = taskOf(q.question);
      if (questions.length > 1) err(`question ${index + 1}/${questions.length}\n`);
      const dump = a.dump ? await DumpWriter.create(questions.length > 1 ? join(a.dump, String(index)) : a.dump) : null;
      const fnName = q.fnName ?? a.fn_name;
      const opts: AskOptions = {
        question: q.question,
        task,
        ...common(task),
        answerRetry: !a.no_ans && !reasoning,
        ...(fnName ? { fnName } : {}),
        ...(ablation ? { ablation } : {}),
        onStage: async (r) => {
          err(
            `round ${r.round + 1} ${r.role}: ${r.generatedIds ? `${r.generatedIds.length} tokens` : `${r.hidden?.shape[0] ?? 0} latent steps → ${r.linksOut.join(', ')}`} ` +
              `(${r.seconds.toFixed(2)} s)\n`,
          );
          await dump?.stage(r);
        },
      };
      const r = await ask(system, opts);
      const record = {
        answer: reasoning ? stripThink(r.text).trim() : r.answer,
        text: r.text,
        tokens: r.tokens,
        seconds: Number(r.seconds.toFixed(3)),
        rounds: r.rounds,
        ...(choice ? { messages: ablationLabel(choice) } : {}),
        // what a counting backend (WebGPU) issued per latent step and per decoded token (steps after each first)
        ...(r.counters ? { per_latent_step: perStep(r.counters.latent), per_decoded_token: perStep(r.counters.decode) } : {}),
      };
      if (a.json) {
        out(`${JSON.stringify(record)}\n`);
      } else {
        out(`${r.text}\n`);
        err(
          `answer: ${record.answer}\n${r.tokens} tokens, ${r.latentSteps} latent steps, ${r.seconds.toFixed(2)} s${r.retried ? ' (answer retry ran)' : ''}\n`,
        );
      }
      const line = `${JSON.stringify({ index, question: q.question, ...record })}\n`;
      if (partial) keep(`appending answer ${index} to`, () => appendFileSync(partial, line));
    }
    if (partial) {
      keep('renaming', () => renameSync(partial, a.output_jsonl!));
      err(`wrote ${questions.length} record(s) to ${a.output_jsonl}\n`);
    }
  } finally {
    system.dispose();
  }
}

/** Counted work per step, with the names rmas generate --json uses; null when nothing was counted. */
function perStep(c: (GpuCounters & { steps: number }) | null) {
  if (!c || !c.steps) return null;
  return {
    steps: c.steps, dispatches: c.dispatches / c.steps, submits: c.submits / c.steps, readbacks: c.readbacks / c.steps,
    weight_bytes: c.weightBytes / c.steps, activation_bytes: c.activationBytes / c.steps,
  };
}
