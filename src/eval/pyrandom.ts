/**
 * CPython's `random.Random` (MT19937, Modules/_randommodule.c and Lib/random.py), just far enough to
 * reproduce how the upstream GPQA evaluation shuffles answer options:
 *
 *   rng = random.Random(int(hashlib.md5(f"{seed}::{stem}".encode()).hexdigest()[:16], 16))
 *   rng.shuffle(options)
 *
 * Checked against CPython 3.11 by the golden values in pyrandom.test.ts.
 */
import { InvalidArgument } from '../errors.ts';
import { nodeImport } from '../util/node-import.ts';

const N = 624;
const M = 397;
const MATRIX_A = 0x9908b0df;
const UPPER_MASK = 0x80000000;
const LOWER_MASK = 0x7fffffff;


/** The 32-bit words of abs(seed), least significant first; [0] for zero (CPython's random_seed). */
function seedKey(seed: bigint | number): number[] {
  if (typeof seed === 'number' && !Number.isSafeInteger(seed)) {
    throw new InvalidArgument(`PyRandom seed must be an integer (pass a bigint beyond 2^53), got ${seed}`);
  }
  let n = BigInt(seed);
  if (n < 0n) n = -n;
  const key: number[] = [];
  for (; n > 0n; n >>= 32n) key.push(Number(n & 0xffffffffn));
  return key.length > 0 ? key : [0];
}

export class PyRandom {
  private readonly mt = new Uint32Array(N);
  private mti = N + 1;

  /** Seeds like `random.Random(seed)` for an int seed: init_by_array over the words of abs(seed). */
  constructor(seed: bigint | number) {
    this.initByArray(seedKey(seed));
  }

  private initGenrand(s: number): void {
    const mt = this.mt;
    mt[0] = s;
    for (let i = 1; i < N; i++) {
      const prev = mt[i - 1]!;
      mt[i] = Math.imul(1812433253, prev ^ (prev >>> 30)) + i;
    }
    this.mti = N;
  }

  private initByArray(key: readonly number[]): void {
    const mt = this.mt;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const prev = mt[i - 1]!;
      mt[i] = (mt[i]! ^ Math.imul(prev ^ (prev >>> 30), 1664525)) + key[j]! + j;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const prev = mt[i - 1]!;
      mt[i] = (mt[i]! ^ Math.imul(prev ^ (prev >>> 30), 1566083941)) - i;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
    }
    mt[0] = 0x80000000;
  }

  private twist(): void {
    const mt = this.mt;
    for (let kk = 0; kk < N; kk++) {
      const y = (mt[kk]! & UPPER_MASK) | (mt[(kk + 1) % N]! & LOWER_MASK);
      mt[kk] = mt[(kk + M) % N]! ^ (y >>> 1) ^ (y & 1 ? MATRIX_A : 0);
    }
    this.mti = 0;
  }

  /** The next raw 32-bit output, as an unsigned number. */
  genrandUint32(): number {
    if (this.mti >= N) this.twist();
    let y = this.mt[this.mti++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  /** `getrandbits(k)` for 1 <= k <= 32: the top k bits of one output. */
  getrandbits(k: number): number {
    if (!Number.isInteger(k) || k < 1 || k > 32) {
      throw new InvalidArgument(`getrandbits supports 1 <= k <= 32 here, got ${k}`);
    }
    return this.genrandUint32() >>> (32 - k);
  }

  /** Python's `random()`: a float in [0, 1) with 53 random bits. */
  random(): number {
    const a = this.genrandUint32() >>> 5;
    const b = this.genrandUint32() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }

  /** Python's `_randbelow(n)` (rejection sampling on n.bit_length() bits), 1 <= n < 2^32. */
  randbelow(n: number): number {
    // Python loops forever on n = 0; refuse it instead.
    if (!Number.isInteger(n) || n < 1 || n > 0xffffffff) {
      throw new InvalidArgument(`randbelow needs an integer 1 <= n < 2^32, got ${n}`);
    }
    const k = 32 - Math.clz32(n);
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return r;
  }

  /** Python's `shuffle`, in place; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.randbelow(i + 1);
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  }
}

/** `int(md5(f"{seed}::{stem}".encode()).hexdigest()[:16], 16)`, the upstream GPQA shuffle seed. */
export async function gpqaShuffleSeed(seed: number, stem: string): Promise<bigint> {
  if (!Number.isSafeInteger(seed)) {
    throw new InvalidArgument(`GPQA seed must be an integer, got ${seed}`);
  }
  const { createHash } = await nodeImport('node:crypto');
  const hex = createHash('md5').update(`${seed}::${stem}`, 'utf8').digest('hex');
  return BigInt(`0x${hex.slice(0, 16)}`);
}

/** A copy of `options` in the order the upstream GPQA evaluation shows them for this (seed, stem). */
export async function shuffleGpqaOptions<T>(seed: number, stem: string, options: readonly T[]): Promise<T[]> {
  return new PyRandom(await gpqaShuffleSeed(seed, stem)).shuffle([...options]);
}
