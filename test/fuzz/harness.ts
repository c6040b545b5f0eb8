/**
 * The fuzzing harness. A target (test/fuzz/targets/*.ts) names a reader of outside bytes, its valid seed inputs,
 * its truncations and its mutations; the harness runs N deterministic cases of it in a worker thread and checks
 * the property for every case:
 *
 *   the reader returns (a result the target finds consistent; the seeds' own result for an input equal to a
 *   seed) or throws one of our named errors (RmasError) whose message names the file;
 *   never another exception, a hang (each case bounded: the worker is terminated and restarted after the
 *   next one), an allocation larger than the input justifies (typed arrays and ArrayBuffers are counted as
 *   they are made, and one over the limit is refused before it exists; the worker's heap is capped; retained
 *   memory is checked after a GC every 100 cases), a file written or removed outside the case's own folder, or
 *   a process spawned, a native module loaded or code compiled from a string (eval, Function).
 *
 * Case i of a target is reproduced from (target, FUZZ_SEED, i) alone: cases 0..s-1 are the seeds as they are,
 * then come the truncations of every seed at each structural boundary, then random stacks of 1-3 mutations
 * from Rng(hash(target, seed, i)). Environment: FUZZ_CASES (cases per reader), FUZZ_SCALE (a multiple of the
 * default counts), FUZZ_SEED, FUZZ_TIME_S (a per-reader time box: the run stops after the case that passes it;
 * 40 s by default, none when FUZZ_CASES or FUZZ_SCALE is set), FUZZ_ONLY=i (one case, with its detail),
 * FUZZ_REPORT (a file each reader's row is appended to, as JSON). A failing input is saved under
 * .cache/fuzz-failures/<reader>/<case>/.
 */
import { appendFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Rng } from '../../src/util/rng';

/** What a target's run() gets: the names a named error may use for the input, and a folder of its own. */
export interface CaseContext {
  /** A folder only this case writes to (made empty for it); writes elsewhere are violations. */
  dir: string;
  /** True when the input is one of the seeds, unchanged. */
  pristine: boolean;
}

/** A reader under test, as the worker sees it. `I` is the target's own input type (bytes, a set of files, pages). */
export interface FuzzTarget<I> {
  /** Row name in the table, e.g. 'safetensors'. */
  name: string;
  /** Valid inputs, made as the tests make them (fixtures, writers, the tiny models). */
  seeds(): Promise<I[]> | I[];
  /** Cuts of a seed at each structural boundary (field starts and ends, entry limits, token boundaries). */
  truncations?(seed: I): I[];
  /** One structural or byte mutation; the harness stacks 1-3 of them. */
  mutate(rng: Rng, input: I): I | Promise<I>;
  /** Names of the input (file names, paths, labels), one of which a named error's message must contain. */
  labels(input: I, ctx: CaseContext): string[];
  /** Input size in bytes, which bounds what the reader may allocate. */
  size(input: I): number;
  /** A key that is equal for equal inputs (a cheap hash), to find a mutation that changed nothing. */
  key(input: I): string;
  /** Reads the input with the reader; returns a digest of the result, or throws. Throw PropertyViolation for a wrong result. */
  run(input: I, ctx: CaseContext): Promise<string> | string;
  /** The input's files, to save a failing case. */
  files(input: I): Record<string, Uint8Array>;
  /** Multiple of the input size a single allocation may reach (default 64; plus 8 MB). */
  allocFactor?: number;
  /**
   * Crashes already known in readers this suite may not change yet (the TODOs listed in the test file), as a
   * failure kind and a pattern of its detail: counted apart as `known`, not as failures.
   */
  known?: readonly { kind: FailureKind; detail: RegExp; todo: string }[];
}

/** A result that breaks the target's own check (lengths that disagree, a global outside the allowlist accepted, ...). */
export class PropertyViolation extends Error {
  override name = 'PropertyViolation';
}

export type FailureKind = 'uncaught' | 'unnamed' | 'wrong-result' | 'seed-rejected' | 'hang' | 'crash' | 'alloc' | 'fs' | 'exec' | 'leak';

export interface Failure {
  case: number;
  kind: FailureKind;
  detail: string;
}

