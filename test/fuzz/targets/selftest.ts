/**
 * A target that breaks the property on purpose, one way per case, for test/fuzz/harness.test.ts: case 0 is the seed
 * (reads fine), cases 1-9 are its "truncations", each misbehaving as its number says.
 */
import { execSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { InvalidArgument } from '../../../src/errors';
import type { FuzzTarget } from '../harness';
import { PropertyViolation } from '../harness';

export const selftest: FuzzTarget<number> = {
  name: 'selftest',
  seeds: () => [0],
  truncations: () => [1, 2, 3, 4, 5, 6, 7, 8, 9],
  mutate: (_rng, x) => x,
  labels: () => ['selftest.bin'],
  size: () => 100,
  key: (x) => String(x),
  run: async (x, ctx) => {
    switch (x) {
      case 1: throw new TypeError('x is undefined'); // uncaught
      case 2: throw new InvalidArgument('something is wrong'); // named, but names no file
      case 3: for (;;); // hang
      case 4: return String(new Uint8Array(1e9).length); // alloc: far more than 100 bytes justify
      case 5: writeFileSync('/tmp/rmas-fuzz-selftest-escape', 'x'); return 'wrote'; // fs
      case 6: return execSync('true').toString(); // exec
      case 7: throw new PropertyViolation('a wrong result'); // wrong-result
      case 8: writeFileSync(`${ctx.dir}/inside.txt`, 'x'); throw new InvalidArgument('selftest.bin: refused'); // fine: named
      case 9: return new Function('return 1')() as string; // exec (code from a string)
      default: return 'ok';
    }
  },
  files: (x) => ({ 'selftest.bin': Uint8Array.of(x) }),
};
