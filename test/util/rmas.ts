/**
 * The runner in this process, for tests: `rmas ARGS` run (src/runner/cli.ts main), its stdout and stderr captured: the runner's own
 * code path without a child process (whose start-up would dominate the tiny runs).
 */
import { vi } from 'vitest';
import { main } from '../../src/runner/cli';
import { trainCmd } from '../../src/runner/train-cmd';
import type { TrainArgs } from '../../src/runner/train-args';
import { CpuBackend } from '../../src/tensor/cpu';

export async function rmasInProcess(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => ((out += String(s)), true));
  vi.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => ((err += String(s)), true));
  try {
    return { code: await main(argv), out, err };
  } finally {
    vi.restoreAllMocks();
  }
}

/**
 * `rmas train-inner|train-outer` in this process on the CPU backend (trainCmd), its output captured; a refusal is
 * returned as `error` rather than thrown, so that a test can read what was printed before it.
 */
export async function trainInProcess(kind: 'inner' | 'outer', a: TrainArgs, place?: Parameters<typeof trainCmd>[4]) {
  let out = '';
  let err = '';
  try {
    await trainCmd(kind, a, async () => new CpuBackend('f32'), { out: (s) => (out += s), err: (s) => (err += s), tty: false }, place);
    return { out, err, error: null as Error | null };
  } catch (e) {
    return { out, err, error: e as Error };
  }
}
