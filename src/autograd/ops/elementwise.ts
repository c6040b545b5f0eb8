import { addKernel, mulKernel, scaleKernel, subKernel, sumRowsKernel } from '../../kernels/elementwise';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

/** Gradient of a row-broadcast operand: sum over the broadcast rows (a copy when shapes match). */
function reduceTo(g: Tensor, shape: readonly number[]): Tensor {
  return shape.length === g.shape.length ? scale(g, 1) : runOp1(sumRowsKernel, [g], { shape });
}

/** a + b, with b of a's shape or a trailing slice of it. */
export function add(a: Tensor, b: Tensor): Tensor {
  return runOp1(addKernel, [a, b], undefined, () => ({
    backward: ([g], [na, nb]) => [na ? scale(g!, 1) : null, nb ? reduceTo(g!, b.shape) : null],
  }));
}

export function sub(a: Tensor, b: Tensor): Tensor {
  return runOp1(subKernel, [a, b], undefined, () => ({
    backward: ([g], [na, nb]) => {
      let gb: Tensor | null = null;
      if (nb) {
        const neg = scale(g!, -1);
        gb = reduceTo(neg, b.shape);
        if (gb !== neg) neg.dispose();
      }
      return [na ? scale(g!, 1) : null, gb];
    },
  }));
}

export function mul(a: Tensor, b: Tensor): Tensor {
  return runOp1(mulKernel, [a, b], undefined, () => ({
    backward: ([g], [na, nb]) => {
      let gb: Tensor | null = null;
      if (nb) {
        const full = runOp1(mulKernel, [g!, a], undefined);
        gb = reduceTo(full, b.shape);
        if (gb !== full) full.dispose();
      }
      return [na ? runOp1(mulKernel, [g!, b], undefined) : null, gb];
    },
  }));
}

/** alpha * a + beta */
export function scale(a: Tensor, alpha: number, beta = 0): Tensor {
  return runOp1(scaleKernel, [a], { alpha, beta }, () => ({
    backward: ([g]) => [scale(g!, alpha)],
  }));
}

/** Sums a over its leading dims down to `shape` (a trailing slice of a's shape). */
export function sumRows(a: Tensor, shape: readonly number[]): Tensor {
  return runOp1(sumRowsKernel, [a], { shape }, () => ({
    backward: ([g]) => {
      const zeros = a.backend.zeros(a.shape);
      const out = add(zeros, g!);
      zeros.dispose();
      return [out];
    },
  }));
}
