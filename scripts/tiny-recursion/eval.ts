/**
 * The recursion system as `build.ts eval` measures it (scripts/tiny-system/eval.ts's evalTiny over the multi-hop
 * task): the learner alone, text-MAS and RecursiveMAS at 1, 2 and 3 rounds, and the messages shuffled or zeroed
 * at 3 rounds; beside the table, each config's accuracy per hop count and the ceiling of its round count.
 */
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { UsageError } from '../../src/errors.ts';
import { hopCeiling, hopSplit, scoreHops, type HopRow } from '../../src/eval/tiny-hops.ts';
import { command, type Command, type Options } from '../../src/runner/args.ts';
import { defaultLatentSteps, getStyle, TINY_RECURSION_ROOT } from '../../src/mas/styles.ts';
import { int, json, oneOf, openBackend, s } from '../tiny-system/cli.ts';
import { CONFIGS, evalTiny, markdownTable, type ConfigResult, type EvalConfig, type TinyEvalTarget } from '../tiny-system/eval.ts';
import { ROOT } from '../tiny-system/paths.ts';
import { hopsPrompt } from './agents.ts';

/** The recursion system's folder in the package. */
export const TINY_RECURSION_DIR = resolve(ROOT, TINY_RECURSION_ROOT);

/**
 * The CPU kernels the recursion system is built and evaluated on: the SIMD ones (about 3× faster to train than the
 * TypeScript reference, and the runner's default, so the recorded answers are what `rmas` gives).
 */
export const RECURSION_KERNELS = 'wasm' as const;

/** The style's latent steps (3: a note's three tokens, src/eval/tiny-hops.ts). */
export const RECURSION_LATENT_STEPS = defaultLatentSteps(getStyle('tiny_recursion'));

export const RECURSION_TARGET: TinyEvalTarget<HopRow> = {
  style: 'tiny_recursion',
  dir: TINY_RECURSION_DIR,
  rows: hopSplit,
  score: scoreHops,
  alone: { role: 'learner', label: 'learner alone', prompt: (tok, row) => hopsPrompt(tok, 'learner', 'first', row.question, '') },
  configs: ['alone', 'text1', 'text2', 'text3', 'latent1', 'latent2', 'latent3', 'shuffled3', 'zeroed3', 'fbzeroed3', 'fbremoved3'],
};

/** Per config: accuracy on the rows of each hop count, and the ceiling of its round count on these rows. */
export function byHops(results: readonly ConfigResult[], rows: readonly HopRow[]) {
  return results.map((r) => {
    const rounds = r.config === 'alone' ? 0 : Number(r.config.slice(-1));
    const hops = Object.fromEntries(
      [1, 3, 5].map((h) => {
        const idx = rows.flatMap((row, i) => (row.hops === h ? [i] : []));
        return [h, { correct: idx.filter((i) => r.ok[i]).length, total: idx.length }];
      }),
    );
    return { config: r.config, accuracy: r.accuracy, ceiling: rounds ? hopCeiling(rows, rounds) : 0, hops };
  });
}

export function hopsTable(results: readonly ConfigResult[], rows: readonly HopRow[]): string {
  const pct = (a: number, b: number) => (b ? `${((100 * a) / b).toFixed(1)}%` : '-');
  return [
    '| system | 1 hop | 3 hops | 5 hops | ceiling of its rounds | share of the ceiling |',
    '|---|---:|---:|---:|---:|---:|',
    ...byHops(results, rows).map((b, i) => {
      const h = b.hops as Record<number, { correct: number; total: number }>;
      const cells = [1, 3, 5].map((k) => `${pct(h[k]!.correct, h[k]!.total)} (${h[k]!.correct}/${h[k]!.total})`);
      const share = b.ceiling ? `${((100 * b.accuracy) / b.ceiling).toFixed(1)}%` : '-';
      return `| ${results[i]!.label} | ${cells.join(' | ')} | ${b.ceiling ? `${(100 * b.ceiling).toFixed(1)}%` : '-'} | ${share} |`;
    }),
  ].join('\n');
}

export const recursionEvalCommand: Command<Options, void> = command({
  options: { split: s, limit: s, latent_steps: s, backend: s, configs: s, json: s, system: s },
  usage: `  build.ts eval [--split test|validation] [--limit N] [--latent_steps M] [--backend cpu|webgpu] [--configs a,b,...]
                [--json FILE] [--system DIR]
      the system on a held-out split: the table, the accuracy per hop count, and with --json every answer`,
  run: async (a) => {
    const split = oneOf('split', a.split, ['test', 'validation'] as const) ?? 'test';
    const configs = a.configs?.split(',').map((c) => c.trim()).filter(Boolean);
    const bad = configs?.find((c) => !(CONFIGS as readonly string[]).includes(c));
    if (bad) throw new UsageError(`--configs: unknown '${bad}'; choose from ${CONFIGS.join(', ')}`);
    const backend = await openBackend(a.backend);
    const rows = hopSplit(split).slice(0, int('limit', a.limit, 1));
    const latentSteps = int('latent_steps', a.latent_steps, 1) ?? RECURSION_LATENT_STEPS;
    const t0 = performance.now();
    const results = await evalTiny({
      target: RECURSION_TARGET,
      backend,
      rows,
      configs: configs as EvalConfig[] | undefined,
      latentSteps,
      systemDir: a.system,
    });
    process.stdout.write(`${markdownTable(results, backend.name, split)}\n\n${hopsTable(results, rows)}\n`);
    const m = latentSteps;
    process.stdout.write(`(latent steps m = ${m}; ${((performance.now() - t0) / 1000).toFixed(0)} s in all)\n`);
    if (a.json)
      await writeFile(
        a.json,
        json({ backend: backend.name, split, latentSteps: m, rows: rows.length, byHops: byHops(results, rows), results }),
      );
  },
});
