import { describe, expect, it } from 'vitest';
import { median } from './stats';

describe('median', () => {
  it('takes the middle value, the mean of the two middle ones for an even count, NaN for none; the input stays as given', () => {
    const xs = [3, 1, 2];
    expect(median(xs)).toBe(2);
    expect(xs).toEqual([3, 1, 2]);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([10, 2])).toBe(6);
    expect(median([7])).toBe(7);
    expect(median([])).toBeNaN();
  });
});
