/** Rng.state / Rng.fromState: a restored generator continues the exact stream, through JSON too. */
import { describe, expect, it } from 'vitest';
import { InvalidArgument } from '../errors';
import { Rng } from './rng';

describe('Rng state', () => {
  it('continues the same stream after a JSON round trip', () => {
    const a = new Rng(42);
    a.normals(7); // odd count: Box-Muller keeps no cached second value, so state is the counter alone
    const saved = JSON.parse(JSON.stringify(a.state()));
    const b = Rng.fromState(saved);
    const wantN = a.normals(5);
    const wantU = a.uniforms(5, -3, 2);
    const wantI = Array.from({ length: 5 }, () => a.int(1000));
    expect(b.normals(5)).toEqual(wantN);
    expect(b.uniforms(5, -3, 2)).toEqual(wantU);
    expect(Array.from({ length: 5 }, () => b.int(1000))).toEqual(wantI);
  });

  it('holds the mulberry32 counter: seed 42 advances by 0x6d2b79f5 per draw', () => {
    const r = new Rng(42);
    expect(r.state()).toEqual({ kind: 'mulberry32', s: 42 });
    r.next();
    r.next();
    expect(r.state().s).toBe((42 + 2 * 0x6d2b79f5) >>> 0);
  });

  it('restores a zero counter as zero (the constructor would map seed 0 to 1)', () => {
    const z = Rng.fromState({ kind: 'mulberry32', s: 0 });
    const one = Rng.fromState({ kind: 'mulberry32', s: 1 });
    expect(z.state().s).toBe(0);
    expect(z.next()).not.toBe(one.next());
  });

  it('refuses states it did not write', () => {
    for (const bad of [
      null,
      {},
      { kind: 'mulberry32', s: -1 },
      { kind: 'mulberry32', s: 2 ** 32 },
      { kind: 'pcg', s: 3 },
      { kind: 'mulberry32', s: 1.5 },
    ]) {
      expect(() => Rng.fromState(bad)).toThrow(InvalidArgument);
    }
  });
});
