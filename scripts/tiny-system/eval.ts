/**
 * `npm run tiny:eval` (tiny_distillation) and `npm run tiny:eval:sequential`: an embedded tiny system on a held-out
 * split of its task, greedy, for
 *   - `alone`: the final agent alone (its own prompt with its slots left empty),
 *   - `text{r}`: the text-MAS baseline (the same agents passing text) over r rounds,
 *   - `latent{r}`: RecursiveMAS (latent messages through the trained links) over r rounds,
 *   - `shuffled{r}`: the same, each message replaced by the one the system sent for another question of the
 *     split (the next row's), so the receivers read messages of the right form about the wrong question,
 *   - `zeroed{r}`: the same with every message replaced by zeros;
 *   - `fbzeroed{r}`: only the feedback zeroed (the messages the final agent sends back), the first hand-off kept;
 *   - `fbremoved{r}`: the feedback removed: its readers get their first-round prompts again, so that every hand-off
 *     is a first one (zeros in a slot are a message no agent was trained on);
 * with accuracy, mean seconds and generated tokens per question and latent steps. Prints a Markdown table
 * (the one in models/tiny/README.md) and, with --json FILE, writes every figure and each row's answer.
 * The systems are described by a TinyEvalTarget: tiny_sequential's here, tiny_distillation's in
 * scripts/tiny-distillation/eval.ts.
 */
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { UsageError } from '../../src/errors.ts';
import { type RecordedMessages } from '../../src/mas/ablation.ts';
import { ask } from '../../src/mas/ask.ts';
import type { MasSystem } from '../../src/mas/system.ts';
import { loadSystem } from '../../src/mas/system-folders.ts';
import { defaultLatentSteps, getStyle, schedule } from '../../src/mas/styles.ts';
import { generate } from '../../src/model/generate.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import type { Tokenizer } from '../../src/tokenizer/tokenizer.ts';
import { scoreAnswer, taskSplit, type TaskRow } from '../../src/eval/tiny-task.ts';
import { command, type Command, type Options } from '../../src/runner/args.ts';
import { int, json, oneOf, openBackend, s } from './cli.ts';
import { TINY_SYSTEM_DIR } from './paths.ts';
import { rolePrompt } from './train-agents.ts';

const KINDS = ['text', 'latent', 'shuffled', 'zeroed', 'fbzeroed', 'fbremoved'] as const;
export const CONFIGS = [
  'alone',
  ...(['text1', 'text2', 'text3', 'latent1', 'latent2', 'latent3'] as const),
  ...(['shuffled1', 'shuffled2', 'shuffled3', 'zeroed1', 'zeroed2', 'zeroed3', 'fbzeroed2', 'fbzeroed3'] as const),
  ...(['fbremoved2', 'fbremoved3'] as const),
] as const;
export type EvalConfig = (typeof CONFIGS)[number];
/** Longest answer any agent writes here; the tasks' targets are under 40 tokens. */
export const TINY_MAX_NEW_TOKENS = 64;

/** What the evaluation needs to know of an embedded system and its task. */
export interface TinyEvalTarget<R extends { question: string } = { question: string }> {
  style: 'tiny_sequential' | 'tiny_distillation' | 'tiny_recursion';
  /** The committed system's folder. */
  dir: string;
  rows(split: 'test' | 'validation'): R[];
  score(text: string, row: R): boolean;
  /** The final agent alone: its role, the table's label, and its prompt with the slots empty. */
  alone: { role: string; label: string; prompt(tok: Tokenizer, row: R): string };
  configs: readonly EvalConfig[];
}

export const SEQUENTIAL_TARGET: TinyEvalTarget<TaskRow> = {
  style: 'tiny_sequential',
  dir: TINY_SYSTEM_DIR,
  rows: taskSplit,
  score: scoreAnswer,
  alone: { role: 'solver', label: 'solver alone', prompt: (tok, row) => rolePrompt(tok, 'solver', 'first', row.question, '') },
  configs: ['alone', 'text1', 'text3', 'latent1', 'latent2', 'latent3'],
};

export interface ConfigResult {
  config: EvalConfig;
  label: string;
  correct: number;
  total: number;
  accuracy: number;
  /** Mean per question. */
  seconds: number;
  tokens: number;
  latentSteps: number;
  answers: string[];
  /** Per row: scored correct. */
  ok: boolean[];
}

export interface EvalOptions<R extends { question: string }> {
  target?: TinyEvalTarget<R>;
  backend?: Backend;
  rows?: readonly R[];
  configs?: readonly EvalConfig[];
  latentSteps?: number;
  /** Folder of the system (default the target's). */
  systemDir?: string;
  onRow?: (config: EvalConfig, index: number, ok: boolean) => void;
}

