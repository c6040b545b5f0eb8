import { describe, expect, it } from 'vitest';
import { F } from '../../autograd';
import { FlatParams } from '../../autograd/params';
import { DTypeMismatch, InvalidArgument, ShapeMismatch } from '../../errors';
import { assignKernel, fillKernel } from '.';
import { CpuBackend } from '../../tensor/cpu';
import { assertClose } from '../workbench/close';
// torch 1.13 AdamW + clip_grad_norm_ in float32, made by scripts/golden/adamw.py
import golden from './golden/adamw.json';

const cpu = new CpuBackend();
const f64 = new CpuBackend('f64');
/** torch runs in f32, so one rounding per operation and step separates it from our references. */
const TORCH_F32 = { atol: 5e-7, rtol: 1e-6 };

describe('AdamW (CPU reference)', () => {
  for (const backend of [cpu, f64]) {
    it(`follows torch.optim.AdamW with clip_grad_norm_ over 5 steps (${backend.name})`, async () => {
      const fp = new FlatParams(backend, [
        { name: 'proj.weight', shape: [3, 4], init: golden.init.w },
        { name: 'proj.bias', shape: [4], init: golden.init.bias },
      ]);
      expect(fp.entries.map((e) => e.decay)).toEqual([true, false]);
      const opt = new F.AdamW([fp], { weightDecay: golden.weight_decay, maxGradNorm: golden.max_norm, beta1: 0.9, beta2: 0.95, eps: 1e-8 });
      for (const [k, s] of golden.steps.entries()) {
        opt.zeroGrad();
        fp.get('proj.weight').grad = backend.fromValues(s.grad_w, [3, 4]);
        fp.get('proj.bias').grad = backend.fromValues(s.grad_bias, [4]);
        opt.gather();
        const norm = opt.step(s.lr);
        assertClose(await norm.read(), [s.total_norm], TORCH_F32, `step ${k + 1} norm`);
        const p = await fp.export();
        assertClose(p.get('proj.weight')!, s.w, TORCH_F32, `step ${k + 1} weight`);
        assertClose(p.get('proj.bias')!, s.bias, TORCH_F32, `step ${k + 1} bias`);
      }
      expect(opt.t).toBe(5);
      const [m, v] = [await fp.export('m'), await fp.export('v')];
      const st = golden.final_state;
      assertClose(m.get('proj.weight')!, st.m_w, TORCH_F32, 'm weight');
      assertClose(m.get('proj.bias')!, st.m_bias, TORCH_F32, 'm bias');
      // v holds squares of clipped gradients (~1e-4): the same relative error is a smaller absolute one
      assertClose(v.get('proj.weight')!, st.v_w, { atol: 1e-9, rtol: 1e-5 }, 'v weight');
      assertClose(v.get('proj.bias')!, st.v_bias, { atol: 1e-9, rtol: 1e-5 }, 'v bias');
    });
  }

  it('moves each element by about lr against its gradient sign on the first step', async () => {
    const p = f64.fromValues([1, -2, 0.5, 3], [4]);
    const g = f64.fromValues([0.3, -4, 1e-3, 0], [4]);
    const m = f64.zeros([4]);
    const v = f64.zeros([4]);
    const mask = f64.fromValues([1, 1, 0, 1], [4]);
    F.adamwStep(p, g, m, v, { lr: 0.01, t: 1, weightDecay: 0.5, decayMask: mask });
    // t = 1: m-hat = g and v-hat = g^2, so the update is lr * g / (|g| + eps) after decoupled decay
    const want = [
      1 * (1 - 0.005) - 0.01 * (0.3 / (0.3 + 1e-8)),
      -2 * (1 - 0.005) + 0.01 * (4 / (4 + 1e-8)),
      0.5 - 0.01 * (1e-3 / (1e-3 + 1e-8)),
      3 * (1 - 0.005),
    ];
    assertClose(f64.data(p), want, { atol: 1e-15, rtol: 1e-12 }, 'params');
    assertClose(f64.data(m), [0.03, -0.4, 1e-4, 0], { atol: 1e-15, rtol: 1e-12 }, 'm');
    assertClose(f64.data(v), [0.05 * 0.09, 0.05 * 16, 0.05 * 1e-6, 0], { atol: 1e-15, rtol: 1e-12 }, 'v');
  });

  it('rejects a step number below 1, mismatched buffers and bad hyperparameters', () => {
    const t4 = () => cpu.zeros([4]);
    expect(() => F.adamwStep(t4(), t4(), t4(), t4(), { lr: 1e-3, t: 0 })).toThrow(InvalidArgument);
    expect(() => F.adamwStep(t4(), cpu.zeros([5]), t4(), t4(), { lr: 1e-3, t: 1 })).toThrow(ShapeMismatch);
    expect(() => F.adamwStep(t4(), t4(), t4(), t4(), { lr: 1e-3, t: 1, beta2: 1 })).toThrow(/beta2 must be in \[0, 1\)/);
    expect(() => F.adamwStep(t4(), t4(), t4(), t4(), { lr: -1, t: 1 })).toThrow(InvalidArgument);
    expect(() => F.adamwStep(cpu.zeros([4], 'bf16'), t4(), t4(), t4(), { lr: 1e-3, t: 1 })).toThrow(DTypeMismatch);
    expect(() => F.adamwStep(t4(), t4(), t4(), t4(), { lr: 1e-3, t: 1, decayMask: cpu.zeros([3]) })).toThrow(ShapeMismatch);
    expect(() => F.adamwStep(t4(), t4(), t4(), cpu.zeros([4], 'f16'), { lr: 1e-3, t: 1 })).toThrow(DTypeMismatch);
  });

  it('assign and fill reject mismatched shapes and non-f32 buffers', () => {
    expect(() => cpu.run(assignKernel, [cpu.zeros([4]), cpu.zeros([5])], { add: false })).toThrow(ShapeMismatch);
    expect(() => cpu.run(assignKernel, [cpu.zeros([4]), cpu.zeros([4], 'f16')], { add: true })).toThrow(DTypeMismatch);
    expect(() => cpu.run(fillKernel, [cpu.zeros([4], 'i32')], { value: 1 })).toThrow(DTypeMismatch);
  });
});
