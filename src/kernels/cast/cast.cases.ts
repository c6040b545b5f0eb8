import { F } from '../../autograd';
import { decode, encode } from '../../formats/encode';
import { type ParityCase, assertClose, expectParity } from '../workbench';
import { expectGradParity } from '../workbench/gradparity';

/** Values that exercise rounding ties, overflow, subnormals and specials, with their f16 and bf16 bits. */
export const SPECIALS: [number, number, number][] = [
  [1, 0x3c00, 0x3f80],
  [-2, 0xc000, 0xc000],
  [65504, 0x7bff, 0x4780], // bf16 rounds up (low bits 0xe000)
  [65520, 0x7c00, 0x4780], // f16: halfway to 65536 rounds to even = inf
  [1 + 2 ** -11, 0x3c00, 0x3f80], // f16 tie, to even (down)
  [1 + 3 * 2 ** -11, 0x3c02, 0x3f80], // f16 tie, to even (up)
  [1 + 2 ** -8, 0x3c04, 0x3f80], // bf16 tie, to even (down)
  [1 + 3 * 2 ** -8, 0x3c0c, 0x3f82], // bf16 tie, to even (up)
  [2 ** -24, 0x0001, 0x3380], // smallest f16 subnormal
  [2 ** -25, 0x0000, 0x3300], // f16 tie between 0 and 2^-24: to even (0)
  [3 * 2 ** -25, 0x0002, 0x33c0], // f16 tie between 1 and 2 ulps of subnormal: to even (2)
  [-0, 0x8000, 0x8000],
  [Infinity, 0x7c00, 0x7f80],
  [-Infinity, 0xfc00, 0xff80],
  [1e-40, 0x0000, 0x0001], // an f32 subnormal
];
const EXACT = { atol: 0, rtol: 0 };

export const cases: ParityCase[] = [1, 3, 17, 96, 200].map((n) => ({
  name: `cast f32 <-> f16/bf16 bit-exact, q8_0/q4_0 -> f32, [${n}, 3]`,
  async run(env) {
    // random values across f16's range plus the rounding edge cases
    const v = env.rng.normals(n * 3).map((x, i) => (i % 3 === 0 ? x * 1e-5 : i % 3 === 1 ? x * 3e4 : x));
    SPECIALS.slice(0, n * 3).forEach((s, i) => (v[i] = s[0]));
    if (n > 10) v[n * 3 - 1] = NaN;
    const x = { g: env.gpu.fromValues(v, [n, 3]), c: env.cpu.fromValues(v, [n, 3]) };
    for (const dt of ['f16', 'bf16'] as const) {
      const g = F.cast(x.g, dt);
      const c = F.cast(x.c, dt);
      const [gb, cb] = [await g.readBytes(), await c.readBytes()];
      assertClose(new Uint16Array(gb.buffer), new Uint16Array(cb.buffer), EXACT, `f32 -> ${dt} bits`);
      await expectParity(F.cast(g, 'f32'), F.cast(c, 'f32'), EXACT, `${dt} -> f32`);
    }
    const q = env.rng.normals(n * 32);
    for (const dt of ['q8_0', 'q4_0'] as const) {
      const bytes = encode(dt, q, [n, 32]);
      const got = await F.cast(env.gpu.fromBytes(bytes, [n, 32], dt), 'f32').read();
      assertClose(got, decode(dt, bytes, [n, 32]), EXACT, `${dt} -> f32`);
    }
    const plain = env.rng.normals(n * 3);
    await expectGradParity(env, 'cast backward', (t) => F.cast(F.cast(t, 'bf16'), 'f32'), [{ values: plain, shape: [n, 3] }], EXACT);
  },
}));
