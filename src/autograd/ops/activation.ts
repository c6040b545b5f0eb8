import {
  type Activation, activationBackwardKernel, activationKernel, swigluBackwardKernel, swigluKernel,
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

/** silu(gate)·up, the Llama/Qwen MLP gate; gradients flow to both operands. */
export function swiglu(gate: Tensor, up: Tensor): Tensor {
  return runOp1(swigluKernel, [gate, up], undefined, () => ({
    backward: ([g], [ng, nu]) => {
      const outs = runOp(swigluBackwardKernel, [gate, up, g!], { dgate: ng, dup: nu });
      return [ng ? outs[0] : null, nu ? outs[ng ? 1 : 0] : null];
    },
  }));
}
