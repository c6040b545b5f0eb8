/**
 * The peer comparison itself, for the page (src/ui/peer.ts, headless Chromium or anyone's browser) and for
 * Node (bench/peer-node.ts, Dawn): our engine and transformers.js on the same models, prompt ids and adapter.
 * Each model is first run once per engine untimed (pipelines compile; these greedy ids are the check), then
 * `reps` interleaved rounds (ours as committed, ours on the export's f32 weights, theirs); medians reported.
 */
import type { PreTrainedModel } from '@huggingface/transformers';
import { Tensor as TjsTensor } from '@huggingface/transformers';
import { RmasError } from '../errors';
import { type Decoder, generate } from '../model';
import { median } from '../util/stats';

/** transformers.js (ONNX Runtime) failed to load or run a model on this adapter. */
export class PeerEngineFailed extends RmasError {
  constructor(message: string) { super('PeerEngineFailed', message); }
}

export interface PeerOptions {
  /** Names under models/tiny (their exports under .cache/peer). */
  models: string[];
  /** Decode steps timed, after the first token (which the prefill produces). */
  tokens: number;
  /** Timed rounds; 0 runs the token check only. */
  reps: number;
  prompt: string;
}

export const PEER_DEFAULTS: PeerOptions = { models: ['qwen3-tiny', 'llama-tiny'], tokens: 64, reps: 3, prompt: 'Once upon a time' };

export type EngineName = 'ours' | 'transformers.js';
export const THEIRS = 'transformers.js fp32';

export interface PeerRow {
  engine: EngineName;
  /** Where it ran: 'Chromium · SwiftShader', 'Node · llvmpipe …'. */
  adapter: string;
  model: string;
  weights: string;
  /** Medians over reps. */
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
  /** Our rows: ours over theirs on the same model and adapter; null on theirs. */
  prefillRatio: number | null;
  decodeRatio: number | null;
  runs: { prefillTokensPerSec: number; decodeTokensPerSec: number }[];
}

export interface PeerCheck {
  adapter: string;
  model: string;
  promptIds: number[];
  /** Greedy ids of each engine's untimed run, 1 + tokens of them. */
  tokens: Record<string, number[]>;
  /** Every engine produced the same ids, and every timed run repeated its untimed run's ids. */
  equal: boolean;
  /** First index where a row differs from transformers.js (or a timed run from its first), or -1. */
  firstDiff: number;
}

export interface PeerReport {
  adapter: string;
  isFallbackAdapter: boolean;
  runtime: string;
  options: PeerOptions;
  rows: PeerRow[];
  checks: PeerCheck[];
  seconds: number;
}

export interface Timed { ids: number[]; prefillTokensPerSec: number; decodeTokensPerSec: number }

export interface Runner {
  key: string;
  engine: EngineName;
  weights: string;
  run(ids: number[], tokens: number): Promise<Timed>;
  dispose(): Promise<void>;
}

/** Where the engines run: the adapter's name and how to open a model's runners (ours first, theirs last). */
export interface PeerHost {
  adapter: string;
  isFallbackAdapter: boolean;
  runtime: string;
  promptIds(model: string, prompt: string): Promise<number[]>;
  open(model: string): Promise<Runner[]>;
}

/** A loaded decoder of ours: generate() greedy, EOS off, so that every run decodes `tokens` steps. */
export function oursRunner(model: Decoder, label: string): Runner {
  const bytes = Object.entries(model.weights.bytes).sort((a, b) => b[1]! - a[1]!);
  return {
    key: `ours ${label}`, engine: 'ours', weights: bytes[0]?.[0] ?? '?',
    async run(ids, tokens) {
      const r = await generate(model, { inputIds: ids, maxNewTokens: tokens + 1, sampling: { greedy: true }, eosTokenIds: [] });
      return { ids: r.tokens, prefillTokensPerSec: r.prefillTokensPerSec, decodeTokensPerSec: r.decodeTokensPerSec };
    },
    async dispose() { model.weights.dispose(); },
  };
}

/**
 * A transformers.js causal LM: generate() greedy, EOS off, timed as ours is: prefill up to the first sampled id
 * on the CPU, decode over the ids after it (a streamer hears the prompt, then each id as it is sampled).
 */
export function transformersJsRunner(m: PreTrainedModel): Runner {
  return {
    key: THEIRS, engine: 'transformers.js', weights: 'f32',
    async run(ids, tokens) {
      const big = BigInt64Array.from(ids, BigInt);
      const stamps: number[] = [];
      let out: number[] = [];
      const streamer = { put: (v: bigint[][]) => { stamps.push(performance.now()); out = out.concat(v[0].map(Number)); }, end() {} };
      const t0 = performance.now();
      try {
        await m.generate({
          input_ids: new TjsTensor('int64', big, [1, ids.length]),
          attention_mask: new TjsTensor('int64', big.map(() => 1n), [1, ids.length]),
          max_new_tokens: tokens + 1, do_sample: false, eos_token_id: null, streamer,
        } as unknown as Parameters<PreTrainedModel['generate']>[0]);
      } catch (e) {
        throw new PeerEngineFailed(`transformers.js generate() failed: ${(e as Error).message}`);
      }
      const gen = out.slice(ids.length);
      const first = stamps[1];
      return {
        ids: gen,
        prefillTokensPerSec: (ids.length * 1000) / (first - t0),
        decodeTokensPerSec: ((gen.length - 1) * 1000) / (stamps[stamps.length - 1] - first),
      };
    },
    async dispose() { await m.dispose(); },
  };
}

