import { describe, expect, it } from 'vitest';
import { InvalidArgument } from '../errors.ts';
import { PyRandom, gpqaShuffleSeed, shuffleGpqaOptions } from './pyrandom.ts';

// Golden values from CPython 3.11.2 (/usr/bin/python3); each block names the expression that produced it.

const take = <T>(n: number, f: () => T): T[] => Array.from({ length: n }, f);

describe('PyRandom', () => {
  // [random.Random(s).getrandbits(32) for _ in range(5)]
  // 11087478764331420121 = int(hashlib.md5(b"0::What is 2+2?").hexdigest()[:16], 16)
  const firstOutputs: [bigint | number, number[]][] = [
    [0, [3626764237, 1654615998, 3255389356, 3823568514, 1806341205]],
    [1, [577090037, 2444712010, 3639700191, 3445702192, 3280387012]],
    [42, [2746317213, 478163327, 107420369, 3184935163, 1181241943]],
    [2n ** 32n + 5n, [675479763, 2085189291, 1213270837, 3822202474, 2596110301]],
    [0xffffffffffffffffn, [93740670, 1068495656, 1452108352, 2657516307, 910393425]],
    [11087478764331420121n, [2676062879, 1013309216, 931126818, 2555037572, 2401337135]],
  ];
  it.each(firstOutputs)('first genrand outputs for seed %s', (seed, want) => {
    const rng = new PyRandom(seed);
    expect(take(5, () => rng.genrandUint32())).toEqual(want);
  });

  it('seeds with abs() of a negative seed, as Python does', () => {
    // random.Random(-42).getrandbits(32) == 2746317213
    expect(new PyRandom(-42).genrandUint32()).toBe(2746317213);
    expect(new PyRandom(-42n).genrandUint32()).toBe(2746317213);
  });

  it('getrandbits takes the top k bits of successive outputs', () => {
    // r = random.Random(42); [r.getrandbits(k) for k in (1, 2, 3, 7, 8, 16, 31, 32)]
    const rng = new PyRandom(42);
    const got = [1, 2, 3, 7, 8, 16, 31, 32].map((k) => rng.getrandbits(k));
    expect(got).toEqual([1, 0, 0, 94, 70, 16049, 479341423, 599310825]);
  });

  it('getrandbits rejects k outside 1..32', () => {
    const rng = new PyRandom(1);
    for (const k of [0, 33, -1, 1.5]) expect(() => rng.getrandbits(k)).toThrow(InvalidArgument);
  });

  it('random() matches Python bit for bit', () => {
    // r = random.Random(42); [repr(r.random()) for _ in range(3)]
    const rng = new PyRandom(42);
    expect(take(3, () => rng.random())).toEqual([0.6394267984578837, 0.025010755222666936, 0.27502931836911926]);
  });

  it('randbelow matches Python _randbelow', () => {
    // r = random.Random(7); [r._randbelow(n) for n in (1, 2, 3, 4, 5, 10, 100, 1000, 2**31, 2**32 - 1)]
    const rng = new PyRandom(7);
    const got = [1, 2, 3, 4, 5, 10, 100, 1000, 2 ** 31, 2 ** 32 - 1].map((n) => rng.randbelow(n));
    expect(got).toEqual([0, 0, 1, 0, 0, 8, 12, 374, 249103477, 3907149204]);
    // Python's _randbelow(0) never returns; ours refuses.
    expect(() => rng.randbelow(0)).toThrow(InvalidArgument);
  });

  // a = list(range(4)); b = list(range(10)); random.Random(s).shuffle(a); random.Random(s).shuffle(b)
  const shuffles: [number, number[], number[]][] = [
    [0, [2, 0, 1, 3], [7, 8, 1, 5, 3, 4, 2, 0, 9, 6]],
    [1, [3, 0, 2, 1], [6, 8, 9, 7, 5, 3, 0, 4, 1, 2]],
    [42, [2, 1, 3, 0], [7, 3, 2, 8, 5, 6, 9, 4, 0, 1]],
    [123456789, [0, 1, 2, 3], [0, 1, 9, 4, 3, 5, 2, 6, 8, 7]],
  ];
  it.each(shuffles)('shuffle with seed %i', (seed, four, ten) => {
    const a = [0, 1, 2, 3];
    expect(new PyRandom(seed).shuffle(a)).toBe(a);
    expect(a).toEqual(four);
    expect(new PyRandom(seed).shuffle([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])).toEqual(ten);
  });
});

describe('GPQA option order', () => {
  // h = hashlib.md5(f"{seed}::{stem}".encode()).hexdigest(); n = int(h[:16], 16)
  // o = ["A", "B", "C", "D"]; random.Random(n).shuffle(o)
  const cases: [number, string, bigint, string[]][] = [
    [0, 'What is 2+2?', 11087478764331420121n, ['D', 'C', 'A', 'B']],
    [42, 'Ångström ∑ …', 6813353473279353033n, ['B', 'C', 'A', 'D']],
    [1234, '日本語の質問です。', 14784608117219306841n, ['A', 'D', 'C', 'B']],
    [7, '', 2853627235874535318n, ['D', 'C', 'B', 'A']],
  ];
  it.each(cases)('seed %i, stem %j', async (seed, stem, wantSeed, wantOrder) => {
    expect(await gpqaShuffleSeed(seed, stem)).toBe(wantSeed);
    const options = ['A', 'B', 'C', 'D'] as const;
    expect(await shuffleGpqaOptions(seed, stem, options)).toEqual(wantOrder);
    expect(options).toEqual(['A', 'B', 'C', 'D']);
  });

  it('rejects a non-integer seed (upstream passes an int)', async () => {
    await expect(gpqaShuffleSeed(1.5, 'x')).rejects.toThrow(InvalidArgument);
  });
});
