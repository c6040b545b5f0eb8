/**
 * `npm run tiny:eval`: the tiny system (style tiny_sequential, models/tiny/system) on the held-out test
 * split of its task (src/eval/tiny-task.ts), greedy, for
 *   - the solver alone (its own prompt with the refined-plan line left empty),
 *   - the text-MAS baseline (the same three agents passing text, rounds as given),
 *   - RecursiveMAS (latent messages through the trained links) at 1, 2 and 3 rounds;
 * with accuracy, mean seconds and generated tokens per question and latent steps. Prints a Markdown
 * table (the one in README.md) and, with --json FILE, writes every figure and each row's answer.
 *
 *   npx tsx scripts/tiny-system/build.ts eval [--split test|validation] [--limit N] [--offset K] [--latent_steps M]
 *                                             [--backend cpu|webgpu] [--configs solver,text1,latent1,...] [--json FILE] [--system DIR]
 */
import { resolve } from 'node:path';
import { ask } from '../../src/mas/run.ts';
import { loadSystem, type MasSystem } from '../../src/mas/system.ts';
import { defaultLatentSteps, getStyle } from '../../src/mas/styles.ts';
import { generate } from '../../src/model/generate.ts';
import type { Backend } from '../../src/tensor/backend.ts';
import { CpuBackend } from '../../src/tensor/cpu.ts';
import { scoreAnswer, taskSplit, type TaskRow } from '../../src/eval/tiny-task.ts';
import { TINY_SYSTEM_DIR } from './paths.ts';
import { rolePrompt } from './train-agents.ts';

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
  const r = await generate(solver.decoder, {
    inputIds: ids,
    maxNewTokens: TINY_MAX_NEW_TOKENS,
    sampling: { greedy: true },
    eosTokenIds: eos,
  });
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
    ...results.map(
      (r) =>
        `| ${r.label} | ${(100 * r.accuracy).toFixed(1)}% (${r.correct}/${r.total}) | ${r.seconds.toFixed(2)} | ${r.tokens.toFixed(1)} | ${r.latentSteps.toFixed(0)} |`,
    ),
  ];
  return lines.join('\n');
}
