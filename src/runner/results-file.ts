/**
 * The --result_jsonl file of `rmas run`: a config line, then one record per question as it is answered, then a
 * summary. Read back on --resume: a file whose first line is not our config record is refused (it is not ours to
 * append to), a half-written last line is cut, and the settings must be the ones it was run with. A sharded run's
 * ranks write part files beside it (FILE.rank-R) that rank 0 merges at the end.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { InvalidArgument } from '../errors';
import type { EvalSummary, SampleRecord } from '../eval/evaluate';

/** The settings a resumed file must share with the run that continues it (UNCHECKED ones excepted). */
export type RunConfig = Record<string, string | number | boolean | null>;
/** Config entries recorded but not compared on --resume: they do not change what a question gets. */
const UNCHECKED = new Set(['type', 'batch_size']);

/**
 * A result file's config, records and summary; `keep` is the byte length to cut it to when its last line was half
 * written. A file whose first whole line is not a config record of rmas run is refused: it is not ours to append to.
 */
export function readResults(path: string): {
  config: RunConfig | null; done: Map<number, SampleRecord>; keep: number | null; summary: EvalSummary | null; summaryAt: number | null;
} {
  const bytes = readFileSync(path);
  // counted in bytes (the text may hold bytes that are not UTF-8, whose decoded length differs)
  const cut = bytes.lastIndexOf(0x0a);
  let keep: number | null = null;
  if (cut !== bytes.length - 1) {
    // a run stopped in the middle of a line: the partial record is dropped and its question asked again
    keep = cut + 1;
  }
  const raw = bytes.subarray(0, cut + 1).toString('utf8');
  const lineBytes: number[] = [];
  let from = 0;
  for (let i = 0; i <= cut; i++) if (bytes[i] === 0x0a) { lineBytes.push(i + 1 - from); from = i + 1; }
  let config: RunConfig | null = null;
  let summary: EvalSummary | null = null;
  const done = new Map<number, SampleRecord>();
  const notOurs = (why: string) =>
    new InvalidArgument(`${path}: ${why}; it is not a result file of rmas run: name another --result_jsonl (nothing was changed)`);
  let summaryAt: number | null = null;
  let offset = 0;
  raw.split('\n').forEach((line, i) => {
    const at = offset;
    offset += lineBytes[i] ?? 0;
    if (!line.trim()) return;
    if (summaryAt !== null) throw notOurs(`line ${i + 1} follows the summary record`);
    let rec: { type?: string; sample_idx?: unknown };
    try {
      rec = JSON.parse(line) as { type?: string };
    } catch {
      throw notOurs(`line ${i + 1} is not JSON`);
    }
    if (typeof rec !== 'object' || rec === null || Array.isArray(rec)) throw notOurs(`line ${i + 1} is not a JSON object`);
    if (i === 0 && (rec.type !== 'config' || typeof (rec as RunConfig).style !== 'string'))
      throw notOurs('its first line is not the config record rmas run writes');
    if (rec.type === 'config') {
      const odd = Object.entries(rec).find(([, v]) => v !== null && typeof v === 'object');
      if (odd) throw notOurs(`line ${i + 1}: the config's ${odd[0]} is not a plain value`);
      config = rec as RunConfig;
    } else if (rec.type === 'sample' && Number.isInteger(rec.sample_idx)) {
      const r = rec as Partial<SampleRecord>;
      if (!Array.isArray(r.rollouts) || !r.rollouts.every((x) => typeof x === 'object' && x !== null))
        throw notOurs(`line ${i + 1}: the record of question ${r.sample_idx} has no rollouts list`);
      done.set(rec.sample_idx as number, rec as SampleRecord);
    }
    else if (rec.type === 'summary') {
      summary = rec as EvalSummary;
      summaryAt = at;
    }
    else throw notOurs(`line ${i + 1} is neither a config, a sample nor a summary record`);
  });
  return { config, done, keep, summary, summaryAt };
}

/** The part files of a sharded run of `file` (one per rank: `FILE.rank-R`) that this process can see. */
export function partFiles(file: string): string[] {
  const dir = dirname(file);
  const prefix = `${basename(file)}.rank-`;
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((n) => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length))).map((n) => join(dir, n)).sort();
}

/** The settings a record file was run with must be this run's (UNCHECKED ones excepted). */
export function checkConfig(file: string, was: RunConfig | null, now: RunConfig) {
  for (const [key, v] of Object.entries(was ?? {})) {
    if (!UNCHECKED.has(key) && v !== now[key]) {
      throw new InvalidArgument(
        `--resume ${file}: it was run with ${key} = ${JSON.stringify(v)}, this run has ${JSON.stringify(now[key])}; use the same settings (the file was not changed)`,
      );
    }
  }
}
