import { describe, expect, it } from 'vitest';
import { F, gradcheck } from '../../autograd';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { CpuBackend } from '../../tensor/cpu';
import type { Tensor } from '../../tensor/tensor';
import { assertClose } from '../workbench/close';
import { Rng } from '../../util/rng';
import { ropeInvFreq } from '.';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
const exact = (t: Tensor) => [...(f64.data(t) as Float64Array)];
const tight = { atol: 1e-14, rtol: 1e-14 };
const ids = (b: CpuBackend, v: number[]) => b.fromValues(v, [v.length], 'i32');

describe('ropeInvFreq', () => {
  it('computes theta^(-2i/dim) and honours the rotary dimension', () => {
    assertClose(ropeInvFreq({ theta: 10000, headDim: 8 }), [1, 0.1, 0.01, 0.001], { atol: 0, rtol: 1e-7 }, 'default');
    assertClose(ropeInvFreq({ theta: 10000, headDim: 8, partialRotaryFactor: 0.5 }), [1, 0.01], { atol: 0, rtol: 1e-7 }, 'partial');
    expect(ropeInvFreq({ theta: 100, headDim: 8, rotaryDim: 2 })).toEqual(Float32Array.from([1]));
    assertClose(
      ropeInvFreq({ theta: 10000, headDim: 8, scaling: { type: 'linear', factor: 4 } }),
      [0.25, 0.025, 0.0025, 0.00025],
      { atol: 0, rtol: 1e-7 },
      'linear',
    );
  });

  it("reproduces Hugging Face's llama3 scaling, smooth band included (Llama 3.1 8B config)", () => {
    const inv = ropeInvFreq({
      theta: 500000, headDim: 128,
      scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
    });
    expect(inv.length).toBe(64);
    // Python (f64) transcription of _compute_llama3_parameters, rounded to f32; within 3 ulp of
    // transformers' own f32 evaluation. Wavelengths: i ≤ 28 < 2048 (kept), 29..34 in the band, ≥ 35 > 8192 (/8).
    const want: [number, number][] = [
      [0, 1.0], [1, 0.8146172165870667], [28, 0.0032114461064338684], [29, 0.0021665708627551794],
      [31, 0.0008567514014430344], [34, 0.00017850780568551272], [35, 9.556212171446532e-5], [63, 3.068925877869333e-7],
    ];
    for (const [i, v] of want) expect(inv[i], `inv_freq[${i}]`).toBe(v);
    // band by hand: i = 31 has wavelength 2π/f = 3619.249…, smooth = (8192/λ − 1)/3
    const f = 500000 ** (-62 / 128);
    const s = (8192 / ((2 * Math.PI) / f) - 1) / 3;
    expect(inv[31]).toBe(Math.fround(((1 - s) * f) / 8 + s * f));
  });

  it('rejects unsupported scalings and bad rotary dimensions', () => {
    expect(() => ropeInvFreq({ theta: 1e4, headDim: 8, scaling: { rope_type: 'yarn', factor: 4 } })).toThrow(/'yarn' is not supported/);
    expect(() => ropeInvFreq({ theta: 1e4, headDim: 8, scaling: { rope_type: 'llama3', factor: 8 } })).toThrow(/low_freq_factor/);
    expect(() => ropeInvFreq({ theta: 1e4, headDim: 8, rotaryDim: 3 })).toThrow(InvalidArgument);
    expect(() => ropeInvFreq({ theta: 1e4, headDim: 8, rotaryDim: 10 })).toThrow(InvalidArgument);
  });
});

