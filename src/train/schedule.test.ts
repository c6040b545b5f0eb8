/**
 * Schedules against transformers' formulas. The reference numbers were computed once with plain Python
 * 3 `math` from the same formulas (transformers is not installed here):
 *   cos(k,w,T,c) = k/max(1,w) if k<w else max(0, 0.5*(1+math.cos(math.pi*c*2*(k-w)/max(1,T-w))))
 *   lin(k,w,T)   = k/max(1,w) if k<w else max(0, (T-k)/max(1,T-w))
 * and printed with repr().
 */
import { describe, expect, it } from 'vitest';
import { InvalidArgument } from '../errors';
import { SCHEDULER_TYPES, lrFactor, parseSchedulerType } from './schedule';

// [step, cosine(w=10, T=100), linear(w=10, T=100)]
const TABLE: [number, number, number][] = [
  [0, 0.0, 0.0],
  [1, 0.1, 0.1],
  [5, 0.5, 0.5],
  [9, 0.9, 0.9],
  [10, 1.0, 1.0],
  [11, 0.9996954135095479, 0.9888888888888889],
  [37, 0.7938926261462366, 0.7],
  [55, 0.5, 0.5],
  [99, 0.00030458649045211894, 0.011111111111111112],
  [100, 0.0, 0.0],
  [101, 0.00030458649045211894, 0.0],
  [150, 0.586824088833465, 0.0],
];

describe('lrFactor', () => {
  it('cosine and linear match the Python table (warmup 10, total 100)', () => {
    for (const [k, c, l] of TABLE) {
      expect(lrFactor('cosine', k, 10, 100), `cosine step ${k}`).toBeCloseTo(c, 14);
      expect(lrFactor('linear', k, 10, 100), `linear step ${k}`).toBeCloseTo(l, 14);
    }
  });

  it('first optimizer step runs at 0 with warm-up, mid-point at 0.5, end at 0', () => {
    expect(lrFactor('cosine', 0, 10, 20000)).toBe(0);
    expect(lrFactor('cosine', 1, 10, 20000)).toBe(0.1);
    expect(lrFactor('cosine', 10, 10, 20000)).toBe(1);
    expect(lrFactor('cosine', 10005, 10, 20000)).toBeCloseTo(0.5, 15);
    expect(lrFactor('cosine', 10000, 10, 20000)).toBeCloseTo(0.5003928954890301, 14);
    expect(lrFactor('cosine', 19999, 10, 20000)).toBeCloseTo(6.1746758817093905e-9, 20);
    expect(lrFactor('cosine', 20000, 10, 20000)).toBe(0);
  });

  it('cosine honours num_cycles (Python table)', () => {
    // [step, c=1.0 w=0 T=8, c=1.5 w=2 T=10]
    const rows: [number, number, number][] = [
      [0, 1.0, 0.0],
      [3, 0.14644660940672627, 0.6913417161825449],
      [7, 0.8535533905932737, 0.9619397662556433],
      [8, 1.0, 0.8535533905932738],
    ];
    for (const [k, a, b] of rows) {
      expect(lrFactor('cosine', k, 0, 8, 1.0)).toBeCloseTo(a, 14);
      expect(lrFactor('cosine', k, 2, 10, 1.5)).toBeCloseTo(b, 14);
    }
  });

  it('without warm-up the first step runs at full lr', () => {
    expect(lrFactor('cosine', 0, 0, 100)).toBe(1);
    expect(lrFactor('linear', 0, 0, 100)).toBe(1);
    expect(lrFactor('linear', 25, 0, 100)).toBe(0.75);
  });

  it('constant ignores warm-up; constant_with_warmup ramps then holds 1', () => {
    expect([0, 3, 50, 500].map((k) => lrFactor('constant', k, 10, 100))).toEqual([1, 1, 1, 1]);
    expect([0, 3, 9, 10, 50, 500].map((k) => lrFactor('constant_with_warmup', k, 10, 100))).toEqual([0, 0.3, 0.9, 1, 1, 1]);
    expect(lrFactor('constant_with_warmup', 2, 4, 0)).toBe(0.5);
  });

  it('degenerate totals divide by max(1, ·) as transformers does', () => {
    expect(lrFactor('cosine', 10, 10, 10)).toBe(1); // progress 0 / max(1, 0)
    expect(lrFactor('linear', 10, 10, 10)).toBe(0);
    expect(lrFactor('linear', 10, 10, 5)).toBe(0); // negative clipped
  });

  it('rejects bad steps and types', () => {
    expect(() => lrFactor('cosine', -1, 10, 100)).toThrow(InvalidArgument);
    expect(() => lrFactor('cosine', 1.5, 10, 100)).toThrow(InvalidArgument);
    expect(() => lrFactor('cosine', 1, -2, 100)).toThrow(InvalidArgument);
    expect(() => lrFactor('polynomial' as never, 20, 10, 100)).toThrow(/cosine, linear, constant, constant_with_warmup/);
  });
});

describe('parseSchedulerType', () => {
  it('accepts the four upstream names', () => {
    for (const t of SCHEDULER_TYPES) expect(parseSchedulerType(t)).toBe(t);
    expect(parseSchedulerType(' Cosine ')).toBe('cosine');
  });
  it('lists the choices for anything else', () => {
    expect(() => parseSchedulerType('cosine_with_restarts')).toThrow(InvalidArgument);
    expect(() => parseSchedulerType('')).toThrow(/choose one of cosine, linear, constant, constant_with_warmup/);
  });
});