/** The table's label of a config. */
export function configLabel(config: EvalConfig, alone: string): string {
  if (config === 'alone') return alone;
  const r = Number(config.slice(-1));
  const rounds = `${r} round${r > 1 ? 's' : ''}`;
  const kind = config.slice(0, -1) as (typeof KINDS)[number];
  return {
    text: `text-MAS, ${rounds}`,
    latent: `RecursiveMAS, ${rounds}`,
    shuffled: `RecursiveMAS, ${rounds}, messages shuffled`,
    zeroed: `RecursiveMAS, ${rounds}, messages zeroed`,
    fbzeroed: `RecursiveMAS, ${rounds}, feedback zeroed`,
    fbremoved: `RecursiveMAS, ${rounds}, feedback removed`,
  }[kind];
}

/** The outer links the style's final agent sends on: its feedback to the first agents of the next round. */
export const feedbackLinks = (style: string): string[] => {
  const spec = getStyle(style);
  return [...new Set(schedule(spec, 2).filter((st) => st.role === spec.decoder).flatMap((st) => st.linksOut))];
};

async function agentAlone<R extends { question: string }>(system: MasSystem, target: TinyEvalTarget<R>, row: R) {
  const agent = system.agents.get(target.alone.role)!;
  const tok = agent.tokenizer;
  const ids = tok.encode(target.alone.prompt(tok, row), { addSpecialTokens: false });
  const eos = [tok.idOf('<|im_end|>'), tok.idOf('<|endoftext|>')].filter((x): x is number => typeof x === 'number');
  const greedy = { sampling: { greedy: true }, eosTokenIds: eos };
  const r = await generate(agent.decoder, { inputIds: ids, maxNewTokens: TINY_MAX_NEW_TOKENS, ...greedy });
  return { text: tok.decode(r.tokens, { skipSpecialTokens: true }), tokens: r.tokens.length, latentSteps: 0, messages: undefined };
}

/** Runs every config over the rows; one system load per mode. */
export async function evalTiny<R extends { question: string } = TaskRow>(opts: EvalOptions<R> = {}): Promise<ConfigResult[]> {
  const target = (opts.target ?? SEQUENTIAL_TARGET) as TinyEvalTarget<R>;
  const backend = opts.backend ?? new CpuBackend('f32');
  const rows = opts.rows ?? target.rows('test');
  const configs = opts.configs ?? target.configs;
  const m = opts.latentSteps ?? defaultLatentSteps(getStyle(target.style));
  const root = resolve(opts.systemDir ?? target.dir);
  const results: ConfigResult[] = [];
  const systems = new Map<'latent' | 'text', MasSystem>();
  const systemFor = async (mode: 'latent' | 'text') => {
    let s = systems.get(mode);
    if (!s) {
      s = await loadSystem(target.style, { backend, embeddedRoot: root, task: 'math', links: mode === 'latent' });
      systems.set(mode, s);
    }
    return s;
  };
  // the messages each row's latent run sent, per rounds, for the shuffled configs
  const recorded = new Map<number, RecordedMessages[]>();
  const run = async (config: EvalConfig, row: R, i: number, record: boolean) => {
    if (config === 'alone') return agentAlone(await systemFor('text'), target, row);
    const kind = config.slice(0, -1) as (typeof KINDS)[number];
    const rounds = Number(config.slice(-1));
    const mode = kind === 'text' ? 'text' : 'latent';
    const donor = kind === 'shuffled' ? (await messagesOf(rounds))[(i + 1) % rows.length]! : undefined;
    const r = await ask(await systemFor(mode), {
      question: row.question,
      task: 'math',
      rounds,
      latentSteps: m,
      mode,
      sampling: { greedy: true },
      maxNewTokens: TINY_MAX_NEW_TOKENS,
      ...(kind === 'zeroed' ? { ablation: { kind: 'zeroed' as const } } : {}),
      ...(kind === 'fbzeroed' ? { ablation: { kind: 'zeroed' as const, links: feedbackLinks(target.style) } } : {}),
      ...(kind === 'fbremoved' ? { ablation: { kind: 'removed' as const, links: feedbackLinks(target.style) } } : {}),
      ...(donor ? { ablation: { kind: 'replaced' as const, from: donor } } : {}),
      ...(record ? { recordMessages: true } : {}),
    });
    return { text: r.text, tokens: r.tokens, latentSteps: r.latentSteps, messages: r.messages };
  };
  const messagesOf = async (rounds: number): Promise<RecordedMessages[]> => {
    let list = recorded.get(rounds);
    if (!list) {
      list = [];
      for (const [i, row] of rows.entries()) list.push((await run(`latent${rounds}` as EvalConfig, row, i, true)).messages!);
      recorded.set(rounds, list);
    }
    return list;
  };
  try {
    for (const config of configs) {
      // the donors' messages come from an untimed recording pass, so that no config's seconds include one
      if (config.startsWith('shuffled')) await messagesOf(Number(config.slice(-1)));
      let correct = 0;
      let seconds = 0;
      let tokens = 0;
      let latent = 0;
      const answers: string[] = [];
      const okRows: boolean[] = [];
      for (const [i, row] of rows.entries()) {
        const t0 = performance.now();
        const r = await run(config, row, i, false);
        seconds += (performance.now() - t0) / 1000;
        tokens += r.tokens;
        latent += r.latentSteps;
        const ok = target.score(r.text, row);
        if (ok) correct++;
        answers.push(r.text);
        okRows.push(ok);
        opts.onRow?.(config, i, ok);
      }
      const n = rows.length;
      results.push({
        config,
        label: configLabel(config, target.alone.label),
        correct,
        total: n,
        accuracy: n ? correct / n : 0,
        seconds: n ? seconds / n : 0,
        tokens: n ? tokens / n : 0,
        latentSteps: n ? latent / n : 0,
        answers,
        ok: okRows,
      });
    }
  } finally {
    for (const s of systems.values()) s.dispose();
  }
  return results;
}

