import {
  type Activation, activationBackwardKernel, activationKernel, gluBackwardKernel, gluKernel,
} from '../../kernels/activation';
import type { Tensor } from '../../tensor/tensor';
import { runOp, runOp1 } from './op';

function unary(op: Activation, x: Tensor): Tensor {
  return runOp1(activationKernel, [x], { op }, () => ({
    backward: ([g]) => [runOp1(activationBackwardKernel, [x, g!], { op })],
  }));
}

/** x·σ(x) */
export const silu = (x: Tensor) => unary('silu', x);
/** Exact GELU, 0.5·x·(1 + erf(x/√2)) (PyTorch's default). */
export const gelu = (x: Tensor) => unary('gelu', x);
/** GELU with PyTorch's approximate='tanh'. */
export const geluTanh = (x: Tensor) => unary('gelu_tanh', x);
/** tanh(x) (Gemma's soft-capping: cap·tanh(x/cap)). */
export const tanh = (x: Tensor) => unary('tanh', x);
/** σ(x) = 1/(1 + e⁻ˣ). */
export const sigmoid = (x: Tensor) => unary('sigmoid', x);
/** log(1 + eˣ), PyTorch's (β 1, linear above 20). */
export const softplus = (x: Tensor) => unary('softplus', x);
/** eˣ (Qwen3.5's decay rate exp(A_log)). */
export const exp = (x: Tensor) => unary('exp', x);

function glu(act: Activation, gate: Tensor, up: Tensor): Tensor {
  return runOp1(gluKernel, [gate, up], { act }, () => ({
    backward: ([g], [ng, nu]) => {
      const outs = runOp(gluBackwardKernel, [gate, up, g!], { act, dgate: ng, dup: nu });
      return [ng ? outs[0] : null, nu ? outs[ng ? 1 : 0] : null];
    },
  }));
}

/** silu(gate)·up, the Llama/Qwen/Mistral MLP gate; gradients flow to both operands. */
export const swiglu = (gate: Tensor, up: Tensor) => glu('silu', gate, up);
/** geluTanh(gate)·up, Gemma's MLP gate (GeGLU with PyTorch's approximate='tanh'). */
export const geglu = (gate: Tensor, up: Tensor) => glu('gelu_tanh', gate, up);
