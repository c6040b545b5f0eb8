/**
 * `npm run bench:gpu -- --realsize`: bench:realsize's table on the machine's GPU, one command. This is the plan:
 * the arguments bench/realsize.ts gets. On a GPU the engines that matter are the ones Dawn puts on it in Node (ours
 * and transformers.js' WebGPU EP); the issue's prompt lengths, a few reps, and the released models (the peer skips
 * the families its export does not cover). --quick: one model, one short prompt, for a CPU adapter or a first look.
 */
import { NODE_GPU_ENGINES, parseEngines } from './engines';
import { REALSIZE_MODELS, realsizeModel } from './models';

export interface RealsizeGpuOptions {
  quick?: boolean;
  models?: string;
  engines?: string;
  prompts?: string;
  reps?: string;
  doc?: string;
}

const positiveInts = (flag: string, v: string): string => {
  const xs = v.split(',').map((s) => Number(s.trim()));
  if (!xs.length || xs.some((x) => !Number.isInteger(x) || x < 1)) {
    throw new Error(`${flag} ${v}: expected positive integers, comma-separated`);
  }
  return xs.join(',');
};

/** The argv of bench/realsize.ts for `o` (names and numbers checked here, so that a typo fails before any model loads). */
export function realsizeGpuArgs(o: RealsizeGpuOptions): string[] {
  const models = (o.models ?? (o.quick ? 'Qwen3-0.6B' : REALSIZE_MODELS.map((m) => m.name).join(',')))
    .split(',').map((s) => realsizeModel(s.trim()).name);
  const engines = parseEngines(o.engines ?? NODE_GPU_ENGINES.join(','));
  const prompts = positiveInts('--prompts', o.prompts ?? (o.quick ? '16' : '128,512'));
  const reps = positiveInts('--reps', o.reps ?? (o.quick ? '1' : '3'));
  const args = [
    '--models', models.join(','), '--engines', engines.join(','), '--prompts', prompts,
    '--new', o.quick ? '4' : '64', '--latent', o.quick ? '2' : '16', '--reps', reps,
  ];
  if (o.doc) args.push('--doc', o.doc);
  return args;
}
