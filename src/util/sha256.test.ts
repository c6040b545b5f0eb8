import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Rng } from './rng';
import { Sha256, sha256Hex } from './sha256';

const hexOf = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const rng = new Rng(11);
const data = Uint8Array.from({ length: 10_000 }, () => rng.int(256));

describe('Sha256 (incremental)', () => {
  it('equals node:crypto for lengths around block edges, fed in uneven pieces', () => {
    for (const n of [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 10_000]) {
      const h = new Sha256();
      for (let i = 0; i < n; i += 37) h.update(data.subarray(i, Math.min(n, i + 37)));
      expect(h.hex(), `${n}`).toBe(hexOf(data.subarray(0, n)));
    }
    expect(new Sha256().update(new TextEncoder().encode('abc')).hex()).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
  });
});

describe('sha256Hex', () => {
  it('equals node:crypto', async () => {
    for (const n of [0, 3, 64, 10_000]) expect(await sha256Hex(data.subarray(0, n)), `${n}`).toBe(hexOf(data.subarray(0, n)));
  });
});
