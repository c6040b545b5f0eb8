/**
 * `rmas ARGS` run in this process (src/runner/cli.ts main), its stdout and stderr captured: the runner's own
 * code path without a child process (whose start-up would dominate the tiny runs).
 */
import { vi } from 'vitest';
import { main } from '../../src/runner/cli';

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
