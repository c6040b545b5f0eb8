/**
 * `npm run tiny:eval`: the tiny system (style tiny_sequential, models/tiny/system) on the held-out test
 * split of src/eval/tiny-task.ts, greedy, for
 *   - the solver alone (its own prompt with the refined-plan line left empty),
 *   - the text-MAS baseline (the same three agents passing text, rounds as given),
 *   - RecursiveMAS (latent messages through the trained links) at 1, 2 and 3 rounds;
 * with accuracy, mean seconds and generated tokens per question and latent steps. Prints a Markdown
 * table (the one in README.md) and, with --json FILE, writes every figure and each row's answer.
 *
 *   npx tsx models/tiny/eval.ts [--split test|validation] [--limit N] [--offset K] [--latent_steps M] [--backend cpu|webgpu]
 *                               [--configs solver,text1,latent1,...] [--json FILE] [--system DIR]
 */
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { InvalidArgument } from '../../src/errors.ts';
import { ask } from '../../src/mas/run.ts';
import { loadSystem, type MasSystem } from '../../src/mas/system.ts';
import { defaultLatentSteps, getStyle } from '../../src/mas/styles.ts';
import { generate } from '../../src/model/generate.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { scoreAnswer, taskSplit, type TaskRow } from '../../src/eval/tiny-task.ts';
import { rolePrompt } from './train-agents.ts';

export const TINY_SYSTEM_DIR = resolve(import.meta.dirname, 'system');
export const CONFIGS = ['solver', 'text1', 'text2', 'text3', 'latent1', 'latent2', 'latent3'] as const;
export type EvalConfig = (typeof CONFIGS)[number];
export const DEFAULT_CONFIGS: readonly EvalConfig[] = ['solver', 'text1', 'text3', 'latent1', 'latent2', 'latent3'];
/** Longest answer any agent writes here; the task's targets are under 40 tokens. */
export const TINY_MAX_NEW_TOKENS = 64;

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

export interface EvalOptions {
  backend?: Backend;
  rows?: readonly TaskRow[];
  configs?: readonly EvalConfig[];
  latentSteps?: number;
  /** Folder of the system (default models/tiny/system). */
  systemDir?: string;
  onRow?: (config: EvalConfig, index: number, ok: boolean) => void;
}

const LABELS: Record<EvalConfig, string> = {
  solver: 'solver alone', text1: 'text-MAS, 1 round', text2: 'text-MAS, 2 rounds', text3: 'text-MAS, 3 rounds',
  latent1: 'RecursiveMAS, 1 round', latent2: 'RecursiveMAS, 2 rounds', latent3: 'RecursiveMAS, 3 rounds',
};

async function solverAlone(system: MasSystem, row: TaskRow): Promise<{ text: string; tokens: number }> {
  const solver = system.agents.get('solver')!;
  const tok = solver.tokenizer;
  const ids = tok.encode(rolePrompt(tok, 'solver', 'first', row.question, ''), { addSpecialTokens: false });
  const eos = [tok.idOf('<|im_end|>'), tok.idOf('<|endoftext|>')].filter((x): x is number => typeof x === 'number');
  const r = await generate(solver.decoder, { inputIds: ids, maxNewTokens: TINY_MAX_NEW_TOKENS, sampling: { greedy: true }, eosTokenIds: eos });
  return { text: tok.decode(r.tokens, { skipSpecialTokens: true }), tokens: r.tokens.length };
}

/** Runs every config over the rows; one system load per mode. */
export async function evalTiny(opts: EvalOptions = {}): Promise<ConfigResult[]> {
  const backend = opts.backend ?? new CpuBackend('f32');
  const rows = opts.rows ?? taskSplit('test');
  const configs = opts.configs ?? DEFAULT_CONFIGS;
  const m = opts.latentSteps ?? defaultLatentSteps(getStyle('tiny_sequential'));
  const root = resolve(opts.systemDir ?? TINY_SYSTEM_DIR);
  const results: ConfigResult[] = [];
  const systems = new Map<'latent' | 'text', MasSystem>();
  const systemFor = async (mode: 'latent' | 'text') => {
    let s = systems.get(mode);
    if (!s) {
      s = await loadSystem('tiny_sequential', { backend, embeddedRoot: root, task: 'math', links: mode === 'latent' });
      systems.set(mode, s);
    }
    return s;
  };
  try {
    for (const config of configs) {
      const mode = config.startsWith('latent') ? 'latent' : 'text';
      const system = await systemFor(mode);
      const rounds = config === 'solver' ? 0 : Number(config.slice(-1));
      let correct = 0;
      let seconds = 0;
      let tokens = 0;
      let latent = 0;
      const answers: string[] = [];
      const okRows: boolean[] = [];
      for (const [i, row] of rows.entries()) {
        const t0 = performance.now();
        let text: string;
        if (config === 'solver') {
          const r = await solverAlone(system, row);
          text = r.text;
          tokens += r.tokens;
        } else {
          const r = await ask(system, {
            question: row.question, task: 'math', rounds, latentSteps: m, mode, sampling: { greedy: true },
            maxNewTokens: TINY_MAX_NEW_TOKENS,
          });
          text = r.text;
          tokens += r.tokens;
          latent += r.latentSteps;
        }
        seconds += (performance.now() - t0) / 1000;
        const ok = scoreAnswer(text, row);
        if (ok) correct++;
        answers.push(text);
        okRows.push(ok);
        opts.onRow?.(config, i, ok);
      }
      const n = rows.length;
      results.push({
        config, label: LABELS[config], correct, total: n, accuracy: n ? correct / n : 0,
        seconds: n ? seconds / n : 0, tokens: n ? tokens / n : 0, latentSteps: n ? latent / n : 0, answers, ok: okRows,
      });
    }
  } finally {
    for (const s of systems.values()) s.dispose();
  }
  return results;
}

