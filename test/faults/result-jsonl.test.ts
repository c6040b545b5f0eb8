/**
 * `rmas run --result_jsonl` under failed writes (runCmd in this process, the tiny system on the CPU backend, 3
 * questions). The file of an uninterrupted run is cut at every byte of its config line, of its last sample record
 * and of its summary (a disk that filled up mid-line), and its writes fail one at a time, each after 0, 1, half or
 * all but the newline of its bytes (ENOSPC) or before any (a write that throws EIO). After each, `--resume`
 * continues the file to the uninterrupted run's bytes, asking again exactly the questions whose record was not
 * whole. For the many cut points the questions are answered from the uninterrupted run's records (evaluate's
 * contract: recorded ones kept, the others asked in order, onSample per answer); a few cuts and failed writes
 * are resumed with the real system, giving the same records (their timings apart).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { QuotaExceeded, StorageFailed } from '../../src/errors';
import type { SampleRecord } from '../../src/eval/evaluate';
import { taskSplit, toJsonl } from '../../src/eval/tiny-task';
import { type RunArgs, runCmd } from '../../src/runner/run-cmd';
import { CpuBackend } from '../../src/tensor/cpu';
import { Rng } from '../../src/util/rng';
import { enospc, isEnospc } from './inject';

const hook = vi.hoisted(() => ({
  /** Records by question to answer from instead of the system; the questions asked. */
  replay: null as null | Map<number, unknown>,
  asked: [] as number[],
  /** The write (writeFileSync or appendFileSync of the result file) to fail, 1-based, with how many of its bytes land first. */
  failAt: 0,
  keep: (_len: number): number | null => null,
  writes: 0,
  file: '',
}));
vi.mock(import('../../src/eval/evaluate'), async (orig) => {
  const m = await orig();
  const evaluate: typeof m.evaluate = async (system, items, opts) => {
    if (!hook.replay) return m.evaluate(system, items, opts);
    const records: SampleRecord[] = [];
    for (const item of items) {
      const old = opts.done?.get(item.index);
      if (old) {
        records.push(old);
        continue;
      }
      hook.asked.push(item.index);
      const rec = hook.replay.get(item.index) as SampleRecord;
      records.push(rec);
      await opts.onSample?.(rec, records.length - 1, items.length);
    }
    return { records, summary: m.summarize(records, opts.rollouts ?? 1) };
  };
  return { ...m, evaluate };
});
// replayed runs load the system once (and keep it): they test the file's handling, not the loading
vi.mock(import('../../src/mas/system-folders'), async (orig) => {
  const m = await orig();
  let kept: ReturnType<typeof m.loadSystem> | null = null;
  const loadSystem: typeof m.loadSystem = (name, opts) => {
    if (!hook.replay) return m.loadSystem(name, opts);
    return (kept ??= m.loadSystem(name, opts).then((s) => Object.assign(s, { dispose: () => {} })));
  };
  return { ...m, loadSystem };
});
vi.mock(import('node:fs'), async (orig) => {
  const m = await orig();
  /** Counts writes to the result file; the failing one lands `keep(len)` bytes (null: throws EIO before any). */
  const fail = (path: unknown, data: unknown, append: boolean) => {
    if (String(path) !== hook.file || ++hook.writes !== hook.failAt) return false;
    const bytes = Buffer.from(String(data));
    const n = hook.keep(bytes.length);
    if (n === null) throw Object.assign(new Error(`EIO: i/o error, write '${hook.file}'`), { code: 'EIO' });
    (append ? m.appendFileSync : m.writeFileSync)(hook.file, bytes.subarray(0, n));
    throw enospc('write', hook.file);
  };
  const appendFileSync: typeof m.appendFileSync = (p, d, o) => void (fail(p, d, true) || m.appendFileSync(p, d, o));
  const writeFileSync: typeof m.writeFileSync = (p, d, o) => void (fail(p, d, false) || m.writeFileSync(p, d, o));
  return { ...m, appendFileSync, writeFileSync, default: { ...m, appendFileSync, writeFileSync } };
});