export interface FuzzReport {
  reader: string;
  cases: number;
  /** Cases that read to a result, and those refused with a named error. */
  ok: number;
  refused: number;
  failures: Failure[];
  /** Failures matched by the target's `known` list (crashes left to another change, with a TODO). */
  known: Failure[];
  ms: number;
  maxCaseMs: number;
  /** True when the time box ended the run before the last case. */
  boxed: boolean;
}

/** Messages from the worker. */
export type WorkerMessage =
  | { type: 'ready'; name: string; total: number; known: { kind: FailureKind; detail: string }[] }
  | { type: 'case'; i: number; outcome: 'ok' | 'refused' | 'failed'; ms: number; failure?: Failure; known?: boolean }
  | { type: 'done' };

export interface FuzzOptions {
  /** Module that exports the target (a path relative to test/fuzz/targets, or absolute). */
  module: string;
  /** Export name of the target in that module. */
  target: string;
  cases: number;
  seed?: number;
  /** Stop after the case that ends past this many ms (the cases run are a prefix of the sequence). */
  timeBoxMs?: number;
  /** A case that takes longer is a hang (default 10 s: one tokenizer load takes ~50 ms on 2 cores). */
  caseTimeoutMs?: number;
  only?: number;
}

const env = (k: string) => process.env[k];
const HERE = import.meta.dirname;
const ROOT = resolve(HERE, '../..');

/** The case count for a reader whose default is `n`, after FUZZ_CASES / FUZZ_SCALE. */
export function caseCount(n: number): number {
  if (env('FUZZ_CASES')) return Number(env('FUZZ_CASES'));
  return Math.round(n * Number(env('FUZZ_SCALE') ?? 1));
}

/** The long run (FUZZ_CASES or FUZZ_SCALE set) has no time box unless FUZZ_TIME_S gives one. */
export function timeBoxMs(): number {
  if (env('FUZZ_TIME_S')) return Number(env('FUZZ_TIME_S')) * 1000;
  return env('FUZZ_CASES') || env('FUZZ_SCALE') ? Infinity : 40_000;
}

/** Runs the cases of one target in worker threads (a fresh one after each hang or crash) and gathers the report. */
export async function runFuzz(o: FuzzOptions): Promise<FuzzReport> {
  const seed = o.seed ?? Number(env('FUZZ_SEED') ?? 1);
  const caseTimeout = o.caseTimeoutMs ?? 10_000;
  const report: FuzzReport = { reader: o.target, cases: 0, ok: 0, refused: 0, failures: [], known: [], ms: 0, maxCaseMs: 0, boxed: false };
  const t0 = performance.now();
  const deadline = t0 + (o.timeBoxMs ?? Infinity);
  let next = o.only ?? 0;
  const end = o.only !== undefined ? o.only + 1 : o.cases;
  let restarts = 0;
  let started = false;
  const base = mkdtempSync(join(tmpdir(), `rmas-fuzz-${o.target}-`));
  // the target's known failures, for what the worker cannot report itself (a hang, a crash)
  let known: { kind: FailureKind; detail: RegExp }[] = [];
  while (next < end) {
    const from = next;
    const result = await new Promise<'done' | 'boxed' | { lost: Failure }>((done) => {
      const worker = startWorker({ ...o, seed, from, to: end, base, verbose: o.only !== undefined });
      let timer: NodeJS.Timeout | undefined;
      let settled = false;
      const finish = (r: 'done' | 'boxed' | { lost: Failure }) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        void worker.terminate();
        done(r);
      };
      // the first case also waits for the worker's imports (transformers.js takes seconds)
      const arm = (ms: number) => {
        clearTimeout(timer);
        timer = setTimeout(() => finish({ lost: { case: next, kind: 'hang', detail: `no result after ${ms} ms` } }), ms);
      };
      arm(caseTimeout + 60_000);
      worker.on('message', (m: WorkerMessage) => {
        if (m.type === 'ready') {
          started = true;
          report.reader = m.name;
          known = m.known.map((k) => ({ kind: k.kind, detail: new RegExp(k.detail) }));
          return arm(caseTimeout + 30_000);
        }
        if (m.type === 'done') return finish('done');
        report.cases++;
        report.maxCaseMs = Math.max(report.maxCaseMs, m.ms);
        if (m.outcome === 'ok') report.ok++;
        else if (m.outcome === 'refused') report.refused++;
        else (m.known ? report.known : report.failures).push(m.failure!);
        next = m.i + 1;
        if (performance.now() > deadline && next < end) return finish('boxed');
        arm(caseTimeout);
      });
      worker.on('error', (e) => finish({ lost: { case: next, kind: 'crash', detail: `the worker died: ${e.name}: ${e.message}` } }));
      worker.on('exit', (code) => finish({ lost: { case: next, kind: 'crash', detail: `the worker exited with code ${code}` } }));
    });
    if (result === 'done') break;
    if (result === 'boxed') { report.boxed = true; break; }
    if (!started) { // the worker could not even make its seeds: nothing to restart
      report.failures.push({ ...result.lost, detail: `before the first case: ${result.lost.detail}` });
      break;
    }
    report.cases++;
    const lost = result.lost;
    (known.some((k) => k.kind === lost.kind && k.detail.test(lost.detail)) ? report.known : report.failures).push(lost);
    next = lost.case + 1;
    if (++restarts > 20) break;
  }
  rmSync(base, { recursive: true, force: true });
  report.ms = performance.now() - t0;
  return report;
}