/** The README table. */
export function markdownTable(results: readonly ConfigResult[], backendName: string, split = 'test'): string {
  const lines = [
    `| system (greedy, ${results[0]?.total ?? 0} ${split} questions, ${backendName}) | accuracy | s / question | generated tokens / question | latent steps / question |`,
    '|---|---:|---:|---:|---:|',
    ...results.map((r) =>
      `| ${r.label} | ${(100 * r.accuracy).toFixed(1)}% (${r.correct}/${r.total}) | ${r.seconds.toFixed(2)} | ${r.tokens.toFixed(1)} | ${r.latentSteps.toFixed(0)} |`),
  ];
  return lines.join('\n');
}

function parseArgs(argv: string[]) {
  const usage = 'usage: tsx models/tiny/eval.ts [--split test|validation] [--limit N] [--offset K] [--latent_steps M] [--backend cpu|webgpu] [--configs a,b,...] [--json FILE] [--system DIR]';
  const a: { limit?: number; offset?: number; latent_steps?: number; backend?: string; configs?: EvalConfig[]; json?: string; system?: string; split?: 'test' | 'validation' } = {};
  for (let i = 0; i < argv.length; i++) {
    const [k, inline] = argv[i]!.split('=', 2) as [string, string | undefined];
    const v = inline ?? argv[++i];
    if (v === undefined) throw new InvalidArgument(`${k} needs a value; ${usage}`);
    if (k === '--limit' || k === '--offset' || k === '--latent_steps') {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 0) throw new InvalidArgument(`${k} must be a non-negative integer, got ${v}; ${usage}`);
      a[k.slice(2) as 'limit' | 'offset' | 'latent_steps'] = n;
    } else if (k === '--backend') a.backend = v;
    else if (k === '--json') a.json = v;
    else if (k === '--system') a.system = v;
    else if (k === '--split') {
      // settings such as the latent length are chosen on validation; the reported table is on test
      if (v !== 'test' && v !== 'validation') throw new InvalidArgument(`--split ${v}: expected test or validation`);
      a.split = v;
    } else if (k === '--configs') {
      const list = v.split(',').map((s) => s.trim()).filter(Boolean);
      const bad = list.find((c) => !(CONFIGS as readonly string[]).includes(c));
      if (bad) throw new InvalidArgument(`--configs: unknown '${bad}'; choose from ${CONFIGS.join(', ')}`);
      a.configs = list as EvalConfig[];
    } else throw new InvalidArgument(`unknown argument ${k}; ${usage}`);
  }
  if (a.backend !== undefined && a.backend !== 'cpu' && a.backend !== 'webgpu') throw new InvalidArgument(`--backend ${a.backend}: expected cpu or webgpu`);
  return a;
}

async function main(argv: string[]) {
  const a = parseArgs(argv);
  let backend: Backend = new CpuBackend('f32');
  if (a.backend === 'webgpu') backend = await (await import('../../src/tensor/webgpu.ts')).WebGpuBackend.create();
  const split = a.split ?? 'test';
  const all = taskSplit(split);
  const offset = a.offset ?? 0;
  const rows = all.slice(offset, a.limit === undefined ? undefined : offset + a.limit);
  const t0 = performance.now();
  const results = await evalTiny({
    backend, rows, configs: a.configs, latentSteps: a.latent_steps, systemDir: a.system,
    onRow: (c, i) => { if ((i + 1) % 50 === 0) process.stderr.write(`${c}: ${i + 1}/${rows.length}\n`); },
  });
  process.stdout.write(`${markdownTable(results, backend.name, split)}\n`);
  const m = a.latent_steps ?? defaultLatentSteps(getStyle('tiny_sequential'));
  process.stdout.write(`(latent steps m = ${m}; ${((performance.now() - t0) / 1000).toFixed(0)} s in all)\n`);
  if (a.json) {
    await writeFile(a.json, `${JSON.stringify({ backend: backend.name, split, latentSteps: m, offset, rows: rows.length, results }, null, 2)}\n`);
  }
  process.exit(0);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  await main(process.argv.slice(2));
}
