/**
 * `rmas ask`: one question through a RecursiveMAS system. Flag names follow upstream's run.py
 * (--style, --ckpt_override KEY=PATH, --num_recursive_rounds, --latent_length, --temperature, --top_p,
 * --top_k, --seed, --max_new_tokens) so that upstream commands translate.
 */
import { readFileSync } from 'node:fs';
import { InvalidArgument } from '../errors';
import { ask, type AskOptions } from '../mas/run';
import { DumpWriter } from '../mas/dump';
import { detectTask, loadPromptSet, type PromptSet, type TaskKind } from '../mas/prompts';
import { DEFAULT_STYLE, defaultLatentSteps, getStyle } from '../mas/styles';
import { loadSystem } from '../mas/system';
import { materializeOverrides } from '../store/bundle-node';
import { nodePythonRunner, tavilySearchRunner } from '../mas/tools';
import type { SamplingOptions } from '../model/generate';
import type { Backend } from '../tensor/backend';

export const ASK_USAGE = `  rmas ask --question TEXT [--style STYLE] [--ckpt_override ROLE=PATH ...] [--num_recursive_rounds R]
           [--latent_length M] [--greedy | --temperature T --top_p P --top_k K --seed S] [--max_new_tokens N]
           [--mode latent|text] [--task math|choice|code] [--fn_name NAME] [--prompts FILE.json] [--no_ans]
           [--backend webgpu|cpu|cuda [--devices 0,1,…]] [--dump DIR] [--json]
      styles: tiny_sequential (the default: the tiny system shipped in models/tiny/system, with its own
      prompts; RMAS_TINY_SYSTEM=DIR loads another copy), sequential_light, sequential_scaled, mixture,
      distillation, deliberation. ROLE is a role of the style or "outer"; roles not overridden come from
      the package (tiny_sequential) or the Hugging Face cache (RecursiveMAS repos). A role's PATH is its
      model folder (model files + inner links), or a folder or .zip bundle of its inner link alone (a
      train-inner save_dir, a playground export), the role keeping the style's model; outer=PATH also
      takes a .zip bundle. --prompts replaces the style's prompts. Defaults as upstream: 3 rounds, 32
      latent steps, temperature 0.6 (0.2 for code), top_p 0.95, top_k from the final agent's
      generation_config.json, seed 42; max_new_tokens 64 for tiny_sequential. --json prints {answer, text,
      tokens, seconds, rounds}; --dump DIR writes manifest.json and one safetensors file per stage.
      Deliberation's search tool reads its key from TAVILY_API_KEY (never written anywhere).`;

export interface AskArgs {
  style?: string;
  question?: string;
  ckpt_override?: readonly string[];
  num_recursive_rounds?: string;
  latent_length?: string;
  greedy?: boolean;
  temperature?: string;
  top_p?: string;
  top_k?: string;
  seed?: string;
  max_new_tokens?: string;
  mode?: string;
  task?: string;
  fn_name?: string;
  prompts?: string;
  no_ans?: boolean;
  dump?: string;
  json?: boolean;
}

export class AskUsageError extends Error {
  override name = 'UsageError';
}

/** A numeric flag's value: undefined when absent, `usage`'s error unless it is a number (an integer) >= min. */
export function numberFlag(flag: string, v: unknown, integer: boolean, min: number, usage: (m: string) => Error): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (typeof v !== 'string' || v.trim() === '' || !Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min) {
    throw usage(`--${flag} ${String(v)}: expected ${integer ? 'an integer' : 'a number'} >= ${min}`);
  }
  return n;
}

const num = (a: AskArgs, k: keyof AskArgs, integer: boolean, min: number) => numberFlag(k, a[k], integer, min, (m) => new AskUsageError(m));

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
    if (i <= 0 || i === s.length - 1) throw new AskUsageError(`--ckpt_override ${s}: expected ROLE=PATH, e.g. planner=/models/planner`);
    out[s.slice(0, i)] = s.slice(i + 1);
  }
  return out;
}

/** The prompt set of a --prompts file. */
export function readPrompts(path: string): PromptSet {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new InvalidArgument(`--prompts ${path}: cannot read it (${(e as Error).message})`);
  }
  return loadPromptSet(text);
}

