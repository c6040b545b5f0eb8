import { describe, expect, it } from 'vitest';
import { F, Tape, gradcheck } from '../../autograd';
import { DTypeMismatch } from '../../errors';
import { decode, encode } from '../../formats/encode';
import { CpuBackend } from '../../tensor/cpu';
import { Rng } from '../../util/rng';
import { SPECIALS } from './cast.cases';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const bits = async (t: { readBytes(): Promise<Uint8Array> }) => [...new Uint16Array((await t.readBytes()).buffer)];


describe('cast (CPU reference)', () => {
  it('rounds f32 to f16 and bf16 to nearest even, with overflow, subnormals and specials', async () => {
    const x = cpu.fromValues(SPECIALS.map((s) => s[0]), [SPECIALS.length]);
    expect(await bits(F.cast(x, 'f16'))).toEqual(SPECIALS.map((s) => s[1]));
    expect(await bits(F.cast(x, 'bf16'))).toEqual(SPECIALS.map((s) => s[2]));
    const nan = await bits(F.cast(cpu.fromValues([NaN], [1]), 'f16'));
    expect(nan[0] & 0x7c00).toBe(0x7c00);
    expect(nan[0] & 0x3ff).not.toBe(0);
  });

  it('widens f16, bf16, q8_0 and q4_0 to f32 exactly', async () => {
    const rng = new Rng(1);
    const v = rng.normals(2 * 64);
    for (const dt of ['f16', 'bf16', 'q8_0', 'q4_0'] as const) {
      const bytes = encode(dt, v, [2, 64]);
      const back = await F.cast(cpu.fromBytes(bytes, [2, 64], dt), 'f32').read();
      expect([...back], dt).toEqual([...decode(dt, bytes, [2, 64])]);
    }
    expect([...(await F.cast(cpu.fromValues([1.5, -3], [2], 'bf16'), 'bf16').read())]).toEqual([1.5, -3]);
  });

  it('refuses to quantize or to treat ids as floats', () => {
    expect(() => F.cast(cpu.fromValues(new Float32Array(32), [1, 32]), 'q8_0')).toThrow(DTypeMismatch);
    expect(() => F.cast(cpu.fromValues([1], [1], 'i32'), 'f32')).toThrow(DTypeMismatch);
  });

  it('passes gradcheck as an f32 copy, and passes gradients straight through f16 storage', async () => {
    const rng = new Rng(2);
    const x = f64.fromValues(rng.normals(6), [2, 3]);
    x.requiresGrad = true;
    const r = await gradcheck((t) => F.cast(t, 'f32'), [x]);
    expect(r.ok, r.message).toBe(true);
    x.grad?.dispose();
    x.grad = null;
    const tape = new Tape();
    const y = tape.run(() => F.cast(F.cast(x, 'f16'), 'f32'));
    const seed = f64.fromValues([1, -2, 3, 0.5, 0.25, -8], [2, 3]);
    await tape.backward(y, seed);
    expect([...(await x.grad!.read())]).toEqual([1, -2, 3, 0.5, 0.25, -8]);
    tape.dispose();
  });
});
