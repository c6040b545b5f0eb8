/** The fuzzing harness reports each way a reader can break the property (test/fuzz/targets/selftest.ts breaks it on purpose). */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runFuzz } from './harness';

describe('fuzz harness', () => {
  it('reports an uncaught error, an unnamed one, a hang, an allocation, a write outside, a process, a wrong result, eval', async () => {
    const r = await runFuzz({ module: 'selftest.ts', target: 'selftest', cases: 10, caseTimeoutMs: 1500 });
    expect(r.failures.map((f) => [f.case, f.kind])).toEqual([
      [1, 'uncaught'], [2, 'unnamed'], [3, 'hang'], [4, 'alloc'], [5, 'fs'], [6, 'exec'], [7, 'wrong-result'], [9, 'exec'],
    ]);
    expect([r.cases, r.ok, r.refused, r.known.length]).toEqual([10, 1, 1, 0]);
    expect(r.failures[3]!.detail).toMatch(/new Uint8Array\(1000000000\): 1000000000 bytes in one allocation/);
    expect(existsSync('/tmp/rmas-fuzz-selftest-escape')).toBe(false); // refused before it was written
  }, 120_000);
});