/** Opens runners in order; when one fails, those already open are disposed before the error goes on. */
export async function openRunners(steps: readonly (() => Promise<Runner>)[]): Promise<Runner[]> {
  const open: Runner[] = [];
  try {
    for (const step of steps) open.push(await step());
    return open;
  } catch (e) {
    for (const r of open) await r.dispose();
    throw e;
  }
}

/** transformers.js' model loader with its failure named: PeerEngineFailed says where and why. */
export async function loadTheirs(load: () => Promise<PreTrainedModel>, where: string): Promise<Runner> {
  try {
    return transformersJsRunner(await load());
  } catch (e) {
    throw new PeerEngineFailed(`transformers.js could not load ${where}: ${(e as Error).message}`);
  }
}

function firstDiff(a: number[], b: number[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** Runs the comparison on `host`; `progress` hears each finished run, `onRow` each row as it is ready. */
export async function runPeer(
  host: PeerHost,
  opts: PeerOptions,
  progress: (msg: string) => void = () => {},
  onRow: (r: PeerRow) => void = () => {},
): Promise<PeerReport> {
  const t0 = performance.now();
  const report: PeerReport = {
    adapter: host.adapter,
    isFallbackAdapter: host.isFallbackAdapter,
    runtime: host.runtime,
    options: opts,
    rows: [],
    checks: [],
    seconds: 0,
  };
  for (const model of opts.models) {
    const ids = await host.promptIds(model, opts.prompt);
    progress(`${model}: loading`);
    const runners = await host.open(model);
    try {
      const first = new Map<string, number[]>();
      for (const e of runners) {
        first.set(e.key, (await e.run(ids, opts.tokens)).ids);
        progress(`${model}: ${e.key}: untimed run done`);
      }
      const runs = new Map<string, Timed[]>(runners.map((e) => [e.key, []]));
      let drift = -1;
      for (let i = 0; i < opts.reps; i++) {
        for (const e of runners) {
          const t = await e.run(ids, opts.tokens);
          const d = firstDiff(t.ids, first.get(e.key)!);
          if (d >= 0 && (drift < 0 || d < drift)) drift = d;
          runs.get(e.key)!.push(t);
          progress(`${model}: ${e.key}: run ${i + 1}/${opts.reps}: decode ${t.decodeTokensPerSec.toFixed(1)} tokens/s`);
        }
      }
      const ref = first.get(THEIRS)!;
      const diffs = [...first.values()]
        .map((t) => firstDiff(t, ref))
        .concat(drift)
        .filter((d) => d >= 0);
      report.checks.push({
        adapter: host.adapter,
        model,
        promptIds: ids,
        tokens: Object.fromEntries(first),
        equal: diffs.length === 0,
        firstDiff: diffs.length ? Math.min(...diffs) : -1,
      });
      if (opts.reps === 0) continue;
      const rows = runners.map((e): PeerRow => {
        const rs = runs.get(e.key)!.map((t) => ({ prefillTokensPerSec: t.prefillTokensPerSec, decodeTokensPerSec: t.decodeTokensPerSec }));
        return {
          engine: e.engine,
          adapter: host.adapter,
          model,
          weights: e.weights,
          runs: rs,
          prefillRatio: null,
          decodeRatio: null,
          prefillTokensPerSec: median(rs.map((x) => x.prefillTokensPerSec)),
          decodeTokensPerSec: median(rs.map((x) => x.decodeTokensPerSec)),
        };
      });
      const peer = rows[runners.findIndex((e) => e.key === THEIRS)];
      for (const row of rows) {
        if (row.engine !== 'ours') continue;
        row.prefillRatio = row.prefillTokensPerSec / peer.prefillTokensPerSec;
        row.decodeRatio = row.decodeTokensPerSec / peer.decodeTokensPerSec;
      }
      for (const row of rows) {
        report.rows.push(row);
        onRow(row);
      }
    } finally {
      for (const e of runners) await e.dispose();
    }
  }
  report.seconds = (performance.now() - t0) / 1000;
  return report;
}

/** "Chrome 156 · swiftshader", "Node · llvmpipe (Mesa 25.0.7)": where a row ran, short enough for a table column. */
export function adapterLabel(runtime: string, r: { vendor: string; architecture: string; description: string }): string {
  const name = (r.description || r.architecture || r.vendor || 'unknown adapter').replace(/: Mesa ([\d.]+).*/, ' (Mesa $1)');
  return `${runtime} · ${name}`;
}

/** A figure as the page and the CLI print it. */
export const fmtRate = (v: number | null): string => (v === null || !Number.isFinite(v) ? '–' : v >= 100 ? v.toFixed(0) : v.toPrecision(3));
export const fmtRatio = (v: number | null): string => (v === null || !Number.isFinite(v) ? '' : `${v.toFixed(2)}×`);

/** The table's cells, header first (the page renders them as HTML, the CLI as text). */
export function peerCells(rows: readonly PeerRow[]): string[][] {
  const head = [
    'engine',
    'adapter',
    'model',
    'weights',
    'prefill tokens/s',
    'decode tokens/s',
    'ours/theirs prefill',
    'ours/theirs decode',
  ];
  return [
    head,
    ...rows.map((r) => [
      r.engine,
      r.adapter,
      r.model,
      r.weights,
      fmtRate(r.prefillTokensPerSec),
      fmtRate(r.decodeTokensPerSec),
      fmtRatio(r.prefillRatio),
      fmtRatio(r.decodeRatio),
    ]),
  ];
}

/** One line per check: identical, or where the ids part. */
export function checkLine(c: PeerCheck): string {
  const n = c.tokens[THEIRS]?.length ?? 0;
  return c.equal
    ? `${c.adapter}: ${c.model}: greedy ids identical across engines (${n} ids)`
    : `${c.adapter}: ${c.model}: greedy ids DIFFER from index ${c.firstDiff}`;
}