const dir = mkdtempSync(join(tmpdir(), 'rmas-faults-jsonl-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const data = join(dir, 'rows.jsonl');
writeFileSync(data, toJsonl(taskSplit('test').slice(0, 3)));
const cpu = new CpuBackend('f32');

const run = (file: string, resume: boolean) => {
  const a: RunArgs = {
    style: 'tiny_sequential', dataset: data, greedy: true, num_recursive_rounds: '1', latent_length: '2', max_new_tokens: '12',
    result_jsonl: file, ...(resume ? { resume: true } : {}),
  };
  return runCmd(a, async () => cpu, () => {}, () => {}).then(() => null, (e: Error) => e);
};
/** The records without their timings (which differ between two real runs). */
const records = (text: string) => text.trim().split('\n').map((l) => {
  const r = JSON.parse(l) as Record<string, unknown>;
  delete r.seconds;
  delete r.seconds_mean;
  return r;
});

describe('--result_jsonl under failed writes', () => {
  afterEach(() => Object.assign(hook, { replay: null, file: '', failAt: 0 }));
  const whole = join(dir, 'whole.jsonl');
  let want = '';
  /** Byte offsets where each line starts, and the file's length. */
  let starts: number[] = [];
  let byIndex = new Map<number, unknown>();

  it('the uninterrupted run', async () => {
    expect(await run(whole, false)).toBeNull();
    want = readFileSync(whole, 'utf8');
    const lines = want.split('\n').slice(0, -1);
    expect(lines.map((l) => (JSON.parse(l) as { type: string }).type)).toEqual(['config', 'sample', 'sample', 'sample', 'summary']);
    starts = lines.reduce((a, l) => [...a, a.at(-1)! + Buffer.byteLength(l) + 1], [0]);
    byIndex = new Map(lines.slice(1, 4).map((l) => JSON.parse(l) as SampleRecord).map((r) => [r.sample_idx, r]));
    expect(Buffer.byteLength(want)).toBe(starts.at(-1));
  });

  /** The questions a resume of the file cut at `c` must ask again: those whose line is not whole. */
  const missing = (c: number) => [0, 1, 2].filter((i) => starts[i + 2]! > c);

  it('cut at every byte of the config line, the last sample record and the summary: --resume ends on the same bytes', async () => {
    hook.replay = byIndex;
    const cuts = [
      ...Array.from({ length: starts[1]! + 1 }, (_, c) => c),
      ...Array.from({ length: starts[5]! - starts[3]! }, (_, i) => starts[3]! + i),
    ];
    const file = join(dir, 'cut.jsonl');
    const bytes = Buffer.from(want);
    for (const c of cuts) {
      writeFileSync(file, bytes.subarray(0, c));
      hook.asked = [];
      const err = await run(file, true);
      expect(err, `cut at ${c}`).toBeNull();
      expect(hook.asked, `cut at ${c}`).toEqual(missing(c));
      expect(readFileSync(file, 'utf8') === want, `cut at ${c}`).toBe(true);
    }
    expect(cuts.length).toBeGreaterThan(800);
  });

  it('each write failing after 0, 1, half or all but the newline of its bytes, or throwing: --resume ends on the same bytes', async () => {
    hook.replay = byIndex;
    const file = join(dir, 'failed.jsonl');
    hook.file = file;
    const keeps: ((len: number) => number | null)[] = [() => null, () => 0, () => 1, (n) => n >> 1, (n) => n - 1];
    for (let at = 1; at <= 5; at++) {
      for (const [j, keep] of keeps.entries()) {
        rmSync(file, { force: true });
        Object.assign(hook, { failAt: at, writes: 0, keep, asked: [] });
        const err = await run(file, false);
        // a named error saying which write failed and how to go on (EIO: StorageFailed, ENOSPC: QuotaExceeded)
        expect(err, `write ${at}, way ${j}: ${String(err)}`).toBeInstanceOf(j === 0 ? StorageFailed : QuotaExceeded);
        expect((err as NodeJS.ErrnoException).code).toBe(j === 0 ? 'EIO' : 'ENOSPC');
        expect(err!.message, `write ${at}, way ${j}`).toMatch(new RegExp(
          `^(writing the config line|appending the record of question \\d|appending the summary) to ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} failed: ` +
          `${j === 0 ? 'the file system refused the write \\(EIO' : 'the disk is full \\(ENOSPC'}.*; the complete records ` +
          'are kept; once the disk can be written again, run the same command with --resume'));
        hook.failAt = 0;
        hook.asked = [];
        const again = await run(file, true);
        expect(again, `write ${at}, way ${j}`).toBeNull();
        // the questions whose record did not land whole are asked again, and only they
        expect(hook.asked, `write ${at}, way ${j}`).toEqual([0, 1, 2].filter((i) => i + 2 >= at));
        expect(readFileSync(file, 'utf8') === want, `write ${at}, way ${j}`).toBe(true);
      }
    }
  });

  it('with the real system: seeded cuts and a write that fails mid-record resume to the same records', async () => {
    const rng = new Rng(5);
    const inside = (line: number) => starts[line]! + 1 + rng.int(starts[line + 1]! - starts[line]! - 2);
    const file = join(dir, 'real.jsonl');
    for (const c of [inside(0), starts[2]!, inside(3), inside(4)]) {
      writeFileSync(file, Buffer.from(want).subarray(0, c));
      expect(await run(file, true), `cut at ${c}`).toBeNull();
      expect(records(readFileSync(file, 'utf8')), `cut at ${c}`).toEqual(records(want));
    }
    rmSync(file);
    Object.assign(hook, { file, failAt: 3, writes: 0, keep: (n: number) => n >> 1 });
    expect(isEnospc(await run(file, false))).toBe(true);
    hook.failAt = 0;
    expect(readFileSync(file, 'utf8').split('\n')).toHaveLength(3); // config, question 0, half of question 1
    expect(await run(file, true)).toBeNull();
    expect(records(readFileSync(file, 'utf8'))).toEqual(records(want));
  });
});