function startWorker(data: FuzzOptions & { seed: number; from: number; to: number; base: string; verbose: boolean }): Worker {
  const require = createRequire(import.meta.url);
  const tsx = pathToFileURL(require.resolve('tsx/esm/api')).href;
  const entry = pathToFileURL(join(HERE, 'worker.ts')).href;
  const module = data.module.startsWith('/') ? data.module : join(HERE, 'targets', data.module);
  // the worker runs TypeScript through tsx: vitest's transform does not reach worker threads
  const boot = `import(${JSON.stringify(tsx)}).then(({ tsImport }) => tsImport(${JSON.stringify(entry)}, ${JSON.stringify(entry)}))`;
  return new Worker(boot, {
    eval: true,
    workerData: { ...data, module, root: ROOT },
    resourceLimits: { maxOldGenerationSizeMb: 1024, maxYoungGenerationSizeMb: 64 },
    stdout: false,
    stderr: false,
  });
}

/** One line of the table: reader, cases, failures, known, time. */
export function formatRow(r: FuzzReport): string {
  const pad = (s: string | number, n: number) => String(s).padStart(n);
  return `fuzz ${r.reader.padEnd(26)} cases ${pad(r.cases, 6)}  ok ${pad(r.ok, 6)}  refused ${pad(r.refused, 6)}  ` +
    `failures ${pad(r.failures.length, 3)}  known ${pad(r.known.length, 3)}  ${pad((r.ms / 1000).toFixed(1), 6)} s  ` +
    `slowest case ${pad(Math.round(r.maxCaseMs), 5)} ms${r.boxed ? '  (time box reached)' : ''}`;
}

/** Prints the row (and each failure), appends it to FUZZ_REPORT, and returns a summary of the failures for an assertion. */
export function logReport(r: FuzzReport): string[] {
  console.log(formatRow(r));
  const lines = r.failures.map((f) => `  ${r.reader} case ${f.case} ${f.kind}: ${f.detail}`);
  for (const l of lines.slice(0, 20)) console.log(l);
  const file = env('FUZZ_REPORT');
  if (file) {
    mkdirSync(resolve(file, '..'), { recursive: true });
    appendFileSync(file, `${JSON.stringify({ ...r, failures: r.failures.slice(0, 50), known: r.known.length })}\n`);
  }
  return lines;
}

/** A vitest timeout for a fuzz test: the time box and a minute, or a day for the long run. */
export function fuzzTimeout(): number {
  const box = timeBoxMs();
  return box === Infinity ? 24 * 3600_000 : box + 60_000;
}

/**
 * Runs `target` of `module` for `defaultCases` (scaled by the environment) and returns the failure lines, for
 * `expect(...).toEqual([])`.
 */
export async function fuzzReader(module: string, target: string, defaultCases: number): Promise<string[]> {
  const only = env('FUZZ_ONLY');
  const cases = caseCount(defaultCases);
  const r = await runFuzz({ module, target, cases, timeBoxMs: timeBoxMs(), ...(only ? { only: Number(only) } : {}) });
  return logReport(r);
}
