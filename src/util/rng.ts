import { InvalidArgument } from '../errors';

/** The whole state of an Rng, JSON-safe, for training checkpoints. */
export interface RngState {
  kind: 'mulberry32';
  /** The 32-bit counter, unsigned. */
  s: number;
}

/** Small seeded generators for initialisation (links, trainable models), the data order, tests and benchmarks (mulberry32 + Box-Muller). */
export class Rng {
  private s: number;
  constructor(seed = 1) {
    this.s = seed >>> 0 || 1;
  }
  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  uniform(lo = -1, hi = 1): number {
    return lo + (hi - lo) * this.next();
  }
  normal(): number {
    const u = 1 - this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  normals(n: number, std = 1): Float32Array {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = this.normal() * std;
    return a;
  }
  uniforms(n: number, lo = -1, hi = 1): Float32Array {
    const a = new Float32Array(n);
    for (let i = 0; i < n; i++) a[i] = this.uniform(lo, hi);
    return a;
  }
  /** A copy of the state; `Rng.fromState` of it continues the same stream. */
  state(): RngState {
    return { kind: 'mulberry32', s: this.s };
  }
  /** An Rng that continues exactly where the one whose state() this was stood. */
  static fromState(state: unknown): Rng {
    const st = state as Partial<RngState> | null;
    if (!st || st.kind !== 'mulberry32' || !Number.isInteger(st.s) || st.s! < 0 || st.s! > 0xffffffff) {
      throw new InvalidArgument(
        `Rng.fromState: expected { kind: 'mulberry32', s: <uint32> }, got ${JSON.stringify(state)}; pass a value from Rng.state()`,
      );
    }
    const r = new Rng(1);
    r.s = st.s!;
    return r;
  }
}
