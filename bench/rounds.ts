/**
 * `npx tsx bench/rounds.ts [--backends cpu,webgpu] [--rows 24] [--reps 5] [--system DIR]`
 * The recursion system (models/tiny/recursion) in wall time: RecursiveMAS (latent hand-offs) beside text-MAS (the
 * agents write their notes as text) at r = 1, 2, 3 rounds, on the same test rows, greedy, one backend per process
 * section. Per backend the system is loaded once and both modes are warmed; then each rep times every round count
 * in both modes, the order of the two modes alternating from rep to rep, so that a change of machine load falls on
 * both. Prints, per backend and r, seconds per question (median and range over reps), text/latent (the median of
 * each rep's ratio: above 1 means the latent system is faster), generated tokens and, where the backend counts
 * them, dispatches and readbacks per question; appends a JSON line per row to bench/results/rounds.jsonl.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { lavapipeEnv } from '../scripts/lavapipe-env.js';
import { median } from '../src/util/stats';

const env = lavapipeEnv();
if (env !== process.env) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}

const { hopSplit } = await import('../src/eval/tiny-hops');
const { ask } = await import('../src/mas/ask');
const { loadSystem } = await import('../src/mas/system-folders');
const { openBackend } = await import('../scripts/tiny-system/cli');
const { TINY_RECURSION_DIR, RECURSION_LATENT_STEPS } = await import('../scripts/tiny-recursion/eval');
const { TINY_MAX_NEW_TOKENS } = await import('../scripts/tiny-system/eval');

const { values: args } = parseArgs({
  options: {
    backends: { type: 'string', default: 'cpu,webgpu' },
    rows: { type: 'string', default: '24' },
    reps: { type: 'string', default: '5' },
    system: { type: 'string', default: TINY_RECURSION_DIR },
  },
});

type Mode = 'text' | 'latent';
const ROUNDS = [1, 2, 3] as const;
const rows = hopSplit('test').slice(0, Number(args.rows));
const reps = Number(args.reps);
const lines: string[] = [
  '| backend | r | text-MAS s/question | RecursiveMAS s/question | text/latent | tokens text, latent | dispatches text, latent ' +
    '| readbacks text, latent |',
  '|---|---:|---:|---:|---:|---:|---:|---:|',
];
mkdirSync('bench/results', { recursive: true });

for (const name of args.backends.split(',')) {
  const backend = await openBackend(name);
  const system = await loadSystem('tiny_recursion', { backend, embeddedRoot: args.system, task: 'math' });
  /** One pass over the rows: seconds per question, tokens per question, dispatches per question (null: not counted). */
  const pass = async (mode: Mode, rounds: number) => {
    const before = backend.counters?.();
    let tokens = 0;
    const t0 = performance.now();
    for (const row of rows) {
      const r = await ask(system, {
        question: row.question, task: 'math', rounds, latentSteps: RECURSION_LATENT_STEPS, mode,
        sampling: { greedy: true }, maxNewTokens: TINY_MAX_NEW_TOKENS, answerRetry: false,
      });
      tokens += r.tokens;
    }
    await backend.sync();
    const seconds = (performance.now() - t0) / 1000 / rows.length;
    const after = backend.counters?.();
    const per = (k: 'dispatches' | 'readbacks') => (before && after ? (after[k] - before[k]) / rows.length : null);
    return { seconds, tokens: tokens / rows.length, dispatches: per('dispatches'), readbacks: per('readbacks') };
  };
  try {
    for (const r of ROUNDS) for (const mode of ['text', 'latent'] as const) await pass(mode, r); // warm-up
    const got = new Map<string, Awaited<ReturnType<typeof pass>>[]>();
    for (let rep = 0; rep < reps; rep++)
      for (const r of ROUNDS) {
        const order: Mode[] = rep % 2 ? ['latent', 'text'] : ['text', 'latent'];
        for (const mode of order) {
          const k = `${mode}${r}`;
          got.set(k, [...(got.get(k) ?? []), await pass(mode, r)]);
        }
      }
    for (const r of ROUNDS) {
      const text = got.get(`text${r}`)!;
      const latent = got.get(`latent${r}`)!;
      const ratios = text.map((t, i) => t.seconds / latent[i]!.seconds);
      const cell = (xs: typeof text) => {
        const s = xs.map((x) => x.seconds);
        return `${median(s).toFixed(4)} (${Math.min(...s).toFixed(4)}–${Math.max(...s).toFixed(4)})`;
      };
      const both = (k: 'dispatches' | 'readbacks') =>
        text[0]![k] === null ? '-' : `${text[0]![k]!.toFixed(0)}, ${latent[0]![k]!.toFixed(0)}`;
      const ratio = `${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`;
      const tokens = `${text[0]!.tokens.toFixed(1)}, ${latent[0]!.tokens.toFixed(1)}`;
      const counted = `${both('dispatches')} | ${both('readbacks')}`;
      lines.push(`| ${backend.name} | ${r} | ${cell(text)} | ${cell(latent)} | ${ratio} | ${tokens} | ${counted} |`);
      appendFileSync(
        'bench/results/rounds.jsonl',
        `${JSON.stringify({
          date: new Date().toISOString(), backend: backend.name, rounds: r, rows: rows.length, reps, load: loadavg()[0],
          text: text.map((x) => x.seconds), latent: latent.map((x) => x.seconds),
          tokens: { text: text[0]!.tokens, latent: latent[0]!.tokens },
          dispatches: { text: text[0]!.dispatches, latent: latent[0]!.dispatches },
          readbacks: { text: text[0]!.readbacks, latent: latent[0]!.readbacks },
        })}\n`,
      );
    }
  } finally {
    system.dispose();
  }
}
process.stdout.write(`${lines.join('\n')}\n(${rows.length} test rows, ${reps} reps, load ${loadavg()[0]!.toFixed(1)} at the end)\n`);
