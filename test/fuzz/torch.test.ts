/**
 * Fuzzing the `.pt` reader: zip and pickle mutations, hostile globals and opcodes among them; a file that loads
 * names only allowlisted globals, and nothing is ever executed (test/fuzz/harness.ts). Below, the regression cases.
 */
import { describe, expect, it } from 'vitest';
import { CorruptCheckpoint, UnsafeCheckpoint } from '../../src/errors';
import { readTorchStateDict } from '../../src/formats/torch';
import { writeZip } from '../../src/formats/zip';
import { fuzzReader, fuzzTimeout } from './harness';

describe('fuzz: torch .pt', () => {
  it('each case reads to a consistent state dict or a named error naming the file; no global outside the allowlist loads', async () => {
    expect(await fuzzReader('torch.ts', 'torch', 4000)).toEqual([]);
  }, fuzzTimeout());
});

describe('torch .pt: regressions', () => {
  /** A torch.save-shaped zip holding this pickle alone. */
  const pt = (...pkl: number[]) =>
    writeZip([['archive/data.pkl', Uint8Array.from(pkl)], ['archive/version', new TextEncoder().encode('3\n')]]);
  const refusal = (b: Uint8Array) => {
    try {
      readTorchStateDict(b, 'case.pt');
    } catch (e) {
      return e;
    }
    return null;
  };

  it('a BINUNICODE string that is not UTF-8 is refused as CorruptCheckpoint (found by the fuzzer: it was a raw TypeError)', () => {
    const e = refusal(pt(0x80, 0x02, 0x58, 1, 0, 0, 0, 0xff, 0x2e)); // PROTO 2, BINUNICODE "\xff", STOP
    expect(e).toBeInstanceOf(CorruptCheckpoint);
    expect((e as Error).message).toMatch(/^case\.pt: data\.pkl holds a string that is not UTF-8 \(at byte 7\)/);
  });

  it('a dict keyed by a list that holds itself is refused by name (the message\'s JSON.stringify met the cycle: a TypeError)', () => {
    // EMPTY_DICT, EMPTY_LIST, BINPUT 0, BINGET 0, APPEND (the list now holds itself), NONE, SETITEM, STOP
    const e = refusal(pt(0x7d, 0x5d, 0x71, 0, 0x68, 0, 0x61, 0x4e, 0x73, 0x2e));
    expect(e).toBeInstanceOf(CorruptCheckpoint);
    expect((e as Error).message).toMatch(/^case\.pt: entry \[an array too deep or cyclic to show\] is not a tensor/);
  });

  it('globals named after Object.prototype\'s members are refused like any other (the allowlist now checks own keys only)', () => {
    for (const g of ['builtins\nconstructor\n', 'torch\ntoString\n']) {
      const e = refusal(pt(0x63, ...new TextEncoder().encode(g), 0x29, 0x52, 0x2e)); // GLOBAL, EMPTY_TUPLE, REDUCE, STOP
      expect(e).toBeInstanceOf(UnsafeCheckpoint);
      expect((e as Error).message).toMatch(/nothing in it was executed/);
    }
  });
});