/** The README table. */
export function markdownTable(results: readonly ConfigResult[], backendName: string, split = 'test'): string {
  const head = `| system (greedy, ${results[0]?.total ?? 0} ${split} questions, ${backendName}) |`;
  const lines = [
    `${head} accuracy | s / question | generated tokens / question | latent steps / question |`,
    '|---|---:|---:|---:|---:|',
    ...results.map((r) => {
      const acc = `${(100 * r.accuracy).toFixed(1)}% (${r.correct}/${r.total})`;
      return `| ${r.label} | ${acc} | ${r.seconds.toFixed(3)} | ${r.tokens.toFixed(1)} | ${r.latentSteps.toFixed(0)} |`;
    }),
  ];
  return lines.join('\n');
}

/**
 * The `eval` command of a build entry point over `target` (`npm run tiny:eval`, `npm run tiny:eval:sequential`): a
 * Markdown table of the configs on a held-out split, and with --json every figure and answer.
 */
export function evalCommand<R extends { question: string }>(target: TinyEvalTarget<R>, doc: string): Command<Options, void> {
  return command({
    options: { split: s, limit: s, offset: s, latent_steps: s, backend: s, configs: s, json: s, system: s },
    usage: `  build.ts eval [--split test|validation] [--limit N] [--offset K] [--latent_steps M] [--backend cpu|webgpu] [--configs a,b,...]
                [--json FILE] [--system DIR]
      the system on a held-out split (${doc}): a Markdown table, and with --json every figure and answer;
      configs: ${CONFIGS.join(', ')}`,
    run: async (a) => {
      // settings such as the latent length are chosen on validation; the reported table is on test
      const split = oneOf('split', a.split, ['test', 'validation'] as const) ?? 'test';
      const limit = int('limit', a.limit, 0);
      const offset = int('offset', a.offset, 0) ?? 0;
      const latentSteps = int('latent_steps', a.latent_steps, 1);
      const configs = a.configs
        ?.split(',')
        .map((c) => c.trim())
        .filter(Boolean);
      const bad = configs?.find((c) => !(CONFIGS as readonly string[]).includes(c));
      if (bad) throw new UsageError(`--configs: unknown '${bad}'; choose from ${CONFIGS.join(', ')}`);
      const backend = await openBackend(a.backend);
      const rows = target.rows(split).slice(offset, limit === undefined ? undefined : offset + limit);
      const t0 = performance.now();
      const results = await evalTiny({
        target,
        backend,
        rows,
        configs: configs as EvalConfig[] | undefined,
        latentSteps,
        systemDir: a.system,
        onRow: (c, i) => {
          if ((i + 1) % 50 === 0) process.stderr.write(`${c}: ${i + 1}/${rows.length}\n`);
        },
      });
      process.stdout.write(`${markdownTable(results, backend.name, split)}\n`);
      const m = latentSteps ?? defaultLatentSteps(getStyle(target.style));
      process.stdout.write(`(latent steps m = ${m}; ${((performance.now() - t0) / 1000).toFixed(0)} s in all)\n`);
      if (a.json) await writeFile(a.json, json({ backend: backend.name, split, latentSteps: m, offset, rows: rows.length, results }));
    },
  });
}