/** Upstream's max-new-tokens rule for a single question (infer_max_new_tokens, math500-like by default); 64 for the tiny system. */
export function defaultMaxNewTokens(style: string, task: TaskKind): number {
  if (style === 'tiny_sequential') return 64;
  if (task === 'code') return 4000;
  return style === 'sequential_light' && task === 'math' ? 1000 : 2000;
}

/**
 * `place`, when given, opens a backend for each role (--devices over several GPUs); without it every role
 * runs on `backend`.
 */
export async function askCmd(a: AskArgs, backend: () => Promise<Backend>, out: (s: string) => void, err: (s: string) => void,
  place?: (roles: readonly string[]) => Promise<Record<string, Backend>>) {
  if (!a.question) throw new AskUsageError('--question is required');
  const style = getStyle(a.style ?? DEFAULT_STYLE);
  const mode = a.mode ?? 'latent';
  if (mode !== 'latent' && mode !== 'text') throw new AskUsageError(`--mode ${mode}: expected latent or text`);
  if (a.task !== undefined && !['math', 'choice', 'code'].includes(a.task)) throw new AskUsageError(`--task ${a.task}: expected math, choice or code`);
  const task = (a.task as TaskKind | undefined) ?? detectTask(a.question);
  const rounds = num(a, 'num_recursive_rounds', true, 1) ?? 3;
  const latentSteps = num(a, 'latent_length', true, 1) ?? defaultLatentSteps(style);
  const maxNewTokens = num(a, 'max_new_tokens', true, 1) ?? defaultMaxNewTokens(style.name, task);
  const temperature = num(a, 'temperature', false, 0);
  const topP = num(a, 'top_p', false, 0);
  const topK = num(a, 'top_k', true, -1);
  const seed = num(a, 'seed', true, 0);
  if (a.greedy && [temperature, topP, topK, seed].some((x) => x !== undefined)) {
    throw new AskUsageError('--greedy does not combine with --temperature, --top_p, --top_k or --seed');
  }
  const sampling: SamplingOptions = a.greedy ? { greedy: true } : upstreamSampling({ temperature, topP, topK, seed: seed ?? 42 }, task);
  const prompts = a.prompts ? readPrompts(a.prompts) : undefined;
  const be = await backend();
  const placement = place ? await place(style.roles.map((r) => r.key)) : undefined;
  const t0 = performance.now();
  const system = await loadSystem(style.name, {
    backend: be, ...(placement ? { placement } : {}), ckptOverride: await materializeOverrides(overrides(a.ckpt_override)), task, links: mode === 'latent', onProgress: (s) => err(`${s}\n`),
    stylePrompts: !prompts,
  });
  try {
    err(`loaded ${style.name} in ${((performance.now() - t0) / 1000).toFixed(1)} s; ${mode} mode, ${rounds} round(s)` +
      `${mode === 'latent' ? `, ${latentSteps} latent steps` : ''}, task ${task}${system.adapterTask ? ` (${system.adapterTask} links)` : ''}\n`);
    const dump = a.dump ? await DumpWriter.create(a.dump) : null;
    const opts: AskOptions = {
      question: a.question, task, rounds, latentSteps, mode, sampling, maxNewTokens,
      answerRetry: !a.no_ans,
      ...(a.fn_name ? { fnName: a.fn_name } : {}),
      ...(prompts ? { prompts } : {}),
      ...(style.tools ? { tools: { python: nodePythonRunner(), search: tavilySearchRunner({ apiKey: process.env.TAVILY_API_KEY }) } } : {}),
      onStage: async (r) => {
        err(`round ${r.round + 1} ${r.role}: ${r.generatedIds ? `${r.generatedIds.length} tokens` : `${r.hidden?.shape[0] ?? 0} latent steps → ${r.linksOut.join(', ')}`} ` +
          `(${r.seconds.toFixed(2)} s)\n`);
        await dump?.stage(r);
      },
    };
    const r = await ask(system, opts);
    if (a.json) {
      out(`${JSON.stringify({ answer: r.answer, text: r.text, tokens: r.tokens, seconds: Number(r.seconds.toFixed(3)), rounds: r.rounds })}\n`);
    } else {
      out(`${r.text}\n`);
      err(`answer: ${r.answer}\n${r.tokens} tokens, ${r.latentSteps} latent steps, ${r.seconds.toFixed(2)} s${r.retried ? ' (answer retry ran)' : ''}\n`);
    }
  } finally {
    system.dispose();
  }
}