describe('rope (CPU reference)', () => {
  it('rotates pairs (i, i + R/2) by pos·freq and passes dims beyond R through', () => {
    // T = 2, H = 1, D = 6, R = 4: pairs (0, 2) at freq 1 and (1, 3) at freq 0.5; dims 4, 5 pass through
    const xv = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6];
    const y = exact(F.rope(f64.fromValues(xv, [2, 1, 6]), ids(f64, [0, 3]), Float32Array.from([1, 0.5])));
    const [c1, s1, c2, s2] = [Math.cos(3), Math.sin(3), Math.cos(1.5), Math.sin(1.5)];
    const want = [1, 2, 3, 4, 5, 6, 1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2, 5, 6];
    assertClose(y, want, tight, 'rope');
  });

  it('rotates each head of a token alike, applies the attention scaling, and takes any positions', () => {
    const rng = new Rng(9);
    const freq = ropeInvFreq({ theta: 10000, headDim: 8 });
    const xv = rng.normals(3 * 2 * 8);
    const pos = [7, 1000, -2];
    const y = exact(F.rope(f64.fromValues(xv, [3, 2, 8]), ids(f64, pos), freq, { scale: 1.5 }));
    // token by token, one head at a time, at scale 1 then scaled by 1.5
    for (let t = 0; t < 3; t++) {
      for (let h = 0; h < 2; h++) {
        const one = f64.fromValues(xv.slice((t * 2 + h) * 8, (t * 2 + h + 1) * 8), [1, 1, 8]);
        const r = exact(F.rope(one, ids(f64, [pos[t]]), freq)).map((v) => 1.5 * v);
        assertClose(y.slice((t * 2 + h) * 8, (t * 2 + h + 1) * 8), r, tight, `token ${t} head ${h}`);
      }
    }
  });

  it('keeps q·k a function of the relative position', () => {
    const rng = new Rng(10);
    const freq = ropeInvFreq({ theta: 10000, headDim: 16 });
    const qv = rng.normals(16);
    const kv = rng.normals(16);
    const dot = (m: number, n: number) => {
      const q = exact(F.rope(f64.fromValues(qv, [1, 1, 16]), ids(f64, [m]), freq));
      const k = exact(F.rope(f64.fromValues(kv, [1, 1, 16]), ids(f64, [n]), freq));
      return q.reduce((s, v, i) => s + v * k[i], 0);
    };
    // angles are f32 products (like PyTorch), so equality holds to f32 angle rounding
    expect(dot(5, 2)).toBeCloseTo(dot(45, 42), 5);
    expect(dot(5, 2)).not.toBeCloseTo(dot(5, 3), 2);
  });

  it('passes gradcheck for x (full and partial rotary, scaled)', async () => {
    const rng = new Rng(11);
    for (const [D, R, scale] of [[8, 8, 1], [10, 4, 1.3]]) {
      const x = f64.fromValues(rng.normals(3 * 2 * D), [3, 2, D]);
      x.requiresGrad = true;
      const freq = f64.fromValues(ropeInvFreq({ theta: 100, headDim: D, rotaryDim: R }), [R / 2]);
      const pos = ids(f64, [0, 5, 17]);
      const r = await gradcheck((a) => F.rope(a, pos, freq, { scale }), [x]);
      expect(r.ok, `D ${D} R ${R}\n${r.message}`).toBe(true);
      // frequencies given as a Float32Array: uploaded per call, kept by the tape for the backward
      const r2 = await gradcheck((a) => F.rope(a, pos, ropeInvFreq({ theta: 100, headDim: D, rotaryDim: R }), { scale }), [x]);
      expect(r2.ok, `Float32Array frequencies, D ${D} R ${R}\n${r2.message}`).toBe(true);
    }
  });

  it('rejects bad shapes and dtypes with named errors', () => {
    const x = cpu.fromValues(new Array(2 * 2 * 4).fill(1), [2, 2, 4]);
    const freq = Float32Array.from([1, 0.1]);
    expect(() => F.rope(x, ids(cpu, [0, 1, 2]), freq)).toThrow(ShapeMismatch);
    expect(() => F.rope(x, cpu.fromValues([0, 1], [2]), freq)).toThrow(DTypeMismatch);
    expect(() => F.rope(x, ids(cpu, [0, 1]), Float32Array.from([1, 0.1, 0.01]))).toThrow(/head_dim = 4/);
    expect(() => F.rope(x.reshape([4, 4]), ids(cpu, [0, 1, 2, 3]), freq)).toThrow(/\[tokens, heads, head_dim\]/);
  });
});
