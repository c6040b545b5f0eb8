import { argmaxKernel, sampleAttrs, sampleKernel } from '../../kernels/sample';
import type { Tensor } from '../../tensor/tensor';
import { runOp1 } from './op';

export interface SampleOptions {
  /** Default 1; 0 picks the argmax. */
  temperature?: number;
  /** Default 0 (off). */
  topK?: number;
  /** Default 1 (off). */
  topP?: number;
  /** Default 0. The draw of batch row b is a pure function of (seed, step, b). */
  seed?: number;
  /** Decode step, default 0. */
  step?: number;
}

/** Token ids [B] (i32) drawn from logits [V] or [B, V]; see kernels/sample. Not differentiable. */
export function sample(logits: Tensor, opts: SampleOptions = {}): Tensor {
  return runOp1(sampleKernel, [logits], sampleAttrs(opts));
}

/** Greedy ids [B] (i32): the lowest index among the row's maxima. */
export function argmax(logits: Tensor): Tensor {
  return runOp1(argmaxKernel, [logits], undefined);
}
